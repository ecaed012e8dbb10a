#include "client/session_snapshot.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/session_file.h"

namespace gdn::client {

absl::StatusOr<SessionSnapshot> SnapshotFromChunks(
    const std::vector<v1::SessionChunk>& chunks) {
  SessionSnapshot snapshot;
  if (chunks.empty()) {
    return absl::InvalidArgumentError("snapshot has no chunks");
  }
  snapshot.session_id = chunks.front().session_id();
  if (chunks.front().has_config()) snapshot.config = chunks.front().config();
  // Layer index in snapshot.layers by layer number.
  std::map<int32_t, size_t> index;
  std::map<int32_t, int64_t> layer_bytes;
  for (const v1::SessionChunk& c : chunks) {
    auto it = index.find(c.layer());
    if (it == index.end()) {
      it = index.emplace(c.layer(), snapshot.layers.size()).first;
      SessionSnapshot::Layer layer;
      layer.layer = c.layer();
      layer.position = c.position();
      snapshot.layers.push_back(std::move(layer));
      layer_bytes[c.layer()] = c.layer_bytes();
    }
    SessionSnapshot::Layer& layer = snapshot.layers[it->second];
    if (c.position() != layer.position || c.layer_bytes() != layer_bytes[c.layer()]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunks of layer ", c.layer(), " disagree on position / layer_bytes"));
    }
    if (c.offset() != static_cast<int64_t>(layer.bytes.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", c.layer(), ": chunk at offset ", c.offset(),
                       ", expected ", layer.bytes.size()));
    }
    layer.bytes.append(c.data());
    if (static_cast<int64_t>(layer.bytes.size()) > c.layer_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", c.layer(), ": more than layer_bytes ", c.layer_bytes()));
    }
  }
  for (const SessionSnapshot::Layer& layer : snapshot.layers) {
    if (static_cast<int64_t>(layer.bytes.size()) != layer_bytes[layer.layer]) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", layer.layer, ": ", layer.bytes.size(), " of ",
                       layer_bytes[layer.layer], " bytes"));
    }
  }
  return snapshot;
}

std::vector<v1::SessionChunk> SnapshotToChunks(const SessionSnapshot& snapshot,
                                               int64_t max_chunk_bytes,
                                               const std::string& as_id) {
  const std::string& id = as_id.empty() ? snapshot.session_id : as_id;
  const size_t step = static_cast<size_t>(std::max<int64_t>(1, max_chunk_bytes));
  std::vector<v1::SessionChunk> chunks;
  for (const SessionSnapshot::Layer& layer : snapshot.layers) {
    size_t offset = 0;
    do {
      v1::SessionChunk c;
      c.set_session_id(id);
      c.set_layer(layer.layer);
      c.set_position(layer.position);
      c.set_layer_bytes(static_cast<int64_t>(layer.bytes.size()));
      c.set_offset(static_cast<int64_t>(offset));
      const size_t n = std::min(step, layer.bytes.size() - offset);
      c.set_data(layer.bytes.substr(offset, n));
      offset += n;
      chunks.push_back(std::move(c));
    } while (offset < layer.bytes.size());
  }
  if (chunks.empty()) {  // a session without layers still names itself
    v1::SessionChunk c;
    c.set_session_id(id);
    chunks.push_back(std::move(c));
  }
  *chunks.front().mutable_config() = snapshot.config;
  return chunks;
}

absl::Status WriteSnapshotFile(const std::string& path,
                               const SessionSnapshot& snapshot) {
  return wire::WriteSessionFile(path, SnapshotToChunks(snapshot, 1 << 20));
}

absl::StatusOr<SessionSnapshot> ReadSnapshotFile(const std::string& path) {
  absl::StatusOr<std::vector<v1::SessionChunk>> chunks =
      wire::ReadSessionFile(path);
  if (!chunks.ok()) return chunks.status();
  return SnapshotFromChunks(*chunks);
}

}  // namespace gdn::client
