#include "server/sessions/session_transfer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/tensor_codec.h"
#include "server/sessions/session_id.h"
#include "server/sessions/state_values.h"

namespace gdn {

gdn::v1::LayerConfig MakeLayerConfig(int num_layers, const GdnOptions& o) {
  gdn::v1::LayerConfig c;
  c.set_num_layers(num_layers);
  c.set_num_qk_heads(o.shape.num_qk_heads);
  c.set_num_v_heads(o.shape.num_v_heads);
  c.set_head_dim_k(o.shape.head_dim_k);
  c.set_head_dim_v(o.shape.head_dim_v);
  gdn::v1::DType dtype = gdn::v1::DTYPE_UNSPECIFIED;
  wire::ToProtoDType(o.input_dtype, &dtype);
  c.set_activation_dtype(dtype);
  c.set_state_dtype(std::string(StateDTypeName(o.state_dtype)));
  c.set_gating_mode(std::string(GatingModeName(o.gating)));
  c.set_l2_norm_qk(o.l2_norm_qk);
  c.set_scale(o.effective_scale());
  return c;
}

absl::Status CheckLayerConfig(const gdn::v1::LayerConfig& got,
                              const gdn::v1::LayerConfig& want) {
  auto mismatch = [](absl::string_view field, const auto& g, const auto& w) {
    return absl::FailedPreconditionError(
        absl::StrCat("config.", field, ": this server has ", w,
                     ", the imported session has ", g));
  };
  if (got.num_layers() != want.num_layers())
    return mismatch("num_layers", got.num_layers(), want.num_layers());
  if (got.num_qk_heads() != want.num_qk_heads())
    return mismatch("num_qk_heads", got.num_qk_heads(), want.num_qk_heads());
  if (got.num_v_heads() != want.num_v_heads())
    return mismatch("num_v_heads", got.num_v_heads(), want.num_v_heads());
  if (got.head_dim_k() != want.head_dim_k())
    return mismatch("head_dim_k", got.head_dim_k(), want.head_dim_k());
  if (got.head_dim_v() != want.head_dim_v())
    return mismatch("head_dim_v", got.head_dim_v(), want.head_dim_v());
  if (got.activation_dtype() != want.activation_dtype())
    return mismatch("activation_dtype",
                    gdn::v1::DType_Name(got.activation_dtype()),
                    gdn::v1::DType_Name(want.activation_dtype()));
  if (got.state_dtype() != want.state_dtype()) {
    // A page's bytes (codes and scales for int8 / fp8) mean something only
    // in their own dtype; converting on import would round the state again.
    return absl::FailedPreconditionError(absl::StrCat(
        "config.state_dtype: this server has ", want.state_dtype(),
        ", the imported session has ", got.state_dtype(),
        "; states are not converted between dtypes: import it into a server started with "
        "--state_dtype=", got.state_dtype()));
  }
  if (got.gating_mode() != want.gating_mode())
    return mismatch("gating_mode", got.gating_mode(), want.gating_mode());
  if (got.l2_norm_qk() != want.l2_norm_qk())
    return mismatch("l2_norm_qk", got.l2_norm_qk(), want.l2_norm_qk());
  if (got.scale() != want.scale())
    return mismatch("scale", got.scale(), want.scale());
  return absl::OkStatus();
}

ExportChunker::ExportChunker(const SessionStates* states,
                             gdn::v1::LayerConfig config,
                             size_t max_piece_bytes)
    : states_(states),
      config_(std::move(config)),
      piece_(std::max<size_t>(max_piece_bytes, 1)) {}

bool ExportChunker::Next(gdn::v1::SessionChunk* chunk) {
  if (layer_ >= states_->layers.size()) return false;
  const StateCache::LayerState& state = states_->layers[layer_];
  const size_t total = state.bytes.size();
  chunk->Clear();
  chunk->set_session_id(states_->session_id);
  if (first_) *chunk->mutable_config() = config_;
  first_ = false;
  chunk->set_layer(static_cast<int32_t>(layer_));
  chunk->set_position(state.position);
  chunk->set_layer_bytes(static_cast<int64_t>(total));
  chunk->set_offset(static_cast<int64_t>(offset_));
  const size_t n = std::min(piece_, total - offset_);
  chunk->set_data(reinterpret_cast<const char*>(state.bytes.data()) + offset_,
                  n);
  offset_ += n;
  if (offset_ >= total) {  // a zero state is one chunk without data
    ++layer_;
    offset_ = 0;
  }
  return true;
}

std::vector<gdn::v1::SessionChunk> MakeExportChunks(
    const SessionStates& states, const gdn::v1::LayerConfig& config,
    size_t max_piece_bytes) {
  std::vector<gdn::v1::SessionChunk> chunks;
  ExportChunker chunker(&states, config, max_piece_bytes);
  gdn::v1::SessionChunk chunk;
  while (chunker.Next(&chunk)) chunks.push_back(chunk);
  return chunks;
}

ImportAssembler::ImportAssembler(gdn::v1::LayerConfig expected,
                                 size_t page_bytes)
    : expected_(std::move(expected)), page_bytes_(page_bytes) {
  // The server's own config: its state dtype always parses.
  ParseStateDType(expected_.state_dtype(), &state_dtype_);
  states_.layers.resize(expected_.num_layers());
  seen_.assign(expected_.num_layers(), false);
}

absl::Status ImportAssembler::CloseCurrentLayer() {
  if (current_layer_ < 0) return absl::OkStatus();
  const auto& bytes = states_.layers[current_layer_].bytes;
  if (static_cast<int64_t>(bytes.size()) != current_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", current_layer_, ": received ", bytes.size(), " of ",
        current_bytes_, " bytes before the next layer or the end"));
  }
  // Values as soon as a layer is complete: a bad one ends the stream there.
  if (!bytes.empty()) {
    if (absl::Status s = CheckStateValues(bytes, state_dtype_, expected_.num_v_heads(),
                                          expected_.head_dim_k(), expected_.head_dim_v(),
                                          current_layer_);
        !s.ok()) {
      return s;
    }
  }
  current_layer_ = -1;
  return absl::OkStatus();
}

absl::Status ImportAssembler::Add(const gdn::v1::SessionChunk& chunk) {
  // Every chunk's id, before any message could echo it.
  if (absl::Status s = ValidateRequiredSessionId(chunk.session_id(), "session_id"); !s.ok()) {
    return s;
  }
  if (!any_chunk_) {
    any_chunk_ = true;
    if (!chunk.has_config()) {
      return absl::InvalidArgumentError(
          "config: the first chunk must carry the LayerConfig");
    }
    if (absl::Status s = CheckLayerConfig(chunk.config(), expected_); !s.ok()) {
      return s;
    }
    states_.session_id = chunk.session_id();
  } else if (chunk.session_id() != states_.session_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "session_id: every chunk must name '", states_.session_id, "', got '",
        chunk.session_id(), "'"));
  }
  const int layer = chunk.layer();
  if (layer < 0 || layer >= expected_.num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer: must be in [0, ", expected_.num_layers(), "), got ", layer));
  }
  if (layer != current_layer_) {
    // A new layer starts at offset 0.
    if (absl::Status s = CloseCurrentLayer(); !s.ok()) return s;
    if (seen_[layer]) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", layer, ": appears twice in the stream"));
    }
    if (chunk.layer_bytes() != 0 &&
        chunk.layer_bytes() != static_cast<int64_t>(page_bytes_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, ": layer_bytes must be 0 (zero state) or ",
          page_bytes_, " (one state page), got ", chunk.layer_bytes()));
    }
    if (chunk.position() < 0 ||
        (chunk.layer_bytes() == 0 && chunk.position() != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, ": position ", chunk.position(),
          " is invalid for ", chunk.layer_bytes(), " bytes of state"));
    }
    seen_[layer] = true;
    ++states_.layers_received;
    current_layer_ = layer;
    current_bytes_ = chunk.layer_bytes();
    states_.layers[layer].position = chunk.position();
    states_.layers[layer].bytes.reserve(current_bytes_);
  } else if (chunk.layer_bytes() != current_bytes_ ||
             chunk.position() != states_.layers[layer].position) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer, ": layer_bytes and position must be the same in "
        "every piece"));
  }
  std::vector<uint8_t>& bytes = states_.layers[layer].bytes;
  if (chunk.offset() != static_cast<int64_t>(bytes.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer, ": offset ", chunk.offset(), " out of order, expected ",
        bytes.size()));
  }
  if (static_cast<int64_t>(bytes.size() + chunk.data().size()) >
      current_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer, ": data runs past layer_bytes ", current_bytes_));
  }
  bytes.insert(bytes.end(), chunk.data().begin(), chunk.data().end());
  return absl::OkStatus();
}

absl::StatusOr<SessionStates> ImportAssembler::Finish() {
  if (!any_chunk_) {
    return absl::InvalidArgumentError("the import stream carried no chunks");
  }
  if (absl::Status s = CloseCurrentLayer(); !s.ok()) return s;
  // Every layer must come (a zero state as layer_bytes 0): a stream cut
  // short can then never import as a session with missing layers.
  for (size_t layer = 0; layer < seen_.size(); ++layer) {
    if (!seen_[layer]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, ": missing from the stream (every layer must be "
          "sent; a zero state as layer_bytes 0)"));
    }
  }
  return std::move(states_);
}

}  // namespace gdn
