// The paged state cache: every (session, layer) recurrent state of the server,
// in a device tier (one backend allocation of equal pages, which the kernels
// address by page id) and a host tier (pinned host memory) that takes the
// least recently used idle pages when the device tier is full.
//
// Ownership and threading: one StateCache is owned by the engine thread, which
// is the only thread that calls it (it issues copies on the backend's stream).
// It is not thread-safe.
//
// Life of a write (one kernel call over a batch):
//   lease = AcquireForWrite(key)   // state on device, pinned; a page to write
//   ... kernel reads lease.read_page, writes lease.write_page ...
//   Commit(lease, new_position)    // or Abort(lease) if the kernel failed
// Copy-on-write: a page shared by forked sessions is never written in place;
// AcquireForWrite gives a fresh write page and the kernel reads the shared one,
// so a fork costs no copy at all until (and not even when) either side writes.
//
// Nothing stored is ever dropped to make room unless the config asks for
// eviction: a full cache is ResourceExhausted with the numbers.
#ifndef GDN_STATE_CACHE_STATE_CACHE_H_
#define GDN_STATE_CACHE_STATE_CACHE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/backend.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn {

// The real-time clock at the kernel's last update (CLOCK_REALTIME_COARSE:
// a tick or a few behind, i.e. a few ms; 10-20 ns to read where absl::Now()
// costs 70-130 ns on the VMs we run on). Last-access stamps need no more.
absl::Time CoarseNow();

struct StateCacheConfig {
  int num_layers = 36;
  StatePageLayout layout;            // bytes of one page
  StateDType state_dtype = StateDType::kF32;
  size_t device_budget_bytes = 0;    // device pages = budget / page_bytes
  size_t host_budget_bytes = 0;      // host pages = budget / page_bytes
  // When both tiers are full: false (default) fails the allocation with
  // ResourceExhausted; true evicts whole least-recently-used idle sessions.
  bool evict_lru_sessions_when_full = false;
  // Time source for last-access stamps (tests inject a fake clock). The
  // default is CoarseNow: every write lease and commit stamps its session
  // (two reads per sequence of a call: 512 for a 256-session decode call),
  // and idle expiry counts in seconds.
  std::function<absl::Time()> clock = CoarseNow;
};

enum class Tier { kDevice = 0, kHost = 1 };

struct TierStats {
  int64_t pages_total = 0;
  int64_t pages_used = 0;  // holding a state (shared pages count once)
  int64_t pages_pinned = 0;  // device only: in use by an unfinished batch
  int64_t bytes_total = 0;
  int64_t bytes_used = 0;
};

struct StateCacheStats {
  TierStats device;
  TierStats host;
  int64_t page_bytes = 0;
  int64_t sessions = 0;
  // Monotone counters since start.
  uint64_t spills = 0;        // device -> host page moves
  uint64_t restores = 0;      // host -> device page moves
  uint64_t evictions = 0;     // sessions dropped (only with eviction enabled)
  uint64_t cow_copies = 0;    // writes that left a shared page for a new one
  uint64_t expired = 0;       // sessions closed by ExpireIdle
  // Speculative drafts (AcquireForDraft): device or host pages holding the
  // per-token states of open drafts now, and monotone token counts.
  int64_t draft_pages = 0;
  uint64_t draft_tokens = 0;     // tokens of committed draft writes
  uint64_t accepted_tokens = 0;  // of those, accepted by AcceptDraft
  // Prefix reuse (AcquireForWriteKeeping): kept states held now, and kept
  // states dropped (least recently used first) to make room.
  int64_t kept_states = 0;
  uint64_t kept_dropped = 0;
};

// Per (session, layer) view for Describe.
struct LayerStateInfo {
  int64_t position = 0;  // tokens consumed; 0 and no page = zero state
  bool has_state = false;
  Tier tier = Tier::kDevice;
  int32_t shared_with = 0;  // other sessions sharing this page (fork)
  // An open draft of this many tokens (0: none): `position` is after all of
  // them; the next write chooses position - draft_tokens + 1 .. position.
  int32_t draft_tokens = 0;
  std::vector<int64_t> kept_positions;  // kept states, ascending
};

struct SessionInfo {
  std::string id;
  std::vector<LayerStateInfo> layers;  // [num_layers]
  int64_t bytes = 0;  // page bytes this session references
  absl::Time last_access;
};

// A pinned device state for one (session, layer), handed to one kernel call.
struct WriteLease {
  std::string session;
  int32_t layer = 0;
  int64_t position = 0;     // the stored position when acquired
  int32_t read_page = kZeroStatePage;  // device page id, or kZeroStatePage
  int32_t write_page = 0;              // device page id to write
  // A draft write (AcquireForDraft) of draft_tokens tokens: the state after
  // token j + 1 goes to draft_pages[j], j < draft_tokens - 1 (the kernel's
  // kPerTokenStates slots); write_page gets the one after the last token.
  int32_t draft_tokens = 0;
  std::array<int32_t, kMaxDecodeTokens - 1> draft_pages{};
  // A keeping write (AcquireForWriteKeeping): the state at keep_positions[i]
  // goes to keep_pages[i] (device pages of its own).
  std::vector<int64_t> keep_positions;
  std::vector<int32_t> keep_pages;
};

class StateCache {
 public:
  // Allocates the device pool and host tier through `backend` (kept, not
  // owned; must outlive the cache). InvalidArgument unless
  // layout.page_bytes is a non-zero multiple of 256 and the device budget
  // holds at least one page.
  static absl::StatusOr<std::unique_ptr<StateCache>> Create(
      const StateCacheConfig& config, Backend* backend);
  virtual ~StateCache() = default;

  // The device pool the kernels address (GdnParams::pool).
  virtual StatePoolView pool() const = 0;
  virtual const StateCacheConfig& config() const = 0;

  // Sessions. Ids are non-empty strings chosen by the caller.
  // Close and Fork of a session with a write in flight (a lease not yet
  // committed or aborted) are FailedPrecondition.
  virtual absl::Status CreateSession(const std::string& id) = 0;  // AlreadyExists
  virtual absl::Status CloseSession(const std::string& id) = 0;   // NotFound
  // `child` shares every page of `parent` (copy-on-write) and its positions.
  virtual absl::Status ForkSession(const std::string& parent,
                                   const std::string& child) = 0;
  virtual bool HasSession(const std::string& id) const = 0;
  virtual absl::StatusOr<SessionInfo> DescribeSession(
      const std::string& id) const = 0;
  virtual std::vector<std::string> ListSessions() const = 0;
  // Position of (session, layer); NotFound / OutOfRange for bad ids.
  virtual absl::StatusOr<int64_t> Position(const std::string& session,
                                           int32_t layer) const = 0;
  // What admission reads of (session, layer), in one lookup: whether the
  // session exists, and (when it does and the layer is in range) the
  // layer's position and open draft tokens (else 0).
  struct LayerFacts {
    bool session_exists = false;
    int64_t position = 0;
    int32_t open_draft_tokens = 0;
  };
  virtual LayerFacts Facts(const std::string& session, int32_t layer) const = 0;

  // Writes. AcquireForWrite may spill other idle pages to the host tier and
  // restore this state from it; it fails with ResourceExhausted (nothing
  // changed) when no device page can be freed. A (session, layer) can have
  // one lease at a time (FailedPrecondition otherwise).
  virtual absl::StatusOr<WriteLease> AcquireForWrite(const std::string& session,
                                                     int32_t layer) = 0;
  // The kernel wrote lease.write_page: it becomes the state, at new_position.
  virtual void Commit(const WriteLease& lease, int64_t new_position) = 0;
  // The kernel did not run (or failed): the stored state is as before.
  // (A kernel that failed half-way through an in-place write, read_page ==
  // write_page, may have left that page changed: the cache cannot undo it.)
  virtual void Abort(const WriteLease& lease) = 0;
  // Commit / Abort of a lease that is not in flight (finished already) are
  // ignored.

  // Speculative drafts. AcquireForDraft is AcquireForWrite plus
  // tokens - 1 (tokens in 2..kMaxDecodeTokens) device pages for the states
  // after each draft token but the last (WriteLease::draft_pages). Its
  // Commit(lease, p + tokens) leaves the draft open: the layer is at
  // p + tokens, and keeps every per-token state until AcceptDraft(p + k),
  // k in 1..tokens, makes the state after token k current (position p + k)
  // and frees the others. While a draft is open, AcquireForWrite /
  // AcquireForDraft and ExportLayer of the layer, and ForkSession of the
  // session, are FailedPrecondition naming the accepted range; ImportLayer
  // discards it; Close and eviction free it. AcceptDraft outside the range
  // is FailedPrecondition naming it, and without an open draft
  // FailedPrecondition "no open draft" (nothing changes either way).
  virtual absl::StatusOr<WriteLease> AcquireForDraft(const std::string& session,
                                                     int32_t layer, int32_t tokens) = 0;
  virtual absl::Status AcceptDraft(const std::string& session, int32_t layer,
                                   int64_t position) = 0;
  // Tokens of the open draft of (session, layer); 0 when none or bad ids.
  virtual int32_t OpenDraftTokens(const std::string& session, int32_t layer) const = 0;

  // Prefix reuse. AcquireForWriteKeeping is AcquireForWrite plus one device
  // page per position of `keep` (ascending, after the stored position) for
  // the kernel to write the state at that position into
  // (WriteLease::keep_pages); Commit adds them to the layer's kept states.
  // Kept states are stored states like others (budgeted, spilled to the
  // host tier); when a write finds no room even so, the least recently used
  // kept states whose pages that frees are dropped (any session's) before
  // the write fails or sessions are evicted. A kept state in use by a fork
  // stays with the fork. Close and ImportLayer drop a layer's kept states.
  virtual absl::StatusOr<WriteLease> AcquireForWriteKeeping(const std::string& session,
                                                            int32_t layer,
                                                            const std::vector<int64_t>& keep) = 0;
  // ForkSession at `position`: every layer of the child starts from the
  // parent's kept state at `position` (a use: most recently used now), or its
  // current state when it stands there (no open draft). FailedPrecondition
  // listing the positions available on every layer otherwise.
  virtual absl::Status ForkSessionAt(const std::string& parent, const std::string& child,
                                     int64_t position) = 0;

  // Export / import of one (session, layer) state as host bytes of
  // page_bytes (migration, snapshots). Export of a never-written layer gives
  // an empty vector and position 0. Import requires an existing session;
  // both are FailedPrecondition on a layer with a write in flight.
  struct LayerState {
    int64_t position = 0;
    std::vector<uint8_t> bytes;  // empty = zero state
  };
  virtual absl::StatusOr<LayerState> ExportLayer(const std::string& session,
                                                 int32_t layer) = 0;
  virtual absl::Status ImportLayer(const std::string& session, int32_t layer,
                                   const LayerState& state) = 0;

  // Closes sessions whose last access is before `cutoff`; returns their ids,
  // least recently used first. Sessions with a write in flight are kept.
  virtual std::vector<std::string> ExpireIdle(absl::Time cutoff) = 0;

  virtual StateCacheStats Stats() const = 0;
};

}  // namespace gdn

#endif  // GDN_STATE_CACHE_STATE_CACHE_H_
