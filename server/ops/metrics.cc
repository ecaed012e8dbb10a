#include "server/ops/metrics.h"

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"

namespace gdn {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

prometheus::Histogram::BucketBoundaries CountBuckets() {
  // 1, 2, 4, ... 65536 (sequences or tokens per kernel call).
  prometheus::Histogram::BucketBoundaries b;
  for (double x = 1; x <= 65536; x *= 2) b.push_back(x);
  return b;
}

void AddCounter(prometheus::Counter& c, uint64_t now, uint64_t before) {
  if (now > before) c.Increment(static_cast<double>(now - before));
}

}  // namespace

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double x = 25e-6; x < 12.0; x *= 1.25) b.push_back(x);
  return b;
}

ServerMetrics::ServerMetrics(absl::string_view version,
                             absl::string_view backend)
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(BuildCounter()
                    .Name("gdn_requests_total")
                    .Help("Finished RPCs by method and status code")
                    .Register(*registry_)),
      request_duration_(BuildHistogram()
                            .Name("gdn_request_duration_seconds")
                            .Help("RPC time from handler to finish")
                            .Register(*registry_)),
      queue_duration_(BuildHistogram()
                          .Name("gdn_queue_duration_seconds")
                          .Help("Forward time from submission to its first batch")
                          .Register(*registry_)),
      batch_size_(BuildHistogram()
                      .Name("gdn_batch_size")
                      .Help("Sequences per batch")
                      .Register(*registry_)),
      batch_tokens_(BuildHistogram()
                        .Name("gdn_batch_tokens")
                        .Help("Tokens per batch")
                        .Register(*registry_)),
      tokens_(BuildCounter()
                  .Name("gdn_tokens_total")
                  .Help("Tokens processed by phase")
                  .Register(*registry_)),
      kernel_duration_(BuildHistogram()
                           .Name("gdn_kernel_duration_seconds")
                           .Help("Batch time on its lane: launch (staging, gather, kernel, o "
                                 "download) to seen done")
                           .Register(*registry_)),
      batch_staging_(BuildHistogram()
                         .Name("gdn_batch_staging_seconds")
                         .Help("Host time of a batch's launch: metadata built, copies and "
                               "kernels enqueued")
                         .Register(*registry_)),
      batches_in_flight_(BuildGauge()
                             .Name("gdn_engine_batches_in_flight")
                             .Help("Batches on the engine's lanes by phase")
                             .Register(*registry_)),
      sessions_(BuildGauge()
                    .Name("gdn_sessions")
                    .Help("Open sessions")
                    .Register(*registry_)
                    .Add({})),
      cache_pages_(BuildGauge()
                       .Name("gdn_state_cache_pages")
                       .Help("State cache pages by tier and state")
                       .Register(*registry_)),
      cache_bytes_(BuildGauge()
                       .Name("gdn_state_cache_bytes")
                       .Help("State cache bytes by tier and state")
                       .Register(*registry_)),
      spills_(BuildCounter()
                  .Name("gdn_state_spills_total")
                  .Help("State pages moved device -> host")
                  .Register(*registry_)
                  .Add({})),
      restores_(BuildCounter()
                    .Name("gdn_state_restores_total")
                    .Help("State pages moved host -> device")
                    .Register(*registry_)
                    .Add({})),
      evictions_(BuildCounter()
                     .Name("gdn_state_evictions_total")
                     .Help("Sessions evicted to make room")
                     .Register(*registry_)
                     .Add({})),
      expired_(BuildCounter()
                   .Name("gdn_sessions_expired_total")
                   .Help("Sessions closed after the idle timeout")
                   .Register(*registry_)
                   .Add({})),
      cow_copies_(BuildCounter()
                      .Name("gdn_cow_copies_total")
                      .Help("Writes that left a shared (forked) page")
                      .Register(*registry_)
                      .Add({})),
      draft_tokens_(BuildCounter()
                        .Name("gdn_draft_tokens_total")
                        .Help("Speculative draft tokens stored (per session and layer)")
                        .Register(*registry_)
                        .Add({})),
      accepted_tokens_(BuildCounter()
                           .Name("gdn_draft_accepted_tokens_total")
                           .Help("Draft tokens accepted by the next position")
                           .Register(*registry_)
                           .Add({})),
      draft_pages_(BuildGauge()
                       .Name("gdn_draft_pages")
                       .Help("State pages held by uncommitted drafts")
                       .Register(*registry_)
                       .Add({})),
      kept_states_(BuildGauge()
                       .Name("gdn_kept_states")
                       .Help("Kept states for forks at earlier positions (one page each)")
                       .Register(*registry_)
                       .Add({})),
      kept_dropped_(BuildCounter()
                        .Name("gdn_kept_states_dropped_total")
                        .Help("Kept states dropped, least recently used first, to make room")
                        .Register(*registry_)
                        .Add({})),
      device_used_(BuildGauge()
                       .Name("gdn_device_memory_used_bytes")
                       .Help("Device memory in use")
                       .Register(*registry_)
                       .Add({})),
      device_total_(BuildGauge()
                        .Name("gdn_device_memory_total_bytes")
                        .Help("Device memory in all")
                        .Register(*registry_)
                        .Add({})),
      io_bytes_(BuildGauge()
                    .Name("gdn_io_buffer_bytes")
                    .Help("Host I/O memory of the engine: in use by calls in flight, allocated")
                    .Register(*registry_)),
      io_in_use_(io_bytes_.Add({{"state", "in_use"}})),
      io_allocated_(io_bytes_.Add({{"state", "allocated"}})),
      io_refusals_(BuildCounter()
                       .Name("gdn_io_buffer_refusals_total")
                       .Help("Forward calls refused because the I/O memory was full")
                       .Register(*registry_)
                       .Add({})),
      snapshots_written_(BuildCounter()
                             .Name("gdn_snapshot_sessions_written_total")
                             .Help("Sessions written to --snapshot_dir by a "
                                   "drain")
                             .Register(*registry_)
                             .Add({})),
      snapshot_write_failures_(
          BuildCounter()
              .Name("gdn_snapshot_write_failures_total")
              .Help("Sessions a drain could not write to --snapshot_dir")
              .Register(*registry_)
              .Add({})),
      snapshots_restored_(BuildCounter()
                              .Name("gdn_snapshot_sessions_restored_total")
                              .Help("Sessions restored from --snapshot_dir "
                                    "on first use")
                              .Register(*registry_)
                              .Add({})),
      snapshot_restore_failures_(
          BuildCounter()
              .Name("gdn_snapshot_restore_failures_total")
              .Help("Snapshot files claimed but not restored (rejected or "
                    "no room)")
              .Register(*registry_)
              .Add({})) {
  BuildGauge()
      .Name("gdn_build_info")
      .Help("Build version and backend (value 1)")
      .Register(*registry_)
      .Add({{"version", std::string(version)}, {"backend", std::string(backend)}})
      .Set(1);
  // The phase series exist from the start (a scrape shows them before any
  // traffic), and their handles are kept.
  const char* names[] = {"decode", "prefill"};
  for (int i = 0; i < 2; ++i) {
    const prometheus::Labels labels = {{"phase", names[i]}};
    phases_[i].size = &batch_size_.Add(labels, CountBuckets());
    phases_[i].tokens_histogram = &batch_tokens_.Add(labels, CountBuckets());
    phases_[i].tokens = &tokens_.Add(labels);
    phases_[i].duration = &kernel_duration_.Add(labels, LatencyBuckets());
    phases_[i].staging = &batch_staging_.Add(labels, LatencyBuckets());
    phases_[i].in_flight = &batches_in_flight_.Add(labels);
  }
}

void ServerMetrics::SetStateFormat(absl::string_view state_dtype, absl::string_view rounding,
                                   int64_t page_bytes) {
  BuildGauge()
      .Name("gdn_state_format_info")
      .Help("State page dtype and rounding of int8 / fp8 stores (value 1)")
      .Register(*registry_)
      .Add({{"state_dtype", std::string(state_dtype)}, {"rounding", std::string(rounding)}})
      .Set(1);
  BuildGauge()
      .Name("gdn_state_page_bytes")
      .Help("Bytes of one state page (one session and layer, scales included)")
      .Register(*registry_)
      .Add({})
      .Set(static_cast<double>(page_bytes));
}

ServerMetrics::MethodHandles& ServerMetrics::Method(absl::string_view method) {
  auto it = methods_.find(method);
  if (it != methods_.end()) return it->second;
  MethodHandles& h = methods_[std::string(method)];
  const prometheus::Labels labels = {{"method", std::string(method)}};
  h.duration = &request_duration_.Add(labels, LatencyBuckets());
  return h;
}

ServerMetrics::PhaseHandles& ServerMetrics::Phase(absl::string_view phase) {
  return phases_[phase == "decode" ? 0 : 1];
}

void ServerMetrics::RecordRequest(absl::string_view method, absl::StatusCode code,
                                  absl::Duration duration) {
  prometheus::Counter* counter;
  prometheus::Histogram* histogram;
  {
    std::lock_guard<std::mutex> lock(mu_);
    MethodHandles& h = Method(method);
    const size_t c = static_cast<size_t>(code) < h.by_code.size() ? static_cast<size_t>(code)
                                                                  : 2;  // kUnknown
    if (h.by_code[c] == nullptr) {
      h.by_code[c] = &requests_.Add({{"method", std::string(method)},
                                     {"code", absl::StatusCodeToString(code)}});
    }
    counter = h.by_code[c];
    histogram = h.duration;
  }
  counter->Increment();
  histogram->Observe(absl::ToDoubleSeconds(duration));
}

void ServerMetrics::RecordQueueDelay(absl::string_view method, absl::Duration delay) {
  prometheus::Histogram* histogram;
  {
    std::lock_guard<std::mutex> lock(mu_);
    MethodHandles& h = Method(method);
    if (h.queue == nullptr) {
      h.queue = &queue_duration_.Add({{"method", std::string(method)}}, LatencyBuckets());
    }
    histogram = h.queue;
  }
  histogram->Observe(absl::ToDoubleSeconds(delay));
}

void ServerMetrics::RecordBatchLaunched(absl::string_view phase) {
  Phase(phase).in_flight->Increment();
}

void ServerMetrics::RecordBatch(absl::string_view phase, int num_seqs, int64_t tokens,
                                absl::Duration duration) {
  PhaseHandles& h = Phase(phase);
  h.in_flight->Decrement();
  h.size->Observe(num_seqs);
  h.tokens_histogram->Observe(static_cast<double>(tokens));
  h.tokens->Increment(static_cast<double>(tokens));
  h.duration->Observe(absl::ToDoubleSeconds(duration));
}

void ServerMetrics::RecordBatchStaged(absl::string_view phase, absl::Duration staging) {
  Phase(phase).staging->Observe(absl::ToDoubleSeconds(staging));
}

void ServerMetrics::UpdateStateCache(const StateCacheStats& s) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.Set(static_cast<double>(s.sessions));
  const int64_t page = s.page_bytes;
  auto set_tier = [&](const char* tier, const TierStats& t, bool pinned) {
    const int64_t free_pages = t.pages_total - t.pages_used;
    cache_pages_.Add({{"tier", tier}, {"state", "used"}}).Set(t.pages_used);
    cache_pages_.Add({{"tier", tier}, {"state", "free"}}).Set(free_pages);
    cache_bytes_.Add({{"tier", tier}, {"state", "used"}}).Set(t.bytes_used);
    cache_bytes_.Add({{"tier", tier}, {"state", "free"}})
        .Set(static_cast<double>(t.bytes_total - t.bytes_used));
    if (pinned) {
      cache_pages_.Add({{"tier", tier}, {"state", "pinned"}}).Set(t.pages_pinned);
      cache_bytes_.Add({{"tier", tier}, {"state", "pinned"}})
          .Set(static_cast<double>(t.pages_pinned * page));
    }
  };
  set_tier("device", s.device, true);
  set_tier("host", s.host, false);
  AddCounter(spills_, s.spills, last_stats_.spills);
  AddCounter(restores_, s.restores, last_stats_.restores);
  AddCounter(evictions_, s.evictions, last_stats_.evictions);
  AddCounter(expired_, s.expired, last_stats_.expired);
  AddCounter(cow_copies_, s.cow_copies, last_stats_.cow_copies);
  AddCounter(draft_tokens_, s.draft_tokens, last_stats_.draft_tokens);
  AddCounter(accepted_tokens_, s.accepted_tokens, last_stats_.accepted_tokens);
  draft_pages_.Set(static_cast<double>(s.draft_pages));
  kept_states_.Set(static_cast<double>(s.kept_states));
  AddCounter(kept_dropped_, s.kept_dropped, last_stats_.kept_dropped);
  last_stats_ = s;
}

void ServerMetrics::UpdateDeviceMemory(const DeviceMemoryInfo& memory) {
  device_used_.Set(static_cast<double>(memory.used_bytes));
  device_total_.Set(static_cast<double>(memory.total_bytes));
}

void ServerMetrics::UpdateIoBuffers(int64_t bytes_in_use, int64_t bytes_allocated,
                                    uint64_t refusals) {
  io_in_use_.Set(static_cast<double>(bytes_in_use));
  io_allocated_.Set(static_cast<double>(bytes_allocated));
  std::lock_guard<std::mutex> lock(mu_);
  AddCounter(io_refusals_, refusals, last_io_refusals_);
  last_io_refusals_ = refusals;
}

void ServerMetrics::RecordSnapshotWritten(bool ok) {
  (ok ? snapshots_written_ : snapshot_write_failures_).Increment();
}

void ServerMetrics::RecordSnapshotRestored(bool ok) {
  (ok ? snapshots_restored_ : snapshot_restore_failures_).Increment();
}

}  // namespace gdn
