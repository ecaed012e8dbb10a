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
                          .Help("Forward time from submission to first kernel")
                          .Register(*registry_)),
      batch_size_(BuildHistogram()
                      .Name("gdn_batch_size")
                      .Help("Sequences per kernel call")
                      .Register(*registry_)),
      batch_tokens_(BuildHistogram()
                        .Name("gdn_batch_tokens")
                        .Help("Tokens per kernel call")
                        .Register(*registry_)),
      tokens_(BuildCounter()
                  .Name("gdn_tokens_total")
                  .Help("Tokens processed by phase")
                  .Register(*registry_)),
      kernel_duration_(BuildHistogram()
                           .Name("gdn_kernel_duration_seconds")
                           .Help("Kernel call time, staging to synchronized")
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
      decode_graph_captures_(BuildCounter()
                                 .Name("gdn_decode_graph_captures_total")
                                 .Help("Decode CUDA graphs captured (one per "
                                       "batch-size bucket)")
                                 .Register(*registry_)
                                 .Add({})),
      decode_graph_replays_(BuildCounter()
                                .Name("gdn_decode_graph_replays_total")
                                .Help("Decode batches run as a CUDA graph launch")
                                .Register(*registry_)
                                .Add({})),
      decode_direct_runs_(BuildCounter()
                              .Name("gdn_decode_direct_runs_total")
                              .Help("Decode batches run without a graph")
                              .Register(*registry_)
                              .Add({})),
      decode_padding_seqs_(BuildCounter()
                               .Name("gdn_decode_padding_sequences_total")
                               .Help("Padding sequences added to fill a "
                                     "decode graph's bucket")
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
  // Pre-create the phase series so a scrape shows them before any traffic.
  for (const char* phase : {"decode", "prefill"}) {
    tokens_.Add({{"phase", phase}});
  }
}

void ServerMetrics::RecordRequest(absl::string_view method,
                                  absl::StatusCode code,
                                  absl::Duration duration) {
  requests_
      .Add({{"method", std::string(method)},
            {"code", absl::StatusCodeToString(code)}})
      .Increment();
  request_duration_.Add({{"method", std::string(method)}}, LatencyBuckets())
      .Observe(absl::ToDoubleSeconds(duration));
}

void ServerMetrics::RecordQueueDelay(absl::string_view method,
                                     absl::Duration delay) {
  queue_duration_.Add({{"method", std::string(method)}}, LatencyBuckets())
      .Observe(absl::ToDoubleSeconds(delay));
}

void ServerMetrics::RecordBatch(absl::string_view phase, int num_seqs,
                                int64_t tokens,
                                absl::Duration kernel_duration) {
  const prometheus::Labels labels = {{"phase", std::string(phase)}};
  batch_size_.Add(labels, CountBuckets()).Observe(num_seqs);
  batch_tokens_.Add(labels, CountBuckets()).Observe(static_cast<double>(tokens));
  tokens_.Add(labels).Increment(static_cast<double>(tokens));
  kernel_duration_.Add(labels, LatencyBuckets())
      .Observe(absl::ToDoubleSeconds(kernel_duration));
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
  last_stats_ = s;
}

void ServerMetrics::UpdateDeviceMemory(const DeviceMemoryInfo& memory) {
  device_used_.Set(static_cast<double>(memory.used_bytes));
  device_total_.Set(static_cast<double>(memory.total_bytes));
}

void ServerMetrics::RecordDecodeRunner(const DecodeRunnerStats& stats,
                                       int64_t padding_seqs) {
  AddCounter(decode_graph_captures_, stats.graph_captures,
             last_decode_stats_.graph_captures);
  AddCounter(decode_graph_replays_, stats.graph_replays,
             last_decode_stats_.graph_replays);
  AddCounter(decode_direct_runs_, stats.direct_runs,
             last_decode_stats_.direct_runs);
  last_decode_stats_ = stats;
  if (padding_seqs > 0) {
    decode_padding_seqs_.Increment(static_cast<double>(padding_seqs));
  }
}

void ServerMetrics::RecordSnapshotWritten(bool ok) {
  (ok ? snapshots_written_ : snapshot_write_failures_).Increment();
}

void ServerMetrics::RecordSnapshotRestored(bool ok) {
  (ok ? snapshots_restored_ : snapshot_restore_failures_).Increment();
}

}  // namespace gdn
