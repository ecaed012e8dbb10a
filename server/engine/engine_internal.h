// Engine-private types shared by engine.cc (the loop, admission, commands)
// and engine_batches.cc (planning, staging and completing batches on lanes).
#ifndef GDN_SERVER_ENGINE_ENGINE_INTERNAL_H_
#define GDN_SERVER_ENGINE_ENGINE_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/backend_stream.h"
#include "server/engine/engine.h"
#include "server/engine/grow_buffer.h"

namespace gdn {

// An admitted call: it holds a WriteLease and a slot for every sequence.
struct Engine::RunningCall {
  std::unique_ptr<ForwardCall> call;
  std::vector<WriteLease> leases;       // [sequences]
  std::vector<int32_t> slots;           // [sequences]
  std::vector<int32_t> planned_tokens;  // [sequences] handed to batches
  std::vector<int32_t> done_tokens;     // [sequences] in batches that completed
  int batches_in_flight = 0;
  bool started = false;   // some batch took part of it (no cancelling now)
  absl::Status failure;   // set when a batch of it failed
  // o so far: (first row within the call, bytes), in completion order.
  std::vector<std::pair<int64_t, wire::BytesRef>> o;

  bool finished() const {
    for (size_t i = 0; i < done_tokens.size(); ++i) {
      if (done_tokens[i] < call->sequences[i].num_tokens) return false;
    }
    return true;
  }
};

// Tokens [offset, offset + tokens) of one sequence of a call, in a batch.
struct Engine::BatchEntry {
  RunningCall* call = nullptr;
  int seq = 0;
  int32_t offset = 0;
  int32_t tokens = 0;
};

// One pipeline lane: a backend stream, the memory of the batch it runs
// (reused from batch to batch), and that batch while it is in flight.
//
// Metadata block (host_meta, uploaded once into device_meta):
//   [cu_seqlens N + 1 | initial_pages N | final_pages N |
//    draft pages N x (kMaxDecodeTokens - 1), only in a batch with a draft |
//    pad | GatherCopy x M]
// Inputs: device_inputs in InputLayout::For(shape, dtype, T); o: device_o.
struct Engine::Lane {
  Lane(Backend* backend, int index, bool decode)
      : index(index),
        decode(decode),
        host_meta(backend, GrowBuffer::Memory::kHost),
        device_meta(backend, GrowBuffer::Memory::kBackend),
        device_inputs(backend, GrowBuffer::Memory::kBackend),
        device_o(backend, GrowBuffer::Memory::kBackend) {}

  const int index;
  const bool decode;  // decode batches (high priority), else prefill chunks
  std::unique_ptr<BackendStream> stream;
  GrowBuffer host_meta, device_meta, device_inputs, device_o;

  // The batch in flight.
  bool busy = false;
  std::vector<BatchEntry> entries;
  const int32_t* cu = nullptr;        // [N + 1] in host_meta
  std::shared_ptr<IoBlock> o_block;   // o [T, Hv, V] comes down here
  int64_t tokens = 0;
  absl::Time launched;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_ENGINE_INTERNAL_H_
