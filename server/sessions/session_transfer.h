// Export / import of a whole session as a stream of SessionChunk messages
// (gdn.proto): one chunk per layer, or several pieces in order when a layer's
// bytes exceed the piece limit. The first chunk carries the LayerConfig,
// which import requires to equal the server's. Pure; safe from any thread.
#ifndef GDN_SERVER_SESSIONS_SESSION_TRANSFER_H_
#define GDN_SERVER_SESSIONS_SESSION_TRANSFER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"
#include "kernels/gdn_types.h"
#include "state_cache/state_cache.h"

namespace gdn {

// Every layer state of one session.
struct SessionStates {
  std::string session_id;
  std::vector<StateCache::LayerState> layers;  // [num_layers]; empty = zero
  int layers_received = 0;                      // import: layers in the stream
};

// The LayerConfig a server with `options` reports (scale: effective scale).
gdn::v1::LayerConfig MakeLayerConfig(int num_layers, const GdnOptions& options);

// FailedPrecondition naming the first field where `got` differs from `want`.
absl::Status CheckLayerConfig(const gdn::v1::LayerConfig& got,
                              const gdn::v1::LayerConfig& want);

// Produces the export chunks of `states` one at a time (the stream writes
// one, then asks for the next), each with at most `max_piece_bytes` of data.
// `states` must outlive the chunker.
class ExportChunker {
 public:
  ExportChunker(const SessionStates* states, gdn::v1::LayerConfig config,
                size_t max_piece_bytes);
  // False when every chunk has been produced.
  bool Next(gdn::v1::SessionChunk* chunk);

 private:
  const SessionStates* states_;
  const gdn::v1::LayerConfig config_;
  const size_t piece_;
  size_t layer_ = 0;
  size_t offset_ = 0;
  bool first_ = true;
};

// All chunks at once (tests, small sessions).
std::vector<gdn::v1::SessionChunk> MakeExportChunks(
    const SessionStates& states, const gdn::v1::LayerConfig& config,
    size_t max_piece_bytes);

// Collects an import stream. Add() each chunk in order, then Finish().
// Checks: a config on the first chunk equal to the server's, one session id
// throughout, layers in range and not repeated, layer_bytes 0 or page_bytes,
// pieces contiguous from offset 0, complete layers, every layer present,
// positions >= 0 (and 0 for a zero state), every session id valid
// (session_id.h), every state value finite and bounded (state_values.h,
// checked as each layer completes). Errors are InvalidArgument
// (FailedPrecondition for a config mismatch) naming what is wrong.
class ImportAssembler {
 public:
  ImportAssembler(gdn::v1::LayerConfig expected, size_t page_bytes);

  absl::Status Add(const gdn::v1::SessionChunk& chunk);
  absl::StatusOr<SessionStates> Finish();

 private:
  absl::Status CloseCurrentLayer();

  const gdn::v1::LayerConfig expected_;
  const size_t page_bytes_;
  StateDType state_dtype_ = StateDType::kF32;  // expected_'s
  SessionStates states_;
  std::vector<bool> seen_;  // [num_layers]
  bool any_chunk_ = false;
  int current_layer_ = -1;       // layer whose pieces are arriving
  int64_t current_bytes_ = 0;    // its layer_bytes
};

}  // namespace gdn

#endif  // GDN_SERVER_SESSIONS_SESSION_TRANSFER_H_
