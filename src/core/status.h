// Building Status values: messages that name the argument, CUDA errors.
#pragma once

#include <cstdio>
#include <string>
#include <type_traits>

#include <cuda_runtime_api.h>

#include "blockattn/blockattn.h"

namespace blockattn::core {

// Message pieces. No iostreams: a host process (e.g. Python) may have changed
// the global C++ locale, and formatting must not depend on it.
inline std::string piece(const char* s) { return s; }
inline std::string piece(const std::string& s) { return s; }
inline std::string piece(float x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}
template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
std::string piece(Int x) {
  return std::to_string(x);
}

template <typename... Parts>
Status status(StatusCode code, const Parts&... parts) {
  return {code, (std::string("blockattn: ") + ... + piece(parts))};
}
template <typename... Parts>
Status invalid(const Parts&... parts) {
  return status(StatusCode::kInvalidArgument, parts...);
}
template <typename... Parts>
Status unsupported(const Parts&... parts) {
  return status(StatusCode::kUnsupported, parts...);
}

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return status(StatusCode::kCudaError, what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

// A failure of the runtime call just made: its sticky or last error, or a
// generic one when the runtime reported none (e.g. an occupancy of zero).
inline Status cuda_failure(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_status(err, what);
  return status(StatusCode::kCudaError, what, ": the CUDA runtime refused without an error code");
}

#define BLOCKATTN_RETURN_IF_ERROR(expr)   \
  do {                                    \
    ::blockattn::Status status_ = (expr); \
    if (!status_.ok()) return status_;    \
  } while (0)

}  // namespace blockattn::core
