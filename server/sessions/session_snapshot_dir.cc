#include "server/sessions/session_snapshot_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <iostream>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/session_file.h"
#include "server/sessions/draft_ops.h"
#include "server/sessions/session_ops.h"
#include "server/sessions/session_transfer.h"

namespace gdn {
namespace {

bool KeptAsIs(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-';
}

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string ParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status FsyncPath(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return absl::ErrnoToStatus(err, absl::StrCat("fsync ", path));
  return absl::OkStatus();
}

std::string ProcessToken() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t random = absl::Uniform<uint64_t>(absl::BitGen());
  return absl::StrFormat("%d-%016x-%d", static_cast<int>(getpid()), random,
                         ++counter);
}

void Log(absl::string_view line) {
  std::cerr << "gdn-server: " << line << std::endl;
}

}  // namespace

std::string EscapeSessionId(absl::string_view id) {
  std::string out;
  out.reserve(id.size());
  for (unsigned char c : id) {
    if (KeptAsIs(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  if (out.size() <= kMaxEscapedIdBytes) return out;
  constexpr size_t kHashPart = 17;  // "~" + 16 hex digits
  size_t cut = kMaxEscapedIdBytes - kHashPart;
  // Never cut inside a %XX.
  if (out[cut - 1] == '%') {
    cut -= 1;
  } else if (out[cut - 2] == '%') {
    cut -= 2;
  }
  out.resize(cut);
  absl::StrAppendFormat(&out, "~%016x", Fnv1a64(id));
  return out;
}

std::optional<std::string> UnescapeSessionId(absl::string_view escaped) {
  std::string id;
  for (size_t i = 0; i < escaped.size(); ++i) {
    const char c = escaped[i];
    if (c == '%') {
      if (i + 2 >= escaped.size()) return std::nullopt;
      const int hi = HexValue(escaped[i + 1]);
      const int lo = HexValue(escaped[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      id.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (KeptAsIs(static_cast<unsigned char>(c))) {
      id.push_back(c);
    } else {
      return std::nullopt;  // "~" (a hashed name) or a stray byte
    }
  }
  // Only EscapeSessionId's own spelling (no "%41" for "A").
  if (EscapeSessionId(id) != escaped) return std::nullopt;
  return id;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data) {
  const std::string tmp = absl::StrCat(path, ".", ProcessToken(), ".tmp");
  const int fd =
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("create ", tmp));
  auto fail = [&](int err, absl::string_view what) {
    close(fd);
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat(what, " ", tmp));
  };
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno, "write");
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail(errno, "fsync");
  if (close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat("close ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat("rename ", tmp, " to ", path));
  }
  // The rename itself survives a crash only once the directory is synced.
  return FsyncPath(ParentDir(path), O_RDONLY | O_DIRECTORY);
}

absl::StatusOr<std::unique_ptr<SessionSnapshotDir>> SessionSnapshotDir::Open(
    const std::string& dir, gdn::v1::LayerConfig config, size_t page_bytes,
    ServerMetrics* metrics) {
  std::string clean = dir;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  if (clean.empty()) {
    return absl::InvalidArgumentError("snapshot_dir: must not be empty");
  }
  struct stat st;
  if (stat(clean.c_str(), &st) != 0) {
    if (errno != ENOENT || mkdir(clean.c_str(), 0755) != 0 ||
        stat(clean.c_str(), &st) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("snapshot_dir: cannot use or create '", clean,
                       "': ", std::strerror(errno)));
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot_dir: '", clean, "' is not a directory"));
  }
  if (access(clean.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot_dir: '", clean, "' is not writable: ", std::strerror(errno)));
  }
  return std::unique_ptr<SessionSnapshotDir>(new SessionSnapshotDir(
      std::move(clean), std::move(config), page_bytes, metrics));
}

SessionSnapshotDir::SessionSnapshotDir(std::string dir,
                                       gdn::v1::LayerConfig config,
                                       size_t page_bytes,
                                       ServerMetrics* metrics)
    : dir_(std::move(dir)),
      config_(std::move(config)),
      page_bytes_(page_bytes),
      metrics_(metrics),
      instance_(absl::Uniform<uint64_t>(absl::BitGen())) {}

std::string SessionSnapshotDir::PathFor(absl::string_view id) const {
  return absl::StrCat(dir_, "/", EscapeSessionId(id), kSnapshotSuffix);
}

std::string SessionSnapshotDir::UniqueToken() {
  return absl::StrFormat("%d-%016x-%d", static_cast<int>(getpid()), instance_,
                         ++counter_);
}

absl::Status SessionSnapshotDir::CheckIdFree(absl::string_view id) const {
  struct stat st;
  if (stat(PathFor(id).c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "session '", id, "' already exists as a snapshot in ", dir_,
        " (a drained server left it; the first call naming it restores it)"));
  }
  return absl::OkStatus();
}

int SessionSnapshotDir::CountSnapshots() const {
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return 0;
  int count = 0;
  while (const dirent* entry = readdir(d)) {
    if (absl::EndsWith(entry->d_name, kSnapshotSuffix)) ++count;
  }
  closedir(d);
  return count;
}

absl::Status SessionSnapshotDir::Reject(const std::string& id,
                                        const std::string& claimed,
                                        const std::string& token,
                                        absl::StatusCode code,
                                        absl::string_view reason) {
  const std::string rejected =
      absl::StrCat(PathFor(id), ".", token, ".rejected");
  std::string kept = rejected;
  if (rename(claimed.c_str(), rejected.c_str()) != 0) kept = claimed;
  if (metrics_ != nullptr) metrics_->RecordSnapshotRestored(false);
  absl::Status status(
      code, absl::StrCat("session '", id, "': its snapshot ", PathFor(id),
                         " was rejected (kept as ", kept, "): ", reason));
  Log(status.message());
  return status;
}

absl::Status SessionSnapshotDir::RestoreIfAbsent(StateCache& cache,
                                                 const std::string& id) {
  if (cache.HasSession(id)) return absl::OkStatus();
  const std::string path = PathFor(id);
  const std::string token = UniqueToken();
  const std::string claimed = absl::StrCat(path, ".", token, ".claimed");
  // The claim: of several servers renaming the same file, one wins.
  if (rename(path.c_str(), claimed.c_str()) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("session '", id, "' not found"));
    }
    if (metrics_ != nullptr) metrics_->RecordSnapshotRestored(false);
    return absl::ErrnoToStatus(
        err, absl::StrCat("session '", id, "': cannot claim snapshot ", path));
  }
  auto put_back = [&](const absl::Status& s) {
    rename(claimed.c_str(), path.c_str());
    if (metrics_ != nullptr) metrics_->RecordSnapshotRestored(false);
    absl::Status status(s.code(), absl::StrCat("session '", id,
                                               "': restoring snapshot ", path,
                                               " failed (file kept): ",
                                               s.message()));
    Log(status.message());
    return status;
  };

  absl::StatusOr<SessionStates> states;
  {
    absl::StatusOr<std::string> data = wire::ReadFileBytes(claimed);
    if (!data.ok()) return put_back(absl::UnavailableError(data.status().message()));
    absl::StatusOr<std::vector<gdn::v1::SessionChunk>> chunks =
        wire::DecodeSessionFile(*data, path);
    if (!chunks.ok()) {
      return Reject(id, claimed, token, absl::StatusCode::kDataLoss,
                    chunks.status().message());
    }
    data->clear();
    data->shrink_to_fit();
    // Exactly ImportSession's checks.
    ImportAssembler assembler(config_, page_bytes_);
    absl::Status added;
    for (const gdn::v1::SessionChunk& chunk : *chunks) {
      added = assembler.Add(chunk);
      if (!added.ok()) break;
    }
    chunks->clear();
    states = added.ok() ? assembler.Finish() : absl::StatusOr<SessionStates>(added);
  }
  if (!states.ok()) {
    // A LayerConfig mismatch stays FAILED_PRECONDITION as on import; any
    // other flaw is a damaged file.
    const absl::StatusCode code =
        states.status().code() == absl::StatusCode::kFailedPrecondition
            ? absl::StatusCode::kFailedPrecondition
            : absl::StatusCode::kDataLoss;
    return Reject(id, claimed, token, code, states.status().message());
  }
  if (states->session_id != id) {
    return Reject(id, claimed, token, absl::StatusCode::kDataLoss,
                  absl::StrCat("the file holds session '", states->session_id,
                               "'"));
  }
  if (absl::Status s = ImportSessionOp(cache, *states); !s.ok()) {
    return put_back(s);  // e.g. RESOURCE_EXHAUSTED: a later call may fit
  }
  if (unlink(claimed.c_str()) != 0) {
    Log(absl::StrCat("restored session '", id, "' but could not delete ",
                     claimed, ": ", std::strerror(errno)));
  }
  if (metrics_ != nullptr) metrics_->RecordSnapshotRestored(true);
  return absl::OkStatus();
}

SnapshotDrainReport SessionSnapshotDir::WriteAll(StateCache& cache) {
  // Sessions are exported here (this thread owns the cache) and encoded and
  // written (write(), fsync, rename) by up to kWriters threads at once: one
  // after another, a drain of 36-layer sessions (72 MiB each) wrote 0.27 -
  // 0.39 GB/s on the H200 host (bench/results/2026-12-02-multi-server-h200/),
  // long enough for clients' retries to give up. A session is closed only
  // once its file is complete, in the order exported. Memory: at most
  // kWriters sessions' states and encoded files at a time.
  constexpr size_t kPieceBytes = 1 << 20;
  constexpr size_t kWriters = 4;
  struct Pending {
    std::string id;
    std::future<absl::StatusOr<int64_t>> bytes;  // the file's size once written
  };
  SnapshotDrainReport report;
  auto record = [&](const std::string& id, const absl::Status& status, int64_t bytes) {
    if (metrics_ != nullptr) metrics_->RecordSnapshotWritten(status.ok());
    if (status.ok()) {
      ++report.written;
      report.bytes += bytes;
      cache.CloseSession(id).IgnoreError();  // handed over
    } else {
      ++report.failed;
      report.errors.push_back(absl::StrCat("session '", id, "': ", status.message()));
    }
  };
  std::deque<Pending> pending;
  auto finish_oldest = [&] {
    Pending done = std::move(pending.front());
    pending.pop_front();
    absl::StatusOr<int64_t> bytes = done.bytes.get();
    record(done.id, bytes.status(), bytes.ok() ? *bytes : 0);
  };
  for (const std::string& id : cache.ListSessions()) {
    // An open speculative draft is committed in full: the snapshot holds
    // one state per layer (gdn.proto SequenceSpec.draft).
    CommitAllDrafts(cache, id);
    absl::StatusOr<SessionStates> states = ExportSessionOp(cache, id);
    if (!states.ok()) {
      record(id, states.status(), 0);
      continue;
    }
    if (pending.size() >= kWriters) finish_oldest();
    pending.push_back(
        // async | deferred: libstdc++ runs it on a new thread, or here at
        // get() when no thread can be made (EAGAIN), so a drain never throws.
        {id, std::async(std::launch::async | std::launch::deferred,
                        [this, path = PathFor(id), states = std::move(*states)]() mutable
                        -> absl::StatusOr<int64_t> {
                          std::string data(wire::kSessionFileMagic);
                          ExportChunker chunker(&states, config_, kPieceBytes);
                          gdn::v1::SessionChunk chunk;
                          while (chunker.Next(&chunk)) wire::AppendSessionFileChunk(chunk, &data);
                          states.layers.clear();
                          if (absl::Status s = WriteFileAtomically(path, data); !s.ok()) return s;
                          return static_cast<int64_t>(data.size());
                        })});
  }
  while (!pending.empty()) finish_oldest();
  return report;
}

}  // namespace gdn
