// One validated Forward request on its way through the engine: which
// (session, layer) states it advances, its inputs already packed and checked
// in an I/O block, and how to report back. Built by the request threads
// (server/rpc/forward_request_reader.h), owned by the engine from
// SubmitForward until `done` is called.
#ifndef GDN_SERVER_ENGINE_FORWARD_CALL_H_
#define GDN_SERVER_ENGINE_FORWARD_CALL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/forward_wire.h"
#include "server/engine/input_layout.h"
#include "server/engine/io_arena.h"

namespace gdn {

class StateCache;
struct ForwardCall;

// One session's slice of a call: rows [row_offset, row_offset + num_tokens)
// of the packed tensors.
struct ForwardSequence {
  std::string session;
  int64_t position = 0;  // tokens this (session, layer) consumed before
  int32_t num_tokens = 0;
  int32_t row_offset = 0;
  // A speculative draft (2..kMaxDecodeTokens tokens): the state after every
  // token is kept until the next call's position accepts some (admission.h).
  bool draft = false;
  // Prefix reuse (> 0, a multiple of kCheckpointTokens; position a multiple
  // of kCheckpointTokens): the state at every multiple of this inside
  // (position, position + num_tokens) is kept (StateCache kept states).
  int32_t checkpoint_interval = 0;
};

// The call's inputs, checked by the request thread: every value finite,
// g <= 0, beta in [0, 1], fused gating already folded into g and beta.
// Each tensor lies at `source` (rows contiguous, the row sizes of `layout`):
// packed in `layout` (T tokens) inside `block` when sent inline, or where
// the client left it in a registered region (server/regions/). Every source
// is memory the backend's copies and kernels can read directly.
struct PackedInputs {
  enum Tensor { kQ = 0, kK, kV, kG, kBeta, kCount };
  std::shared_ptr<IoBlock> block;  // null when every tensor is in a region
  InputLayout layout;
  const char* source[kCount] = {};
  // Which sources are device memory (CUDA regions), not host memory.
  bool on_device[kCount] = {};

  // Sources at their places in `block` (the inline case).
  void PointIntoBlock() {
    const size_t at[kCount] = {layout.q, layout.k, layout.v, layout.g, layout.beta};
    for (int i = 0; i < kCount; ++i) source[i] = block->data + at[i];
  }
  // Whether the whole input is `block` in `layout` (one copy stages it).
  bool all_in_block() const {
    if (block == nullptr) return false;
    const size_t at[kCount] = {layout.q, layout.k, layout.v, layout.g, layout.beta};
    for (int i = 0; i < kCount; ++i) {
      if (source[i] != block->data + at[i]) return false;
    }
    return true;
  }
  // Every tensor in device memory, 16-byte aligned: kernels may read the
  // sources where they lie.
  bool AllOnDevice() const {
    for (int i = 0; i < kCount; ++i) {
      if (!on_device[i] || reinterpret_cast<uintptr_t>(source[i]) % 16 != 0) return false;
    }
    return true;
  }
  size_t row_bytes(int tensor) const {
    return tensor <= kK ? layout.qk_row : tensor == kV ? layout.v_row : layout.gate_row;
  }
};

struct ForwardResult {
  // o [T, Hv, V] in the activation dtype, in row order, as runs of host
  // memory that stay valid while held (the batches' output blocks): the
  // response is encoded around them without copying (forward_wire.h).
  // Empty when the call named an output region (ForwardCall::o_region).
  std::vector<wire::BytesRef> o;
  std::vector<int64_t> positions;  // new position per sequence
};

struct ForwardCall {
  int32_t layer = 0;
  std::vector<ForwardSequence> sequences;
  int32_t total_tokens = 0;  // T
  PackedInputs inputs;
  // When set, o [T, Hv, V] is written here (a registered region, memory
  // the backend can write) before the call completes, instead of coming
  // back in ForwardResult::o.
  char* o_region = nullptr;
  bool o_region_on_device = false;  // a CUDA region (kernels may write it)
  // When set, runs on the engine thread before any batch of the call is
  // launched (each time the engine looks at it); an error fails the call
  // without running it (its leases are aborted: no state changes). Once a
  // batch is launched the call runs to the end: what it names stays held.
  // (Not at commit: a state page may be written in place, so a call that
  // ran cannot be undone.) It also holds the call's region memory.
  std::function<absl::Status()> check_before_start;
  // When set, runs on the engine thread once admission would take the call
  // (its positions allow it), before it takes any lease; an error fails the
  // call unapplied. Per-tenant page quotas (server/auth/tenant_quota.h).
  std::function<absl::Status(const StateCache& cache, const ForwardCall& call)>
      admission_check;

  absl::Time deadline = absl::InfiniteFuture();
  // Safe from the engine thread: whether the client has gone away.
  std::function<bool()> is_cancelled;
  absl::Time enqueued = absl::Now();
  std::string method;  // metric label: "Forward" or "ForwardStream"

  // Called exactly once: on a completion thread (completion_pool.h) or the
  // engine thread, or on the submitting thread when the engine is stopped.
  // Must not block.
  std::function<void(absl::StatusOr<ForwardResult>)> done;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_FORWARD_CALL_H_
