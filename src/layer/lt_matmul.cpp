#include "layer/lt_matmul.h"

#include <mutex>

#include "core/status.h"

namespace blockattn::layer {
namespace {

Status lt_error(const char* what, cublasStatus_t status) {
  return core::status(status == CUBLAS_STATUS_NOT_SUPPORTED ? StatusCode::kUnsupported : StatusCode::kCudaError,
                      "cuBLASLt ", what, " failed: ", cublasLtGetStatusString(status));
}

#define BLOCKATTN_LT_CHECK(what, expr)                                    \
  do {                                                                    \
    const cublasStatus_t status_ = (expr);                                \
    if (status_ != CUBLAS_STATUS_SUCCESS) return lt_error(what, status_); \
  } while (0)

// One handle for the process: cuBLASLt handles carry no device or stream and
// may be shared by threads (each call brings its own workspace).
Status shared_handle(cublasLtHandle_t* handle) {
  static cublasLtHandle_t shared = nullptr;
  static cublasStatus_t created = CUBLAS_STATUS_NOT_INITIALIZED;
  static std::once_flag once;
  std::call_once(once, [] { created = cublasLtCreate(&shared); });
  *handle = shared;
  return created == CUBLAS_STATUS_SUCCESS ? Status::Ok() : lt_error("cublasLtCreate", created);
}

// RAII for the descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

Status run_matmul(const Matmul& mm, DType dtype, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  cublasLtHandle_t handle;
  BLOCKATTN_RETURN_IF_ERROR(shared_handle(&handle));
  const cudaDataType_t type = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  Descriptors desc;
  BLOCKATTN_LT_CHECK("matmul descriptor", cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = mm.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = mm.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  BLOCKATTN_LT_CHECK("transa",
                     cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  BLOCKATTN_LT_CHECK("transb",
                     cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (mm.epilogue != Matmul::Epilogue::kNone) {
    const cublasLtEpilogue_t epilogue =
        mm.epilogue == Matmul::Epilogue::kBias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB;
    BLOCKATTN_LT_CHECK("epilogue", cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                                  sizeof(epilogue)));
    BLOCKATTN_LT_CHECK("bias pointer", cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                                      &mm.vector, sizeof(mm.vector)));
  }
  // Stored shapes: A is [m, k] or, transposed, [k, m]; likewise B.
  const uint64_t a_rows = mm.transpose_a ? mm.k : mm.m, a_cols = mm.transpose_a ? mm.m : mm.k;
  const uint64_t b_rows = mm.transpose_b ? mm.n : mm.k, b_cols = mm.transpose_b ? mm.k : mm.n;
  BLOCKATTN_LT_CHECK("layout A", cublasLtMatrixLayoutCreate(&desc.a, type, a_rows, a_cols, mm.lda));
  BLOCKATTN_LT_CHECK("layout B", cublasLtMatrixLayoutCreate(&desc.b, type, b_rows, b_cols, mm.ldb));
  BLOCKATTN_LT_CHECK("layout D", cublasLtMatrixLayoutCreate(&desc.d, type, mm.m, mm.n, mm.ldd));

  BLOCKATTN_LT_CHECK("preference", cublasLtMatmulPreferenceCreate(&desc.preference));
  const uint64_t max_workspace = workspace_bytes;
  BLOCKATTN_LT_CHECK("workspace preference",
                     cublasLtMatmulPreferenceSetAttribute(desc.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &max_workspace, sizeof(max_workspace)));
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  BLOCKATTN_LT_CHECK("heuristic", cublasLtMatmulAlgoGetHeuristic(handle, desc.op, desc.a, desc.b, desc.d, desc.d,
                                                                 desc.preference, 1, &heuristic, &found));
  if (found == 0) return core::unsupported("cuBLASLt has no algorithm for a [", mm.m, ", ", mm.n, ", ", mm.k, "] GEMM");
  const float one = 1.f, zero = 0.f;
  BLOCKATTN_LT_CHECK("matmul", cublasLtMatmul(handle, desc.op, &one, mm.a, desc.a, mm.b, desc.b, &zero, mm.d, desc.d,
                                              mm.d, desc.d, &heuristic.algo, workspace, workspace_bytes, stream));
  return Status::Ok();
}

}  // namespace blockattn::layer
