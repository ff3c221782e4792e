#include "sm90/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

namespace blockattn::sm90 {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

const char* tma_layout_problem(const TensorView& t, int heads) {
  // TMA needs positive strides below 2^40 bytes; a zero (broadcast) stride
  // goes to the portable path.
  constexpr int64_t kMaxStrideElems = (int64_t{1} << 40) / 2;
  if (heads > 1 && (t.head_stride <= 0 || t.head_stride >= kMaxStrideElems))
    return "head_stride must be positive and below 2^40 bytes for TMA";
  if (t.token_stride <= 0 || t.token_stride >= kMaxStrideElems)
    return "token_stride must be positive and below 2^40 bytes for TMA";
  return nullptr;
}

bool encode_head_tile_map(CUtensorMap* map, const TensorView& t, DType dtype, int64_t tokens, int heads, int head_dim,
                          uint32_t box_rows, const char** error) {
  const auto encode = encode_fn();
  if (encode == nullptr) {
    *error = "cuTensorMapEncodeTiled is not available from the driver";
    return false;
  }
  if (const char* why = tma_layout_problem(t, heads)) {
    *error = why;
    return false;
  }
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(tokens)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(heads > 1 ? t.head_stride : head_dim) * 2,
                                 static_cast<cuuint64_t>(t.token_stride) * 2};
  const cuuint32_t box[3] = {64, 1, box_rows};  // 64 x 16-bit = one 128-byte swizzle row
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r =
      encode(map, dtype == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, t.data,
             dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    *error = r == CUDA_ERROR_INVALID_CONTEXT ? "cuTensorMapEncodeTiled found no current CUDA context"
                                             : "cuTensorMapEncodeTiled rejected the tensor layout";
    return false;
  }
  return true;
}

}  // namespace blockattn::sm90
