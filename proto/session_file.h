// The session snapshot file, shared by gdn-cli (export / import,
// client/session_snapshot.h) and gdn-server (--snapshot_dir,
// server/sessions/session_snapshot_dir.h).
//
// Format, version 2 (written): the 8-byte magic "GDNSNAP2", then the chunks
// of one session, each as a varint length, the SessionChunk message bytes
// and the CRC-32 of those message bytes (zlib's crc32, the ISO-HDLC / gzip
// polynomial, 4 bytes little-endian). The chunks are exactly the stream
// ImportSession takes (the first carries the LayerConfig; a layer is one or
// more chunks), so every layer's state bytes, and its position, offset and
// layer number, are covered by a checksum: a flipped byte is DATA_LOSS
// instead of a silently wrong state (issue 21).
//
// Version 1 ("GDNSNAP1", read only): the same without the checksums. Files
// written before version 2 still restore; nothing detects their damage
// beyond a chunk that no longer parses.
//
// Pure; safe from any thread.
#ifndef GDN_PROTO_SESSION_FILE_H_
#define GDN_PROTO_SESSION_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gdn/v1/gdn.pb.h"

namespace gdn::wire {

// The magic written (version 2) and the older one still read.
inline constexpr absl::string_view kSessionFileMagic = "GDNSNAP2";
inline constexpr absl::string_view kSessionFileMagicV1 = "GDNSNAP1";

// The file's bytes: magic + the records of `chunks` (version 2).
std::string EncodeSessionFile(const std::vector<v1::SessionChunk>& chunks);
// The same one chunk at a time: start `out` as std::string(kSessionFileMagic)
// and append each chunk (so a large session needs no vector of chunks).
void AppendSessionFileChunk(const v1::SessionChunk& chunk, std::string* out);

// The chunks of a file's bytes (either version); `name` (a path) only
// labels errors. InvalidArgument without a known magic, DataLoss for a
// truncated or corrupt chunk or a checksum that does not match. Chunks are
// not checked against each other (ImportAssembler / SnapshotFromChunks do
// that).
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
