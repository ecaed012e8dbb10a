/* A plain C ABI over the GDN CUDA kernels: raw device pointers, shapes and
 * dtypes as ints, a state-page pool, page ids and a cudaStream_t passed as
 * void*. For ctypes (benchmarks put our kernels and a Python peer on the same
 * torch tensors: pass tensor.data_ptr()) and for runtimes that call the
 * kernels without the server. Library: libgdn_capi.so.
 *
 * Layouts (packed over the tokens of all sequences, sequence i owning rows
 * [cu_seqlens[i], cu_seqlens[i+1])), all contiguous, 16-byte aligned:
 *   q, k   [T, Hqk, K]  input dtype
 *   v, o   [T, Hv, V]   input dtype (o written)
 *   g, beta, a, b  [T, Hv] float32;  A_log, dt_bias [Hv] float32
 *   state page p at pool_base + p * page_bytes: [Hv, K, V] state dtype
 *   initial_pages, final_pages [N] int32 on the device; -1 = zero state
 *   cu_seqlens [N + 1] int32, on the device AND on the host (same values)
 * Dtype codes: input 0 fp32, 1 bf16, 2 fp16; state 0 fp32, 1 bf16.
 * Gating: 0 direct (g, beta), 1 fused (a, b, A_log, dt_bias).
 *
 * Calls are asynchronous on `stream` (NULL: the legacy default stream) and
 * do not synchronise. They return 0 or an absl status code (3 invalid
 * argument, 13 internal, ...); gdn_last_error() then says why (per thread,
 * until the next call).
 *
 * Kernels. gdn_decode runs the recurrent kernel family. gdn_prefill routes
 * as the server's cuda backend does (CudaBackend::RoutePrefill): the chunked
 * tensor-core kernel (kernels/cuda/chunked_prefill.h) for bf16 / fp16 inputs
 * whose sequences average >= 64 tokens, else the recurrent kernel.
 *
 * Memory. The recurrent kernels allocate nothing. The chunked kernel needs a
 * workspace (~74 KB per 64-token chunk and value head at K = V = 128); the
 * library keeps one per stream, grown with cudaMallocAsync / cudaFreeAsync on
 * that stream by the first call that needs more (never shrunk, held for the
 * life of the process). Only a call that grows it allocates: to capture
 * gdn_prefill in a CUDA graph, run the largest shape once on that stream
 * first. Calls on one stream from several threads are serialised by a lock.
 */
#ifndef GDN_KERNELS_CAPI_GDN_CAPI_H_
#define GDN_KERNELS_CAPI_GDN_CAPI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GDN_CAPI_OK 0

#if defined(__GNUC__)
#define GDN_CAPI_EXPORT __attribute__((visibility("default")))
#else
#define GDN_CAPI_EXPORT
#endif

typedef struct gdn_capi_config {
  int32_t num_qk_heads; /* Hqk */
  int32_t num_v_heads;  /* Hv, a multiple of Hqk */
  int32_t head_dim_k;   /* K: 64 or 128 */
  int32_t head_dim_v;   /* V: 64 or 128 */
  int32_t input_dtype;  /* 0 fp32, 1 bf16, 2 fp16 */
  int32_t state_dtype;  /* 0 fp32, 1 bf16, 2 int8, 3 fp8 (round to nearest) */
  int32_t gating;       /* 0 direct, 1 fused */
  int32_t l2_norm_qk;   /* 0 or 1 */
  float scale;          /* 0: K^-1/2 */
} gdn_capi_config;

typedef struct gdn_capi_args {
  int32_t num_seqs;                /* N */
  int32_t total_tokens;            /* T = cu_seqlens[N] */
  const int32_t* cu_seqlens;       /* [N + 1] device */
  const int32_t* cu_seqlens_host;  /* [N + 1] host */
  const void* q;
  const void* k;
  const void* v;
  void* o;
  const float* g;
  const float* beta;
  const float* a;
  const float* b;
  const float* A_log;
  const float* dt_bias;
  void* pool_base;
  int64_t page_bytes; /* >= Hv * K * V * state size, a multiple of 16 */
  int32_t num_pages;
  const int32_t* initial_pages; /* [N] device */
  const int32_t* final_pages;   /* [N] device; may equal initial (in place) */
} gdn_capi_args;

/* Every sequence brings 1..8 tokens. */
GDN_CAPI_EXPORT int gdn_decode(const gdn_capi_config* config, const gdn_capi_args* args, void* stream);
/* Any number of tokens per sequence; picks its kernel as the cuda backend does. */
GDN_CAPI_EXPORT int gdn_prefill(const gdn_capi_config* config, const gdn_capi_args* args, void* stream);
/* Prefill with a forced kernel, for benchmarks and tuning: 0 auto (= gdn_prefill),
 * 1 recurrent, 2 chunked (head dims 64 / 128, bf16 or fp16 inputs: operands of the input's
 * type; fp32 inputs are refused, 3, since issue 22: auto gives them the recurrent kernel). */
GDN_CAPI_EXPORT int gdn_prefill_variant(const gdn_capi_config* config,
                                        const gdn_capi_args* args, void* stream, int variant);
/* The chunked kernel with its tuning knobs (benchmarks):
 *   v_tile        0 auto, or 16 / 32 / 64 value columns per state-pass block;
 *   stages        3 the whole operator; 1 kernel 1 only (chunk table + per-chunk
 *                 preparation into the workspace); 2 kernel 2 only (the state
 *                 pass over the workspace the previous call on this stream with
 *                 the same arguments left; o and the final pages are written);
 *   prep_variant  -1 or 4: kernel 1 (tensor-core merges, staged stores; the only
 *                 one left: 3, fp32 merges and direct stores, was removed in
 *                 issue 22 and is refused like any other code);
 *   state_variant -1 or 0 the default (the router: v8's span path for one
 *                 sequence long enough to cut into 3 or more spans, else v8,
 *                 kernels/cuda/chunked/fused_chunk.h, where it runs the call
 *                 and enough sequences x heads, else v7 with its form auto by
 *                 V tile), 4 v7 with kernel
 *                 2's split form (its state pass is kernel 2 then kernel 3), 5
 *                 v7's fused form, 7 v7 (form auto), 8 v8 (an error where v8
 *                 cannot run the call: not K = V = 128, int8 / fp8 pages,
 *                 checkpoints, a non-sm_90 device, or v_tile != 0), 9 v8's
 *                 span path (one sequence cut into spans walked in parallel,
 *                 kernels/cuda/chunked/span_plan.h; an error for more than one
 *                 sequence), 902 .. 964 that path with (code - 900) spans
 *                 (ChunkedGeneration in kernels/cuda/chunked_prefill.h). */
GDN_CAPI_EXPORT int gdn_chunked_prefill_tuned(const gdn_capi_config* config,
                                              const gdn_capi_args* args, void* stream,
                                              int v_tile, int stages, int prep_variant,
                                              int state_variant);
/* Bytes of chunked-prefill workspace the library holds for `stream` (0: none). */
GDN_CAPI_EXPORT int64_t gdn_prefill_workspace_bytes(void* stream);
/* Decode with a forced variant (0 auto, 1 small, 3 wide: fp32 states only, 4 persistent),
 * for benchmarks and tuning; 2 (large) and 5 (deep) were removed in issue 22 and are refused
 * like any other code (3, InvalidArgument). OR-ing
 * GDN_DECODE_PDL launches with programmatic dependent launch: the kernel's
 * prologue overlaps the previous kernel on the stream; the inputs must not
 * have been written by that immediately preceding kernel (recurrent_params.h). */
#define GDN_DECODE_PDL 256
GDN_CAPI_EXPORT int gdn_decode_variant(const gdn_capi_config* config,
                                       const gdn_capi_args* args, void* stream, int variant);
/* The state page size in bytes for a config (0 on an invalid config). */
GDN_CAPI_EXPORT int64_t gdn_page_bytes(const gdn_capi_config* config);
/* Why the last failing call on this thread failed ("" after a success). */
GDN_CAPI_EXPORT const char* gdn_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* GDN_KERNELS_CAPI_GDN_CAPI_H_ */
