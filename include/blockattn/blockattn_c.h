/* blockattn C ABI: the same calls as blockattn.h, for language bindings
 * (the Python package loads it through ctypes).
 *
 * Every function returns a blockattn_status (0 on success). On failure,
 * blockattn_last_error() returns a message naming the offending argument; the
 * message belongs to the calling thread and stays valid until its next call.
 * Tensor strides are in elements; `stream` is a cudaStream_t (0 = legacy). */
#ifndef BLOCKATTN_C_H_
#define BLOCKATTN_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BLOCKATTN_C_ABI_VERSION 1

#if defined(__GNUC__)
#define BLOCKATTN_C_API __attribute__((visibility("default")))
#else
#define BLOCKATTN_C_API
#endif

enum {
  BLOCKATTN_OK = 0,
  BLOCKATTN_INVALID_ARGUMENT = 1,
  BLOCKATTN_UNSUPPORTED = 2,
  BLOCKATTN_CUDA_ERROR = 3,
};
enum { BLOCKATTN_BF16 = 0, BLOCKATTN_FP16 = 1 };
enum { BLOCKATTN_BACKEND_AUTO = 0, BLOCKATTN_BACKEND_PORTABLE = 1, BLOCKATTN_BACKEND_HOPPER = 2 };

typedef int blockattn_status;

typedef struct {
  void* data;
  int64_t token_stride;
  int64_t head_stride;
} blockattn_tensor;

typedef struct {
  int64_t num_seqs;
  int64_t total_tokens;
  int32_t num_q_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t dtype;       /* BLOCKATTN_BF16 or BLOCKATTN_FP16 */
  float softmax_scale; /* 0 = 1/sqrt(head_dim) */
  int32_t backend;     /* BLOCKATTN_BACKEND_* */
} blockattn_problem;

BLOCKATTN_C_API int blockattn_abi_version(void);
BLOCKATTN_C_API const char* blockattn_last_error(void);

BLOCKATTN_C_API size_t blockattn_workspace_size(int64_t num_seqs, int64_t total_tokens);

BLOCKATTN_C_API blockattn_status blockattn_forward(const blockattn_problem* problem, const int32_t* offsets,
                                                   blockattn_tensor q, blockattn_tensor k, blockattn_tensor v,
                                                   blockattn_tensor out, void* workspace, size_t workspace_bytes,
                                                   void* stream);

BLOCKATTN_C_API blockattn_status blockattn_backward(const blockattn_problem* problem, const int32_t* offsets,
                                                    blockattn_tensor q, blockattn_tensor k, blockattn_tensor v,
                                                    blockattn_tensor dout, blockattn_tensor dq, blockattn_tensor dk,
                                                    blockattn_tensor dv, void* workspace, size_t workspace_bytes,
                                                    void* stream);

#ifdef __cplusplus
}
#endif

#endif /* BLOCKATTN_C_H_ */
