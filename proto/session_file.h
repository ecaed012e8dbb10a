// The session snapshot file ("GDNSNAP1"), shared by gdn-cli (export /
// import, client/session_snapshot.h) and gdn-server (--snapshot_dir,
// server/sessions/session_snapshot_dir.h).
//
// Format: the 8-byte magic "GDNSNAP1", then the chunks of one session as
// length-delimited SessionChunk messages (varint length, message bytes),
// exactly the stream ImportSession takes (the first chunk carries the
// LayerConfig). A file is therefore replayable without this library, and
// versioned by the proto, not by this code. Pure; safe from any thread.
#ifndef GDN_PROTO_SESSION_FILE_H_
#define GDN_PROTO_SESSION_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gdn/v1/gdn.pb.h"

namespace gdn::wire {

inline constexpr absl::string_view kSessionFileMagic = "GDNSNAP1";

// The file's bytes: magic + length-delimited `chunks`.
std::string EncodeSessionFile(const std::vector<v1::SessionChunk>& chunks);
// The same one chunk at a time: start `out` as std::string(kSessionFileMagic)
// and append each chunk (so a large session needs no vector of chunks).
void AppendSessionFileChunk(const v1::SessionChunk& chunk, std::string* out);

// The chunks of a file's bytes; `name` (a path) only labels errors.
// InvalidArgument without the magic, DataLoss for a truncated or corrupt
// chunk. Chunks are not checked against each other (ImportAssembler /
// SnapshotFromChunks do that).
absl::StatusOr<std::vector<v1::SessionChunk>> DecodeSessionFile(
    absl::string_view data, absl::string_view name);

// Whole-file helpers. Write truncates and writes in place (gdn-cli); the
// server writes through a temporary file and a rename instead. Read:
// NotFound when the file cannot be opened.
absl::Status WriteSessionFile(const std::string& path,
                              const std::vector<v1::SessionChunk>& chunks);
absl::StatusOr<std::vector<v1::SessionChunk>> ReadSessionFile(
    const std::string& path);

// The whole content of `path` (NotFound when it cannot be opened).
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

}  // namespace gdn::wire

#endif  // GDN_PROTO_SESSION_FILE_H_
