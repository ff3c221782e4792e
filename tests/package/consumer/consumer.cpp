// Uses the public API the way an application would, with no GPU needed: the
// kernel table, the workspace size, and calls (attention and layer) that fail
// validation (so nothing is launched) with a message naming the argument.
#include <cstdio>
#include <string>

#include <blockattn/blockattn.h>
#include <blockattn/blockattn_c.h>
#include <blockattn/layer.h>

int main() {
  size_t n = 0;
  const blockattn::KernelConfig* rows = blockattn::supported_configs(&n);
  if (n == 0 || rows == nullptr) {
    std::fprintf(stderr, "consumer: the library lists no kernels\n");
    return 1;
  }
#ifdef CONSUMER_ONLY_HEAD_DIM
  for (size_t i = 0; i < n; ++i)
    if (rows[i].head_dim != CONSUMER_ONLY_HEAD_DIM || rows[i].block_size != CONSUMER_ONLY_BLOCK_SIZE) {
      std::fprintf(stderr,
                   "consumer: built for head dim %d, block size %d, but the library lists head dim %d, block size %d\n",
                   CONSUMER_ONLY_HEAD_DIM, CONSUMER_ONLY_BLOCK_SIZE, rows[i].head_dim, rows[i].block_size);
      return 1;
    }
#endif
  if (blockattn::workspace_size(4, 1000) == 0) return 1;
  blockattn::ForwardArgs a;  // all null: must be refused, naming an argument
  a.shape = {1, 10, 1, 1, rows[0].head_dim, rows[0].dtype};
  const blockattn::Status s = blockattn::forward(a, nullptr, 0, nullptr);
  if (s.code != blockattn::StatusCode::kInvalidArgument || s.message.find("offsets") == std::string::npos) {
    std::fprintf(stderr, "consumer: unexpected status %d: %s\n", static_cast<int>(s.code), s.message.c_str());
    return 1;
  }
  // The layer library (blockattn::layer) links and refuses a null x by name.
  blockattn::LayerForwardArgs layer;
  layer.shape = {1, 10, 64, 1, 1, rows[0].head_dim, rows[0].dtype};
  const blockattn::Status ls = blockattn::layer_forward(layer, nullptr, 0, nullptr);
  if (ls.code != blockattn::StatusCode::kInvalidArgument || blockattn::layer_workspace_size(4, 1000) == 0) {
    std::fprintf(stderr, "consumer: unexpected layer status %d: %s\n", static_cast<int>(ls.code), ls.message.c_str());
    return 1;
  }
  std::printf("consumer: %zu kernels, C ABI version %d, library %s\n", n, blockattn_abi_version(), blockattn_version());
  return 0;
}
