// Fuzz target: the ImportSession stream's assembler
// (server/sessions/session_transfer.h: ImportAssembler), which checks every
// chunk a client streams before anything reaches the state cache.
//
// Input: the first byte picks the state dtype (even: fp32, odd: bf16); the
// rest is a sequence of SessionChunk messages in the session file's
// version-1 framing (a varint length, then the message; proto/session_file.h),
// so the fuzzer works on whole chunks. The server's configuration is tiny
// (2 layers, Hv = 1, K = V = 4: 64-byte fp32 / 32-byte bf16 pages) so that
// complete, valid sessions are within reach.
//
// Properties, beyond "no crash, no sanitizer finding":
//   - a refusal is InvalidArgument, or FailedPrecondition for a config that
//     is not the server's; after a refused Add nothing else is fed (as the
//     server ends the stream);
//   - an accepted session has a valid id, one entry per layer, each empty
//     (position 0) or one page of finite values with position >= 0;
//   - exporting it again (MakeExportChunks, any piece size) and importing
//     that gives the same session, byte for byte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gdn/v1/gdn.pb.h"
#include "proto/session_file.h"
#include "server/sessions/session_id.h"
#include "server/sessions/session_transfer.h"
#include "tests/fuzz/fuzz_check.h"

namespace gdn {
namespace {

gdn::v1::LayerConfig TinyConfig(bool bf16) {
  gdn::v1::LayerConfig c;
  c.set_num_layers(2);
  c.set_num_qk_heads(1);
  c.set_num_v_heads(1);
  c.set_head_dim_k(4);
  c.set_head_dim_v(4);
  c.set_activation_dtype(gdn::v1::DTYPE_FP32);
  c.set_state_dtype(bf16 ? "bf16" : "fp32");
  c.set_gating_mode("direct");
  c.set_l2_norm_qk(true);
  c.set_scale(0.5f);
  return c;
}

absl::StatusOr<SessionStates> Assemble(const gdn::v1::LayerConfig& config, size_t page_bytes,
                                       const std::vector<gdn::v1::SessionChunk>& chunks) {
  ImportAssembler assembler(config, page_bytes);
  for (const gdn::v1::SessionChunk& chunk : chunks) {
    if (absl::Status s = assembler.Add(chunk); !s.ok()) return s;
  }
  return assembler.Finish();
}

void Fuzz(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const bool bf16 = (data[0] & 1) != 0;
  const gdn::v1::LayerConfig config = TinyConfig(bf16);
  const size_t page_bytes = bf16 ? 32 : 64;
  const std::string file = std::string(wire::kSessionFileMagicV1) +
                           std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  absl::StatusOr<std::vector<gdn::v1::SessionChunk>> chunks =
      wire::DecodeSessionFile(file, "fuzz");
  if (!chunks.ok()) return;  // the framing's own fuzzer covers refusals here

  absl::StatusOr<SessionStates> states = Assemble(config, page_bytes, *chunks);
  if (!states.ok()) {
    const absl::StatusCode code = states.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
               code == absl::StatusCode::kFailedPrecondition);
    return;
  }
  FUZZ_CHECK(ValidateRequiredSessionId(states->session_id, "session_id").ok());
  FUZZ_CHECK(states->layers.size() == 2);
  for (const StateCache::LayerState& layer : states->layers) {
    FUZZ_CHECK(layer.position >= 0);
    FUZZ_CHECK(layer.bytes.empty() || layer.bytes.size() == page_bytes);
    if (layer.bytes.empty()) FUZZ_CHECK(layer.position == 0);
  }
  // Export and import again: the same session.
  const size_t piece = 1 + size % page_bytes;
  absl::StatusOr<SessionStates> again =
      Assemble(config, page_bytes, MakeExportChunks(*states, config, piece));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->session_id == states->session_id);
  FUZZ_CHECK(again->layers.size() == states->layers.size());
  for (size_t i = 0; i < states->layers.size(); ++i) {
    FUZZ_CHECK(again->layers[i].position == states->layers[i].position);
    FUZZ_CHECK(again->layers[i].bytes == states->layers[i].bytes);
  }
}

}  // namespace
}  // namespace gdn

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gdn::Fuzz(data, size);
  return 0;
}
