// A C ABI over ChunkedPrefill, for benchmarks and other runtimes that load
// the kernel with dlopen / ctypes next to their own tensors (raw device
// pointers, shapes, a stream). One launcher (and its workspace) per process.
//
//   int gdn_chunked_prefill(const GdnChunkedPrefillArgs* args, char* error,
//                           int error_len);
// returns 0 on success, else the absl::StatusCode and a message in `error`.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

extern "C" {

// Field order is the ABI (bench/prefill/compare_fla.py mirrors it).
struct GdnChunkedPrefillArgs {
  int32_t num_seqs;
  int32_t total_tokens;
  const int32_t* cu_seqlens;       // device [N + 1]
  const int32_t* cu_seqlens_host;  // host [N + 1]
  const void* q;                   // device [T, Hqk, K]
  const void* k;                   // device [T, Hqk, K]
  const void* v;                   // device [T, Hv, V]
  void* o;                         // device [T, Hv, V]
  const float* g;                  // device [T, Hv] (gating 0)
  const float* beta;               // device [T, Hv] (gating 0)
  const float* a;                  // device [T, Hv] (gating 1)
  const float* b;                  // device [T, Hv] (gating 1)
  const float* A_log;              // device [Hv]    (gating 1)
  const float* dt_bias;            // device [Hv]    (gating 1)
  const int32_t* initial_pages;    // device [N], -1 = zero state
  const int32_t* final_pages;      // device [N]
  void* pool_base;                 // device, page p at pool_base + p * page_bytes
  int64_t page_bytes;
  int32_t num_pages;
  int32_t num_qk_heads;
  int32_t num_v_heads;
  int32_t head_dim_k;
  int32_t head_dim_v;
  int32_t input_dtype;  // gdn::DType: 0 fp32, 1 bf16, 2 fp16
  int32_t state_dtype;  // gdn::StateDType: 0 fp32, 1 bf16
  int32_t gating;       // gdn::GatingMode: 0 direct, 1 fused
  int32_t l2_norm_qk;
  float scale;          // 0 = K^-1/2
  int32_t v_tile;       // 0 = auto, 16 or 32
  void* stream;         // cudaStream_t (0 = default stream)
  int32_t stages;       // 0 or 3 = the operator; 1 prep only, 2 state pass only
  int32_t solve_variant;  // -1 = default, 0 or 1 (ChunkedPrefill::set_solve_variant)
};

static gdn::cuda::ChunkedPrefill* Launcher() {
  static gdn::cuda::ChunkedPrefill* launcher = new gdn::cuda::ChunkedPrefill();
  return launcher;
}

int gdn_chunked_prefill(const GdnChunkedPrefillArgs* a, char* error, int error_len) {
  gdn::cuda::ChunkedPrefill* launcher = Launcher();
  launcher->set_solve_variant(a->solve_variant < 0 ? gdn::cuda::ChunkedPrefill::kDefaultSolve
                                                   : a->solve_variant);
  gdn::GdnOptions options;
  options.shape.num_qk_heads = a->num_qk_heads;
  options.shape.num_v_heads = a->num_v_heads;
  options.shape.head_dim_k = a->head_dim_k;
  options.shape.head_dim_v = a->head_dim_v;
  options.input_dtype = static_cast<gdn::DType>(a->input_dtype);
  options.state_dtype = static_cast<gdn::StateDType>(a->state_dtype);
  options.gating = static_cast<gdn::GatingMode>(a->gating);
  options.l2_norm_qk = a->l2_norm_qk != 0;
  options.scale = a->scale;

  gdn::GdnParams params;
  params.num_seqs = a->num_seqs;
  params.total_tokens = a->total_tokens;
  params.cu_seqlens = a->cu_seqlens;
  params.cu_seqlens_host = a->cu_seqlens_host;
  params.q = a->q;
  params.k = a->k;
  params.v = a->v;
  params.o = a->o;
  params.g = a->g;
  params.beta = a->beta;
  params.a = a->a;
  params.b = a->b;
  params.A_log = a->A_log;
  params.dt_bias = a->dt_bias;
  params.initial_pages = a->initial_pages;
  params.final_pages = a->final_pages;
  params.pool.base = a->pool_base;
  params.pool.page_bytes = a->page_bytes;
  params.pool.num_pages = a->num_pages;
  params.pool.dtype = options.state_dtype;

  const absl::Status status = launcher->Run(
      options, params, static_cast<cudaStream_t>(a->stream), a->v_tile,
      a->stages == 0 ? 3 : a->stages);
  if (status.ok()) return 0;
  if (error != nullptr && error_len > 0) {
    const std::string message = status.ToString();
    std::strncpy(error, message.c_str(), error_len - 1);
    error[error_len - 1] = '\0';
  }
  return static_cast<int>(status.code());
}

// Workspace bytes the process's launcher holds now.
int64_t gdn_chunked_prefill_workspace_bytes() {
  return static_cast<int64_t>(Launcher()->workspace_bytes());
}

}  // extern "C"
