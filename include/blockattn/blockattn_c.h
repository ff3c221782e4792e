/* blockattn C ABI: the calls of blockattn.h for language bindings (the Python
 * package loads it through ctypes).
 *
 * Every function returns a blockattn_status (0 on success). On failure,
 * blockattn_last_error() returns a message naming the offending argument; the
 * message belongs to the calling thread and stays valid until its next call.
 * Tensor strides are in elements; `stream` is a cudaStream_t (0 = legacy).
 *
 * Versioning: a call takes one blockattn_args struct whose first field is its
 * size as the caller compiled it. New inputs are appended at the end in later
 * versions; the library reads only the first struct_size bytes and gives every
 * field past them its default (zero), so a caller built against an older
 * header keeps working. Initialize with BLOCKATTN_ARGS_INIT. */
#ifndef BLOCKATTN_C_H_
#define BLOCKATTN_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BLOCKATTN_C_ABI_VERSION 4

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
enum { BLOCKATTN_FORWARD = 0, BLOCKATTN_BACKWARD = 1 };
/* blockattn::Rotary's enums, same values. */
enum { BLOCKATTN_ROTARY_INTERLEAVED = 0, BLOCKATTN_ROTARY_HALF_SPLIT = 1 };
enum { BLOCKATTN_ROTARY_TOKEN_ROW = 0, BLOCKATTN_ROTARY_IN_SEQUENCE = 1 };
enum { BLOCKATTN_TABLE_FLOAT32 = 0, BLOCKATTN_TABLE_BF16 = 1, BLOCKATTN_TABLE_FP16 = 2 };

typedef int blockattn_status;

typedef struct {
  void* data;
  int64_t token_stride;
  int64_t head_stride;
} blockattn_tensor;

/* Version 3. Fields a call does not use (out in a backward, dout/dq/dk/dv in a
 * forward) are ignored. */
typedef struct {
  size_t struct_size; /* sizeof(blockattn_args) as the caller compiled it */
  int64_t num_seqs;
  int64_t total_tokens;
  int32_t num_q_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t dtype;          /* BLOCKATTN_BF16 or BLOCKATTN_FP16 */
  int32_t block_size;     /* tokens per attention block; 0 = the default (64) */
  float softmax_scale;    /* 0 = 1/sqrt(head_dim); else finite and positive */
  int32_t backend;        /* BLOCKATTN_BACKEND_* */
  const int32_t* offsets; /* device, [num_seqs + 1] */
  blockattn_tensor q, k, v;
  blockattn_tensor out;
  blockattn_tensor dout, dq, dk, dv;
  void* workspace;
  size_t workspace_bytes;
  void* stream;
  int32_t reuse_schedule; /* nonzero: the workspace holds this call's schedule (blockattn::Options) */
  /* Version 3: rotary embeddings (blockattn::Rotary); rotary_dim 0 = off. */
  int32_t rotary_dim;
  int32_t rotary_pairs;      /* BLOCKATTN_ROTARY_INTERLEAVED or _HALF_SPLIT */
  int32_t rotary_positions;  /* BLOCKATTN_ROTARY_TOKEN_ROW or _IN_SEQUENCE */
  int32_t rotary_rotate_v;   /* nonzero: v rotates too */
  int32_t rotary_table_type; /* BLOCKATTN_TABLE_* */
  const void* rotary_cos;    /* [num_positions, rotary_dim / 2], rows *_row_stride elements apart */
  const void* rotary_sin;
  int64_t rotary_cos_row_stride;
  int64_t rotary_sin_row_stride;
  int64_t rotary_num_positions;
  const int32_t* rotary_seq_start; /* _IN_SEQUENCE only: [num_seqs] or null */
} blockattn_args;

#define BLOCKATTN_ARGS_INIT \
  { sizeof(blockattn_args) }

/* One row of the kernel table (blockattn::KernelConfig). */
typedef struct {
  int32_t backend; /* BLOCKATTN_BACKEND_PORTABLE or _HOPPER */
  int32_t operation;
  int32_t dtype;
  int32_t head_dim;
  int32_t block_size;
  int32_t automatic;
} blockattn_config;

/* Version 4: the dense forward (blockattn/dense.h). A [B, H, S, D] view:
 * element (b, h, s, d) at data + b*batch_stride + h*head_stride + s*seq_stride + d. */
typedef struct {
  void* data;
  int64_t batch_stride;
  int64_t head_stride;
  int64_t seq_stride;
} blockattn_dense_tensor;

/* Same versioning rule as blockattn_args: new fields are appended. */
typedef struct {
  size_t struct_size; /* sizeof(blockattn_dense_args) as the caller compiled it */
  int64_t batch;
  int64_t seq_len;
  int32_t num_q_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t dtype;       /* BLOCKATTN_BF16 or BLOCKATTN_FP16 */
  int32_t causal;      /* nonzero: key j attends to query i only when j <= i */
  float softmax_scale; /* 0 = 1/sqrt(head_dim); else finite and positive */
  int32_t backend;     /* BLOCKATTN_BACKEND_* */
  blockattn_dense_tensor q, k, v, out;
  float* lse; /* optional [B, Hq, S] fp32 output, contiguous; null = not written */
  void* stream;
} blockattn_dense_args;

#define BLOCKATTN_DENSE_ARGS_INIT \
  { sizeof(blockattn_dense_args) }

/* One row of the dense kernel table (blockattn::DenseKernelConfig). */
typedef struct {
  int32_t backend;
  int32_t dtype;
  int32_t head_dim;
  int32_t automatic;
} blockattn_dense_config;

BLOCKATTN_C_API int blockattn_abi_version(void);
/* The library's version, "major.minor.patch". */
BLOCKATTN_C_API const char* blockattn_version(void);
BLOCKATTN_C_API const char* blockattn_last_error(void);

BLOCKATTN_C_API size_t blockattn_workspace_size(int64_t num_seqs, int64_t total_tokens);
BLOCKATTN_C_API int32_t blockattn_tensor_alignment_bytes(void);
BLOCKATTN_C_API int32_t blockattn_default_block_size(void);
BLOCKATTN_C_API size_t blockattn_config_count(void);
BLOCKATTN_C_API blockattn_status blockattn_config_at(size_t index, blockattn_config* config);
/* Whether row `index` is a rotary kernel (1) or a plain one (0); -1 past the end. */
BLOCKATTN_C_API int32_t blockattn_config_rotary(size_t index);

BLOCKATTN_C_API blockattn_status blockattn_forward(const blockattn_args* args);
BLOCKATTN_C_API blockattn_status blockattn_backward(const blockattn_args* args);
/* The backend (BLOCKATTN_BACKEND_PORTABLE or _HOPPER) the call would run. */
BLOCKATTN_C_API blockattn_status blockattn_forward_backend(const blockattn_args* args, int32_t* chosen);
BLOCKATTN_C_API blockattn_status blockattn_backward_backend(const blockattn_args* args, int32_t* chosen);

/* Version 4: the dense forward. */
BLOCKATTN_C_API size_t blockattn_dense_config_count(void);
BLOCKATTN_C_API blockattn_status blockattn_dense_config_at(size_t index, blockattn_dense_config* config);
BLOCKATTN_C_API blockattn_status blockattn_dense_forward(const blockattn_dense_args* args);
BLOCKATTN_C_API blockattn_status blockattn_dense_forward_backend(const blockattn_dense_args* args, int32_t* chosen);

#ifdef __cplusplus
}
#endif

#endif /* BLOCKATTN_C_H_ */
