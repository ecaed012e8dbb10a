// One validated Forward request on its way through the engine: which
// (session, layer) states it advances, its inputs already packed and checked
// in an I/O block, and how to report back. Built by the request threads
// (server/rpc/forward_request_reader.h), owned by the engine from
// SubmitForward until `done` is called.
#ifndef GDN_SERVER_ENGINE_FORWARD_CALL_H_
#define GDN_SERVER_ENGINE_FORWARD_CALL_H_

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

// One session's slice of a call: rows [row_offset, row_offset + num_tokens)
// of the packed tensors.
struct ForwardSequence {
  std::string session;
  int64_t position = 0;  // tokens this (session, layer) consumed before
  int32_t num_tokens = 0;
  int32_t row_offset = 0;
};

// The call's inputs, packed by the request thread in `layout` (T tokens)
// inside `block`: every value finite, g <= 0, beta in [0, 1], fused gating
// already folded into g and beta. The engine's kernels read them from here
// (the backend can read this memory directly: io_arena.h).
struct PackedInputs {
  std::shared_ptr<IoBlock> block;
  InputLayout layout;
};

struct ForwardResult {
  // o [T, Hv, V] in the activation dtype, in row order, as runs of host
  // memory that stay valid while held (the batches' output blocks): the
  // response is encoded around them without copying (forward_wire.h).
  std::vector<wire::BytesRef> o;
  std::vector<int64_t> positions;  // new position per sequence
};

struct ForwardCall {
  int32_t layer = 0;
  std::vector<ForwardSequence> sequences;
  int32_t total_tokens = 0;  // T
  PackedInputs inputs;

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
