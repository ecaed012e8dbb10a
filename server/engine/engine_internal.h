// Engine-private types shared by engine.cc (admission, commands, the loop)
// and engine_batch.cc (planning, staging, kernel calls, completion).
#ifndef GDN_SERVER_ENGINE_ENGINE_INTERNAL_H_
#define GDN_SERVER_ENGINE_ENGINE_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/engine.h"

namespace gdn {

// An admitted call: it holds a WriteLease for every sequence.
struct Engine::RunningCall {
  std::unique_ptr<ForwardCall> call;
  std::vector<WriteLease> leases;    // [sequences]
  std::vector<int32_t> done_tokens;  // [sequences], tokens already run
  bool started = false;              // some chunk has run (no cancelling now)
  absl::Status failure;              // set when a kernel call failed
  ForwardResult result;              // o [T, Hv, V] filled chunk by chunk

  bool finished() const {
    for (size_t i = 0; i < done_tokens.size(); ++i) {
      if (done_tokens[i] < call->sequences[i].num_tokens) return false;
    }
    return true;
  }
};

// The chunks of one kernel call (one phase of one iteration).
struct Engine::PhaseBatch {
  struct Entry {
    RunningCall* call = nullptr;
    int seq = 0;         // index into call->call->sequences
    int32_t offset = 0;  // first token of the chunk within the sequence
    int32_t tokens = 0;
  };
  const char* phase = "decode";  // metric label
  bool decode = true;            // Backend::Decode, else Backend::Prefill
  std::vector<Entry> entries;
  int64_t tokens = 0;
  absl::Status status;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_ENGINE_INTERNAL_H_
