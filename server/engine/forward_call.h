// One validated Forward request on its way through the engine: which
// (session, layer) states it advances, where its input rows are, and how to
// report back. Built by the gRPC handlers (request_validation.h), owned by
// the engine thread from SubmitForward until `done` is called.
#ifndef GDN_SERVER_ENGINE_FORWARD_CALL_H_
#define GDN_SERVER_ENGINE_FORWARD_CALL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gdn/v1/gdn.pb.h"

namespace gdn {

// One session's slice of a call: rows [row_offset, row_offset + num_tokens)
// of the packed tensors.
struct ForwardSequence {
  std::string session;
  int64_t position = 0;  // tokens this (session, layer) consumed before
  int32_t num_tokens = 0;
  int32_t row_offset = 0;
};

struct ForwardResult {
  std::string o;                    // [T, Hv, V] raw activation-dtype bytes
  std::vector<int64_t> positions;   // new position per sequence
};

struct ForwardCall {
  int32_t layer = 0;
  std::vector<ForwardSequence> sequences;
  int32_t total_tokens = 0;  // T

  // The request whose tensors hold the inputs; valid until `done` returns
  // (either the gRPC-owned message or `owned_request`).
  const gdn::v1::ForwardRequest* request = nullptr;
  std::unique_ptr<gdn::v1::ForwardRequest> owned_request;

  absl::Time deadline = absl::InfiniteFuture();
  // Safe from the engine thread: whether the client has gone away.
  std::function<bool()> is_cancelled;
  absl::Time enqueued = absl::Now();
  std::string method;  // metric label: "Forward" or "ForwardStream"

  // Called exactly once, on the engine's finisher thread (one thread, in the
  // order calls finished; server/engine/callback_runner.h), or on the submitting
  // thread when the engine is stopped. Must not block.
  std::function<void(absl::StatusOr<ForwardResult>)> done;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_FORWARD_CALL_H_
