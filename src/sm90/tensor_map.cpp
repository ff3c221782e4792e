#include "sm90/tensor_map.h"

#include <climits>
#include <cstdint>

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "tile/chunk_width.h"

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

template <int kRank>
bool encode_map(CUtensorMap* map, DType dtype, const void* data, const cuuint64_t (&dims)[kRank],
                const cuuint64_t (&byte_strides)[kRank - 1], const cuuint32_t (&box)[kRank], CUtensorMapSwizzle swizzle,
                CUtensorMapL2promotion promotion, const char** error);

// A tiled map over `rank` dims (innermost first, contiguous; the innermost
// is a head's D columns), its box's innermost extent one swizzle row: 64 x
// 16-bit with 128-byte swizzle or 32 with 64-byte swizzle (tile::Chunked).
// Out-of-range rows read as zeros.
template <int kRank>
bool encode_tiled(CUtensorMap* map, DType dtype, const void* data, const cuuint64_t (&dims)[kRank],
                  const cuuint64_t (&byte_strides)[kRank - 1], const cuuint32_t (&box)[kRank], const char** error) {
  const bool narrow_box = box[0] < tile::kChunkCols;
  const CUtensorMapSwizzle swizzle = narrow_box ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B;
  // How wide the L2 makes its fill when a box row misses. 256 bytes where a
  // head row is one 64-byte box (D = 32: the fill brings neighbouring heads'
  // rows, which other CTAs' tiles read at the same time) or 128-byte boxes
  // (D = 64, 128, ...: whole pieces of the head's row). Where a head row is
  // several 64-byte boxes (D = 96: 192 bytes, D = 160: 320) the 256-byte
  // fills straddle two heads' rows, and the sm_90 backward at D = 160 read
  // 7.2 GB from DRAM for 6.3 GB of inputs (H100, ncu). Fills of the box
  // row's own 64 bytes, same runs, % of copy (docs/perf.md, "Session 32"):
  // headdim-d160-h3 backward 84.4-84.7 -> 86.5-86.7 (DRAM reads 6.34 GB),
  // headdim-d96-h5 86.0-87.0 -> 86.5-86.9; given to D = 32 as well, they
  // read 92.9-93.1 there against 93.8, so not there.
  const CUtensorMapL2promotion promotion =
      narrow_box && dims[0] > box[0] ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  return encode_map<kRank>(map, dtype, data, dims, byte_strides, box, swizzle, promotion, error);
}

// Any tiled map of 16-bit elements: out-of-range elements read as zeros.
template <int kRank>
bool encode_map(CUtensorMap* map, DType dtype, const void* data, const cuuint64_t (&dims)[kRank],
                const cuuint64_t (&byte_strides)[kRank - 1], const cuuint32_t (&box)[kRank], CUtensorMapSwizzle swizzle,
                CUtensorMapL2promotion promotion, const char** error) {
  const auto encode = encode_fn();
  if (encode == nullptr) {
    *error = "cuTensorMapEncodeTiled is not available from the driver";
    return false;
  }
  cuuint32_t element_strides[kRank];
  for (int i = 0; i < kRank; ++i)
    element_strides[i] = 1;
  const CUresult r =
      encode(map, dtype == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, kRank,
             const_cast<void*>(data), dims, byte_strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
             promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    *error = r == CUDA_ERROR_INVALID_CONTEXT ? "cuTensorMapEncodeTiled found no current CUDA context"
                                             : "cuTensorMapEncodeTiled rejected the tensor layout";
    return false;
  }
  return true;
}

// TMA needs positive strides below 2^40 bytes; a zero (broadcast) stride goes
// to the portable path. A dim of extent 1 never advances, so its stride is moot.
constexpr int64_t kMaxStrideElems = (int64_t{1} << 40) / 2;
bool tma_stride_ok(int64_t stride, int64_t extent) { return extent <= 1 || (stride > 0 && stride < kMaxStrideElems); }
cuuint64_t tma_byte_stride(int64_t stride, int64_t extent, int64_t fallback) {
  return static_cast<cuuint64_t>(extent > 1 ? stride : fallback) * 2;
}

}  // namespace

const char* tma_layout_problem(const TensorView& t, int heads) {
  if (!tma_stride_ok(t.head_stride, heads)) return "head_stride must be positive and below 2^40 bytes for TMA";
  if (!tma_stride_ok(t.token_stride, 2)) return "token_stride must be positive and below 2^40 bytes for TMA";
  return nullptr;
}

bool encode_head_tile_map(CUtensorMap* map, const TensorView& t, DType dtype, int64_t tokens, int heads, int head_dim,
                          int box_cols, uint32_t box_rows, const char** error) {
  if (const char* why = tma_layout_problem(t, heads)) {
    *error = why;
    return false;
  }
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(tokens)};
  const cuuint64_t strides[2] = {tma_byte_stride(t.head_stride, heads, head_dim),
                                 static_cast<cuuint64_t>(t.token_stride) * 2};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_cols), 1, box_rows};
  return encode_tiled<3>(map, dtype, t.data, dims, strides, box, error);
}

bool encode_head_pair_map(CUtensorMap* map, const TensorView& t, DType dtype, int64_t tokens, int heads, int head_dim,
                          uint32_t box_rows, const char** error) {
  if (const char* why = tma_layout_problem(t, heads)) {
    *error = why;
    return false;
  }
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(tokens),
                              static_cast<cuuint64_t>(heads)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(t.token_stride) * 2,
                                 tma_byte_stride(t.head_stride, heads, head_dim)};
  // One head where the tensor has one (a box past its extent; the kernel
  // never loads a pair there).
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(tile::kChunkCols), box_rows, heads > 1 ? 2u : 1u};
  return encode_tiled<3>(map, dtype, t.data, dims, strides, box, error);
}

const char* dense_tma_layout_problem(const DenseTensorView& t, int64_t batch, int heads, int64_t seq_len) {
  if (!tma_stride_ok(t.seq_stride, seq_len)) return "seq_stride must be positive and below 2^40 bytes for TMA";
  if (!tma_stride_ok(t.head_stride, heads)) return "head_stride must be positive and below 2^40 bytes for TMA";
  if (!tma_stride_ok(t.batch_stride, batch)) return "batch_stride must be positive and below 2^40 bytes for TMA";
  return nullptr;
}

bool encode_dense_tile_map(CUtensorMap* map, const DenseTensorView& t, DType dtype, int64_t batch, int heads,
                           int64_t seq_len, int head_dim, uint32_t box_rows, const char** error) {
  if (const char* why = dense_tma_layout_problem(t, batch, heads, seq_len)) {
    *error = why;
    return false;
  }
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(seq_len),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[3] = {tma_byte_stride(t.seq_stride, seq_len, head_dim),
                                 tma_byte_stride(t.head_stride, heads, head_dim * seq_len),
                                 tma_byte_stride(t.batch_stride, batch, head_dim * seq_len * heads)};
  const cuuint32_t box[4] = {64, box_rows, 1, 1};
  return encode_tiled<4>(map, dtype, t.data, dims, strides, box, error);
}

bool encode_table_rows_map(CUtensorMap* map, const void* table, DType dtype, int64_t rows, int cols, int64_t row_stride,
                           uint32_t box_rows, const char** error) {
  if (rows <= 0 || rows > INT32_MAX || row_stride <= 0 || row_stride >= kMaxStrideElems || (row_stride * 2) % 16 != 0 ||
      (cols * 2) % 16 != 0 || cols > 256 || reinterpret_cast<uintptr_t>(table) % 16 != 0) {
    *error = "the table's rows are not addressable by TMA";
    return false;
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(cols), box_rows};
  return encode_map<2>(map, dtype, table, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B, error);
}

}  // namespace blockattn::sm90
