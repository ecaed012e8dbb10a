// Prometheus metrics of gdn-server: base units, `gdn_` prefix, no session ids
// in labels. prometheus-cpp metrics are thread-safe: the gRPC handlers record
// requests, the engine thread records batches and cache gauges.
//
//   gdn_requests_total{method,code}            counter
//   gdn_request_duration_seconds{method}       histogram, handler -> finish
//   gdn_queue_duration_seconds{method}         histogram, submit -> first kernel
//   gdn_batch_size{phase}, gdn_batch_tokens{phase}    histograms per kernel call
//   gdn_tokens_total{phase}                    counter
//   gdn_kernel_duration_seconds{phase}         histogram, launch -> synchronized
//   gdn_sessions                               gauge
//   gdn_state_cache_pages{tier,state}          gauge, state = used/free/pinned
//   gdn_state_cache_bytes{tier,state}          gauge
//   gdn_state_{spills,restores,evictions}_total, gdn_sessions_expired_total,
//   gdn_cow_copies_total                       counters (from the cache)
//   gdn_device_memory_{used,total}_bytes       gauges
//   gdn_decode_graph_captures_total            counter, decode CUDA graphs captured
//   gdn_decode_graph_replays_total             counter, decode batches run as a graph
//   gdn_decode_direct_runs_total               counter, decode batches run without
//   gdn_decode_padding_sequences_total         counter, sequences padded to a bucket
//   gdn_snapshot_sessions_written_total        counter, drain -> --snapshot_dir
//   gdn_snapshot_write_failures_total          counter, sessions not written
//   gdn_snapshot_sessions_restored_total       counter, restored on first use
//   gdn_snapshot_restore_failures_total        counter, snapshot files that
//                                              could not be restored
//   gdn_build_info{version,backend}            gauge = 1
#ifndef GDN_SERVER_OPS_METRICS_H_
#define GDN_SERVER_OPS_METRICS_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/backend.h"
#include "kernels/decode_runner.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "state_cache/state_cache.h"

namespace gdn {

class ServerMetrics {
 public:
  ServerMetrics(absl::string_view version, absl::string_view backend);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One finished RPC (any method), its status code and duration.
  void RecordRequest(absl::string_view method, absl::StatusCode code,
                     absl::Duration duration);
  // Time a Forward call waited from submission until its first kernel call.
  void RecordQueueDelay(absl::string_view method, absl::Duration delay);
  // One kernel call ("decode" or "prefill").
  void RecordBatch(absl::string_view phase, int num_seqs, int64_t tokens,
                   absl::Duration kernel_duration);
  // Gauges and cache counters from a stats snapshot (engine thread).
  void UpdateStateCache(const StateCacheStats& stats);
  void UpdateDeviceMemory(const DeviceMemoryInfo& memory);
  // After a decode call (engine thread): the runner's monotone counters and
  // the padding sequences of this call.
  void RecordDecodeRunner(const DecodeRunnerStats& stats, int64_t padding_seqs);
  // --snapshot_dir (server/sessions/session_snapshot_dir.h).
  void RecordSnapshotWritten(bool ok);
  void RecordSnapshotRestored(bool ok);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& queue_duration_;
  prometheus::Family<prometheus::Histogram>& batch_size_;
  prometheus::Family<prometheus::Histogram>& batch_tokens_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Family<prometheus::Histogram>& kernel_duration_;
  prometheus::Gauge& sessions_;
  prometheus::Family<prometheus::Gauge>& cache_pages_;
  prometheus::Family<prometheus::Gauge>& cache_bytes_;
  prometheus::Counter& spills_;
  prometheus::Counter& restores_;
  prometheus::Counter& evictions_;
  prometheus::Counter& expired_;
  prometheus::Counter& cow_copies_;
  prometheus::Gauge& device_used_;
  prometheus::Gauge& device_total_;
  prometheus::Counter& decode_graph_captures_;
  prometheus::Counter& decode_graph_replays_;
  prometheus::Counter& decode_direct_runs_;
  prometheus::Counter& decode_padding_seqs_;
  DecodeRunnerStats last_decode_stats_;  // engine thread only
  prometheus::Counter& snapshots_written_;
  prometheus::Counter& snapshot_write_failures_;
  prometheus::Counter& snapshots_restored_;
  prometheus::Counter& snapshot_restore_failures_;

  // Cache counters are monotone in the cache; the last snapshot seen turns
  // them into increments.
  std::mutex mu_;
  StateCacheStats last_stats_;
};

// Exponential latency buckets from 25 us to past 10 s (x1.25 each: a P99
// read off them is within 25%).
prometheus::Histogram::BucketBoundaries LatencyBuckets();

}  // namespace gdn

#endif  // GDN_SERVER_OPS_METRICS_H_
