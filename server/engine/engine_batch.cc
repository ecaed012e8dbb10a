// One engine iteration: plan, stage, run the kernels, copy o back, complete.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/decode_runner.h"
#include "kernels/gating.h"
#include "server/engine/engine.h"
#include "server/engine/engine_internal.h"

namespace gdn {
namespace {

float ReadFloat(const std::string& bytes, size_t index) {
  float x;
  std::memcpy(&x, bytes.data() + index * sizeof(float), sizeof(float));
  return x;
}

}  // namespace

bool Engine::ReadyToRunNow(absl::Time now, absl::Time* fill_deadline) const {
  absl::Time oldest = absl::InfiniteFuture();
  int64_t decode_tokens = 0;
  int64_t prefill_tokens = 0;
  for (const auto& running : running_) {
    // A chunked prefill in progress continues without waiting.
    if (running->started) return true;
    oldest = std::min(oldest, running->call->enqueued);
    for (const ForwardSequence& seq : running->call->sequences) {
      (seq.num_tokens <= kMaxDecodeTokens ? decode_tokens : prefill_tokens) +=
          seq.num_tokens;
    }
  }
  if (decode_tokens >= config_.max_batch_tokens ||
      prefill_tokens >= config_.max_batch_tokens) {
    return true;  // a full batch: no reason to wait for more
  }
  // Less than a full batch: wait up to max_queue_delay from the oldest call's
  // arrival for others to join it.
  *fill_deadline = oldest + config_.max_queue_delay;
  return now >= *fill_deadline;
}

void Engine::RunIteration() {
  // Plan over every unfinished sequence of the admitted calls.
  std::vector<PlanItem> items;
  std::vector<std::pair<RunningCall*, int>> owners;
  for (const auto& running : running_) {
    const ForwardCall& call = *running->call;
    for (size_t i = 0; i < call.sequences.size(); ++i) {
      const ForwardSequence& seq = call.sequences[i];
      if (running->done_tokens[i] >= seq.num_tokens) continue;
      items.push_back({StateKey(seq.session, call.layer), seq.num_tokens,
                       running->done_tokens[i]});
      owners.emplace_back(running.get(), static_cast<int>(i));
    }
  }
  PlannerLimits limits;
  limits.max_batch_tokens = config_.max_batch_tokens;
  const BatchPlan plan = PlanBatch(items, limits);

  PhaseBatch decode;
  decode.phase = "decode";
  decode.decode = true;
  PhaseBatch prefill;
  prefill.phase = "prefill";
  prefill.decode = false;
  for (auto [chunks, batch] : {std::pair{&plan.decode, &decode},
                               std::pair{&plan.prefill, &prefill}}) {
    for (const PlannedChunk& chunk : *chunks) {
      batch->entries.push_back({owners[chunk.item].first,
                                owners[chunk.item].second, chunk.offset,
                                chunk.tokens});
      batch->tokens += chunk.tokens;
    }
  }

  // Decode first (latency), then prefill. Each phase synchronizes so that its
  // kernel time is measured on its own; overlapping the prefill's staging
  // with the decode kernel needs the second staging set (staging_buffers.h).
  for (auto [batch, staging] : {std::pair{&decode, &decode_staging_},
                                std::pair{&prefill, &prefill_staging_}}) {
    if (batch->entries.empty()) continue;
    const absl::Time start = absl::Now();
    // Diagnostic no-compute (server_config.h): no staging, no kernel; o stays
    // the zeros it was sized with at admission.
    if (!config_.diagnostic_no_compute) {
      batch->status = StagePhase(*batch, *staging);
      if (absl::Status sync = backend_->Synchronize(); batch->status.ok()) {
        batch->status = sync;
      }
    }
    const absl::Time end = absl::Now();
    if (!batch->status.ok()) {
      batch->status = absl::Status(
          batch->status.code() == absl::StatusCode::kInvalidArgument
              ? absl::StatusCode::kInternal
              : batch->status.code(),
          absl::StrCat(batch->phase, " kernel call failed: ",
                       batch->status.message()));
      for (const PhaseBatch::Entry& e : batch->entries) {
        if (e.call->failure.ok()) e.call->failure = batch->status;
      }
      continue;
    }
    if (!config_.diagnostic_no_compute) ScatterOutputs(*batch, *staging);
    for (const PhaseBatch::Entry& e : batch->entries) {
      if (!e.call->started) {
        e.call->started = true;
        if (metrics_ != nullptr) {
          metrics_->RecordQueueDelay(e.call->call->method,
                                     start - e.call->call->enqueued);
        }
      }
      e.call->done_tokens[e.seq] = e.offset + e.tokens;
    }
    if (metrics_ != nullptr) {
      metrics_->RecordBatch(batch->phase,
                            static_cast<int>(batch->entries.size()),
                            batch->tokens, end - start);
    }
  }

  for (auto it = running_.begin(); it != running_.end();) {
    auto next = std::next(it);
    RunningCall& running = **it;
    if (!running.failure.ok()) {
      FinishCall(it, running.failure);
    } else if (running.finished()) {
      FinishCall(it, absl::OkStatus());
    }
    it = next;
  }
  UpdateGauges();
}

absl::Status Engine::StagePhase(PhaseBatch& batch, StagingBuffers& staging) {
  using S = StagingBuffers;
  const LayerShape& shape = config_.options.shape;
  const size_t elem = DTypeSize(config_.options.input_dtype);
  const size_t hv = static_cast<size_t>(shape.num_v_heads);
  const size_t qk_row = static_cast<size_t>(shape.num_qk_heads) *
                        shape.head_dim_k * elem;  // bytes of one q / k row
  const size_t v_row = hv * shape.head_dim_v * elem;  // bytes of one v / o row
  const size_t gate_row = hv * sizeof(float);          // bytes of one g row
  const size_t real_n = batch.entries.size();
  const size_t real_t = static_cast<size_t>(batch.tokens);
  // Decode through a graphed runner runs as a bucket of sequences: the
  // padding sequences (one token each, no page: decode_runner.h) follow the
  // real ones, and their o rows are never copied back.
  const size_t n =
      batch.decode ? static_cast<size_t>(decode_runner_->PaddedSeqs(
                         static_cast<int32_t>(real_n)))
                   : real_n;
  const size_t pad = n - real_n;
  const size_t t = real_t + pad;

  for (auto [slot, bytes] :
       {std::pair{S::kQ, t * qk_row}, {S::kK, t * qk_row}, {S::kV, t * v_row},
        {S::kO, t * v_row}, {S::kG, t * gate_row}, {S::kBeta, t * gate_row},
        {S::kCuSeqlens, (n + 1) * sizeof(int32_t)},
        {S::kInitialPages, n * sizeof(int32_t)},
        {S::kFinalPages, n * sizeof(int32_t)}}) {
    if (absl::Status s = staging.Reserve(slot, bytes); !s.ok()) return s;
  }
  char* q = static_cast<char*>(staging.get(S::kQ).host);
  char* k = static_cast<char*>(staging.get(S::kK).host);
  char* v = static_cast<char*>(staging.get(S::kV).host);
  float* g = static_cast<float*>(staging.get(S::kG).host);
  float* beta = static_cast<float*>(staging.get(S::kBeta).host);
  int32_t* cu = static_cast<int32_t*>(staging.get(S::kCuSeqlens).host);
  int32_t* initial = static_cast<int32_t*>(staging.get(S::kInitialPages).host);
  int32_t* final_pages = static_cast<int32_t*>(staging.get(S::kFinalPages).host);

  cu[0] = 0;
  for (size_t i = 0; i < real_n; ++i) {
    const PhaseBatch::Entry& e = batch.entries[i];
    const ForwardCall& call = *e.call->call;
    const gdn::v1::ForwardRequest& r = *call.request;
    const size_t src = static_cast<size_t>(call.sequences[e.seq].row_offset) +
                       e.offset;           // first row in the request
    const size_t dst = cu[i];              // first row in the batch
    const size_t rows = e.tokens;
    std::memcpy(q + dst * qk_row, r.q().data().data() + src * qk_row, rows * qk_row);
    std::memcpy(k + dst * qk_row, r.k().data().data() + src * qk_row, rows * qk_row);
    std::memcpy(v + dst * v_row, r.v().data().data() + src * v_row, rows * v_row);
    if (config_.options.gating == GatingMode::kDirect) {
      std::memcpy(g + dst * hv, r.g().data().data() + src * gate_row,
                  rows * gate_row);
      std::memcpy(beta + dst * hv, r.beta().data().data() + src * gate_row,
                  rows * gate_row);
    } else {
      // Fused gating on the host, per request: A_log and dt_bias come with
      // each request, so folding them into g / beta here lets requests with
      // different parameters share one kernel call (run in direct mode)
      // instead of splitting batches by parameter set.
      for (size_t row = 0; row < rows; ++row) {
        for (size_t h = 0; h < hv; ++h) {
          const size_t in = (src + row) * hv + h;
          const size_t out = (dst + row) * hv + h;
          g[out] = FusedDecay(ReadFloat(r.a().data(), in), ReadFloat(r.a_log().data(), h),
                              ReadFloat(r.dt_bias().data(), h));
          beta[out] = FusedBeta(ReadFloat(r.b().data(), in));
        }
      }
    }
    cu[i + 1] = cu[i] + e.tokens;
    const WriteLease& lease = e.call->leases[e.seq];
    // Chunk 1 reads the stored state; later chunks continue from the page
    // the earlier chunks of this call wrote.
    initial[i] = e.offset == 0 ? lease.read_page : lease.write_page;
    final_pages[i] = lease.write_page;
  }
  if (pad > 0) {
    // Finite, harmless inputs for the padding tokens (rows real_t .. t - 1):
    // zeros, g = 0, beta = 0.
    std::memset(q + real_t * qk_row, 0, pad * qk_row);
    std::memset(k + real_t * qk_row, 0, pad * qk_row);
    std::memset(v + real_t * v_row, 0, pad * v_row);
    std::memset(g + real_t * hv, 0, pad * gate_row);
    std::memset(beta + real_t * hv, 0, pad * gate_row);
    AppendDecodePadding(static_cast<int32_t>(real_n), static_cast<int32_t>(n),
                        kDiscardPage, cu, initial, final_pages);
  }

  for (auto [slot, bytes] :
       {std::pair{S::kQ, t * qk_row}, {S::kK, t * qk_row}, {S::kV, t * v_row},
        {S::kG, t * gate_row}, {S::kBeta, t * gate_row},
        {S::kCuSeqlens, (n + 1) * sizeof(int32_t)},
        {S::kInitialPages, n * sizeof(int32_t)},
        {S::kFinalPages, n * sizeof(int32_t)}}) {
    if (absl::Status s = staging.Upload(slot, bytes); !s.ok()) return s;
  }

  GdnParams p;
  p.num_seqs = static_cast<int32_t>(n);
  p.total_tokens = static_cast<int32_t>(t);
  p.cu_seqlens = static_cast<const int32_t*>(staging.get(S::kCuSeqlens).device);
  p.cu_seqlens_host = cu;
  p.q = staging.get(S::kQ).device;
  p.k = staging.get(S::kK).device;
  p.v = staging.get(S::kV).device;
  p.o = staging.get(S::kO).device;
  p.g = static_cast<const float*>(staging.get(S::kG).device);
  p.beta = static_cast<const float*>(staging.get(S::kBeta).device);
  p.initial_pages =
      static_cast<const int32_t*>(staging.get(S::kInitialPages).device);
  p.final_pages = static_cast<const int32_t*>(staging.get(S::kFinalPages).device);
  p.pool = cache_->pool();
  absl::Status status = batch.decode ? decode_runner_->Run(p)
                                     : backend_->Prefill(kernel_options_, p);
  if (!status.ok()) return status;
  if (batch.decode && metrics_ != nullptr) {
    metrics_->RecordDecodeRunner(decode_runner_->stats(),
                                 static_cast<int64_t>(pad));
  }
  return staging.Download(S::kO, real_t * v_row);  // padding rows dropped
}

void Engine::ScatterOutputs(const PhaseBatch& batch,
                            const StagingBuffers& staging) {
  const LayerShape& shape = config_.options.shape;
  const size_t v_row = static_cast<size_t>(shape.num_v_heads) *
                       shape.head_dim_v *
                       DTypeSize(config_.options.input_dtype);
  const char* o = static_cast<const char*>(
      staging.get(StagingBuffers::kO).host);
  const int32_t* cu = static_cast<const int32_t*>(
      staging.get(StagingBuffers::kCuSeqlens).host);
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const PhaseBatch::Entry& e = batch.entries[i];
    const size_t dst =
        static_cast<size_t>(e.call->call->sequences[e.seq].row_offset) +
        e.offset;
    std::memcpy(e.call->result.o.data() + dst * v_row, o + cu[i] * v_row,
                static_cast<size_t>(e.tokens) * v_row);
  }
}

void Engine::FinishCall(std::list<std::unique_ptr<RunningCall>>::iterator it,
                        absl::Status status) {
  std::unique_ptr<RunningCall> running = std::move(*it);
  running_.erase(it);
  ForwardCall& call = *running->call;
  for (size_t i = 0; i < call.sequences.size(); ++i) {
    const ForwardSequence& seq = call.sequences[i];
    if (status.ok()) {
      const int64_t position = seq.position + seq.num_tokens;
      cache_->Commit(running->leases[i], position);
      running->result.positions.push_back(position);
    } else {
      cache_->Abort(running->leases[i]);
    }
    busy_keys_.erase(StateKey(seq.session, call.layer));
    auto busy = busy_sessions_.find(seq.session);
    if (busy != busy_sessions_.end() && --busy->second == 0) {
      busy_sessions_.erase(busy);
    }
  }
  // Filling and serializing the response and gRPC's write run on the
  // finisher thread, not here: the engine goes on with the next batch.
  absl::StatusOr<ForwardResult> result =
      status.ok() ? absl::StatusOr<ForwardResult>(std::move(running->result))
                  : absl::StatusOr<ForwardResult>(std::move(status));
  finisher_.Post([call = std::move(running->call), result = std::move(result)]() mutable {
    call->done(std::move(result));
  });
}

}  // namespace gdn
