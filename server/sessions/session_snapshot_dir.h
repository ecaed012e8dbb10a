// --snapshot_dir: the directory through which a draining server hands its
// sessions to whichever server is asked for them next (rolling restarts,
// rebalancing behind a consistent-hash proxy).
//
// Files, all in DIR (one flat directory shared by the servers):
//   <escaped id>.gdnsnap                a session, "GDNSNAP2" format
//                                       (proto/session_file.h: exactly the
//                                       ImportSession stream, a CRC-32 per
//                                       chunk; "GDNSNAP1" files still read)
//   <escaped id>.gdnsnap.<token>.tmp    being written (never read)
//   <escaped id>.gdnsnap.<token>.claimed  being restored by one server
//   <escaped id>.gdnsnap.<token>.rejected a file that failed validation,
//                                       kept for a person to look at
// <token> is unique to the process and call ("<pid>-<16 hex>-<n>").
//
// Escaping (EscapeSessionId): [A-Za-z0-9_-] stay, every other byte becomes
// %XX (so "." "/" "%" and non-ASCII never reach the file system raw, and
// ".." is "%2E%2E"). An escaping longer than kMaxEscapedIdBytes keeps its
// first part and ends in "~" + 16 hex digits of a 64-bit FNV-1a hash of the
// whole id, so every name stays under NAME_MAX; the file itself carries the
// id, which a restore checks.
//
// Writing (drain): each file goes to a .tmp name in DIR, is fsynced and
// renamed into place (and DIR fsynced): a reader never sees a partial file.
// Restoring: a server claims <escaped id>.gdnsnap by renaming it to its own
// .claimed name, an atomic step only one server can win (the others find no
// file: NOT_FOUND). It then imports it exactly as ImportSession would
// (ImportAssembler: LayerConfig equal to the server's, every layer complete,
// every state value finite and bounded) and deletes the claimed file once
// the import committed. A malformed file (a checksum that does not match, a
// bad state value) or a LayerConfig mismatch is renamed .rejected (never
// deleted) and the call fails with DATA_LOSS / FAILED_PRECONDITION; when the
// cache has no room (RESOURCE_EXHAUSTED) the file is put back for a later
// try.
//
// Not handled: a server killed between claim and import leaves a .claimed
// file (and a writer killed mid-write a .tmp file); neither is ever served,
// an operator can rename a .claimed file back. ListSessions reports only the
// sessions a server holds, never files.
#ifndef GDN_SERVER_SESSIONS_SESSION_SNAPSHOT_DIR_H_
#define GDN_SERVER_SESSIONS_SESSION_SNAPSHOT_DIR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gdn/v1/gdn.pb.h"
#include "server/ops/metrics.h"
#include "state_cache/state_cache.h"

namespace gdn {

inline constexpr absl::string_view kSnapshotSuffix = ".gdnsnap";
inline constexpr size_t kMaxEscapedIdBytes = 160;

// A file-name-safe, reversible escaping of any id (see above).
std::string EscapeSessionId(absl::string_view id);
// The id back; nullopt for a hashed (shortened) name or a string
// EscapeSessionId never produces.
std::optional<std::string> UnescapeSessionId(absl::string_view escaped);

// `data` into `path` so that no reader ever sees a partial file: a temporary
// file beside it, fsync, rename, fsync of the directory.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data);

struct SnapshotDrainReport {
  int written = 0;
  int failed = 0;
  int64_t bytes = 0;
  std::vector<std::string> errors;  // one line per failed session
};

class SessionSnapshotDir {
 public:
  // Creates `dir` when missing (not its parents). FailedPrecondition when it
  // is not a writable directory. `config` / `page_bytes` are the server's
  // (what ImportSession checks). `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<SessionSnapshotDir>> Open(
      const std::string& dir, gdn::v1::LayerConfig config, size_t page_bytes,
      ServerMetrics* metrics);

  const std::string& dir() const { return dir_; }
  // DIR/<escaped id>.gdnsnap
  std::string PathFor(absl::string_view id) const;

  // Any thread. AlreadyExists when a snapshot file holds `id` (Create,
  // Fork's child and Import must not take an id that a file still holds).
  absl::Status CheckIdFree(absl::string_view id) const;
  // Any thread. The number of <...>.gdnsnap files in DIR.
  int CountSnapshots() const;

  // Engine thread (owns `cache`). OK: `id` is held, already or restored now.
  // NotFound: no file for it (or another server claimed it first). Else the
  // restore failed and nothing was created: FailedPrecondition (LayerConfig
  // mismatch) or DataLoss (malformed file), both with the file kept as
  // .rejected; ResourceExhausted or an I/O error with the file put back.
  absl::Status RestoreIfAbsent(StateCache& cache, const std::string& id);

  // Engine thread, once no call is running: writes every session of `cache`
  // to its file (encoded and written on up to 4 threads at once) and closes
  // the sessions that were written.
  SnapshotDrainReport WriteAll(StateCache& cache);

 private:
  SessionSnapshotDir(std::string dir, gdn::v1::LayerConfig config,
                     size_t page_bytes, ServerMetrics* metrics);
  std::string UniqueToken();
  // Renames `claimed` to .rejected; the error to return.
  absl::Status Reject(const std::string& id, const std::string& claimed,
                      const std::string& token, absl::StatusCode code,
                      absl::string_view reason);

  const std::string dir_;
  const gdn::v1::LayerConfig config_;
  const size_t page_bytes_;
  ServerMetrics* const metrics_;
  const uint64_t instance_;  // random, per server object
  std::atomic<uint64_t> counter_{0};
};

}  // namespace gdn

#endif  // GDN_SERVER_SESSIONS_SESSION_SNAPSHOT_DIR_H_
