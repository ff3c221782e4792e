// Seeds for randomized tests that can be replayed. Each test draws from
// test_rng(): its seed combines BLOCKATTN_TEST_SEED (a random one when unset)
// with the test's full name, and is printed, so a failure's output says how to
// rerun exactly that case:  BLOCKATTN_TEST_SEED=<printed value> ctest -R <test>.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace blockattn::testing {

// The run's base seed: BLOCKATTN_TEST_SEED, else one random value per process.
inline uint64_t base_test_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("BLOCKATTN_TEST_SEED"); env != nullptr && *env != '\0')
      return static_cast<uint64_t>(std::strtoull(env, nullptr, 0));
    return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }();
  return seed;
}

// FNV-1a of the current test's "Suite.Name/param" (0 outside a test).
inline uint64_t current_test_hash() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return 0;
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

// A generator for the current test, announced on stdout and in the XML report.
inline std::mt19937_64 test_rng() {
  const uint64_t base = base_test_seed();
  std::printf("  [seed] BLOCKATTN_TEST_SEED=%llu\n", static_cast<unsigned long long>(base));
  ::testing::Test::RecordProperty("BLOCKATTN_TEST_SEED", std::to_string(base));
  return std::mt19937_64(base ^ current_test_hash());
}

}  // namespace blockattn::testing
