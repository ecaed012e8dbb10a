// A session's exported states, collected from ExportSession's chunks, and the
// way back to chunks (ImportSession) and to a file (gdn-cli export / import).
//
// File format ("GDNSNAP2", proto/session_file.h, shared with gdn-server's
// --snapshot_dir): the 8-byte magic, then the chunks of the snapshot, each
// as a varint length, the SessionChunk message bytes and their CRC-32,
// exactly the stream ImportSession takes. Writing gives version 2; reading
// takes "GDNSNAP1" files (no checksums) too.
#ifndef GDN_CLIENT_SESSION_SNAPSHOT_H_
#define GDN_CLIENT_SESSION_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"

namespace gdn::client {

struct SessionSnapshot {
  struct Layer {
    int32_t layer = 0;
    int64_t position = 0;
    std::string bytes;  // one state page's bytes ([Hv, K, V] of state_dtype); empty: zero state
  };
  std::string session_id;
  v1::LayerConfig config;
  std::vector<Layer> layers;  // in the order the server sent them
};

// Assembles chunks (in stream order). InvalidArgument when pieces of a layer
// are missing, overlap or disagree on layer_bytes / position.
absl::StatusOr<SessionSnapshot> SnapshotFromChunks(
    const std::vector<v1::SessionChunk>& chunks);

// Chunks of at most max_chunk_bytes of state each: the first carries the
// config; a zero-state layer is one chunk with layer_bytes 0. A non-empty
// `as_id` replaces the session id.
std::vector<v1::SessionChunk> SnapshotToChunks(const SessionSnapshot& snapshot,
                                               int64_t max_chunk_bytes,
                                               const std::string& as_id = "");

absl::Status WriteSnapshotFile(const std::string& path,
                               const SessionSnapshot& snapshot);
absl::StatusOr<SessionSnapshot> ReadSnapshotFile(const std::string& path);

}  // namespace gdn::client

#endif  // GDN_CLIENT_SESSION_SNAPSHOT_H_
