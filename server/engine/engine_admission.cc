// Admission of Forward calls (engine thread): waiting calls are admitted in
// position order (admission.h decides), restored from the snapshot
// directory first when the cache lacks their session, given every
// WriteLease (all or nothing) and an integer slot per (session, layer); and
// admitted calls that have not started are dropped when cancelled, past
// their deadline or refused by their own check (a region unregistered).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/engine/admission.h"
#include "server/engine/engine.h"
#include "server/engine/engine_internal.h"

namespace gdn {
namespace {

std::string CacheNumbers(const StateCacheStats& s) {
  return absl::StrCat("device pages ", s.device.pages_used, "/", s.device.pages_total,
                      " used (", s.device.pages_pinned, " pinned), host pages ",
                      s.host.pages_used, "/", s.host.pages_total, " used, page ",
                      s.page_bytes, " bytes, ", s.sessions, " sessions");
}

}  // namespace

absl::Status Engine::RestoreMissingSessions(const ForwardCall& call) {
  for (const ForwardSequence& seq : call.sequences) {
    if (cache_->HasSession(seq.session)) continue;
    absl::Status s = restorer_(*cache_, seq.session);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  return absl::OkStatus();
}

void Engine::AdmitWaiting(absl::Time now) {
  // One cache lookup per sequence; `open_drafts` notes whether any session
  // has an open draft (only then does AcceptDrafts look again).
  auto key_state = [this](int32_t layer, bool* open_drafts) {
    return [this, layer, open_drafts](const std::string& session) {
      KeyState state;
      const StateCache::LayerFacts facts = cache_->Facts(session, layer);
      state.session_exists = facts.session_exists;
      if (!state.session_exists) return state;
      state.stored_position = facts.position;
      state.open_draft_tokens = facts.open_draft_tokens;
      *open_drafts |= facts.open_draft_tokens > 0;
      // No slot is busy between the calls of a closed-loop client: no hash.
      const int32_t slot = slots_.busy() == 0 ? -1 : slots_.Find(StateKey(session, layer));
      if (slot >= 0) {
        state.busy = true;
        for (const ForwardSequence& seq : slots_[slot].owner->call->sequences) {
          if (seq.session == session) {
            state.running_tokens = seq.num_tokens;
            state.running_draft = seq.draft;
          }
        }
      }
      return state;
    };
  };

  for (auto it = waiting_.begin(); it != waiting_.end();) {
    ForwardCall& call = **it;
    absl::Status failure;
    if (call.is_cancelled && call.is_cancelled()) {
      failure = absl::CancelledError("cancelled by the client");
    } else if (now >= call.deadline) {
      failure = absl::DeadlineExceededError(absl::StrCat(
          "deadline passed while waiting for earlier positions of layer ", call.layer,
          " (sequences[0]: session '", call.sequences[0].session, "' position ",
          call.sequences[0].position, ")"));
    }
    bool has_pending_command = false;
    for (size_t i = 0; !sessions_with_commands_.empty() && i < call.sequences.size(); ++i) {
      has_pending_command |= sessions_with_commands_.contains(call.sequences[i].session);
    }
    if (failure.ok() && has_pending_command) {
      ++it;  // a session command queued before it runs first
      continue;
    }
    if (failure.ok() && restorer_) failure = RestoreMissingSessions(call);
    bool open_drafts = false;
    if (failure.ok()) {
      const AdmissionDecision decision =
          DecideAdmission(call.layer, call.sequences, key_state(call.layer, &open_drafts));
      if (decision.action == AdmissionAction::kWait) {
        ++it;
        continue;
      }
      failure = decision.status;
    }
    std::unique_ptr<ForwardCall> owned = std::move(*it);
    it = waiting_.erase(it);
    std::vector<WriteLease> leases;
    if (failure.ok() && owned->admission_check) failure = owned->admission_check(*cache_, *owned);
    if (failure.ok() && open_drafts) failure = AcceptDrafts(*owned);
    if (failure.ok()) failure = AcquireLeases(*owned, &leases);
    if (!failure.ok()) {
      FailWaiting(std::move(owned), std::move(failure));
      continue;
    }
    auto running = std::make_unique<RunningCall>();
    const size_t n = owned->sequences.size();
    running->leases = std::move(leases);
    running->planned_tokens.assign(n, 0);
    running->done_tokens.assign(n, 0);
    running->call = std::move(owned);
    running->slots.reserve(n);
    for (const ForwardSequence& seq : running->call->sequences) {
      running->slots.push_back(
          slots_.Assign(StateKey(seq.session, running->call->layer), running.get()));
    }
    running_.push_back(std::move(running));
  }
}

// Admission allowed the call, so each position is inside its open draft.
// Accepting is not undone if the leases then fail: the position stays valid
// for a retry (it is now the stored one).
absl::Status Engine::AcceptDrafts(const ForwardCall& call) {
  for (const ForwardSequence& seq : call.sequences) {
    if (cache_->OpenDraftTokens(seq.session, call.layer) == 0) continue;
    if (absl::Status s = cache_->AcceptDraft(seq.session, call.layer, seq.position); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::AcquireLeases(const ForwardCall& call, std::vector<WriteLease>* leases) {
  leases->reserve(call.sequences.size());
  for (const ForwardSequence& seq : call.sequences) {
    // Kept positions: the multiples of the interval inside the sequence.
    std::vector<int64_t> keep;
    for (int64_t at = seq.checkpoint_interval > 0
                          ? (seq.position / seq.checkpoint_interval + 1) * seq.checkpoint_interval
                          : 0;
         seq.checkpoint_interval > 0 && at < seq.position + seq.num_tokens;
         at += seq.checkpoint_interval) {
      keep.push_back(at);
    }
    absl::StatusOr<WriteLease> lease =
        seq.draft      ? cache_->AcquireForDraft(seq.session, call.layer, seq.num_tokens)
        : keep.empty() ? cache_->AcquireForWrite(seq.session, call.layer)
                       : cache_->AcquireForWriteKeeping(seq.session, call.layer, keep);
    if (!lease.ok()) {
      // All or nothing: give back what this call already took.
      for (const WriteLease& taken : *leases) cache_->Abort(taken);
      leases->clear();
      absl::Status status = lease.status();
      if (status.code() == absl::StatusCode::kResourceExhausted) {
        status = absl::ResourceExhaustedError(absl::StrCat(
            "state cache full for session '", seq.session, "' layer ", call.layer, ": ",
            status.message(), " [", CacheNumbers(cache_->Stats()), "]"));
      }
      return status;
    }
    leases->push_back(std::move(*lease));
  }
  return absl::OkStatus();
}

void Engine::DropUnstartedCancelled(absl::Time now) {
  for (auto it = running_.begin(); it != running_.end();) {
    auto next = std::next(it);
    RunningCall& running = **it;
    if (!running.started) {
      const ForwardCall& call = *running.call;
      if (call.is_cancelled && call.is_cancelled()) {
        FinishCall(it, absl::CancelledError("cancelled by the client"));
      } else if (now >= call.deadline) {
        FinishCall(it, absl::DeadlineExceededError("deadline passed before the call could run"));
      } else if (call.check_before_start) {
        if (absl::Status s = call.check_before_start(); !s.ok()) FinishCall(it, std::move(s));
      }
    }
    it = next;
  }
}

}  // namespace gdn
