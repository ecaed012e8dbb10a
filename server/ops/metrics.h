// Prometheus metrics of gdn-server: base units, `gdn_` prefix, no session ids
// in labels. prometheus-cpp metrics are thread-safe: the request threads
// record requests, the engine thread records batches and gauges.
//
//   gdn_requests_total{method,code}            counter
//   gdn_request_duration_seconds{method}       histogram, handler -> finish
//   gdn_queue_duration_seconds{method}         histogram, submit -> first batch launched
//   gdn_batch_size{phase}, gdn_batch_tokens{phase}    histograms per batch
//   gdn_tokens_total{phase}                    counter
//   gdn_kernel_duration_seconds{phase}         histogram, batch launch -> seen done
//                                              (staging, gather, kernel, o download)
//   gdn_batch_staging_seconds{phase}           histogram, batch launch -> all of it
//                                              enqueued (host: metadata, copies, kernel)
//   gdn_engine_batches_in_flight{phase}        gauge, batches on the engine's lanes
//   gdn_sessions                               gauge
//   gdn_state_cache_pages{tier,state}          gauge, state = used/free/pinned
//   gdn_state_cache_bytes{tier,state}          gauge
//   gdn_state_{spills,restores,evictions}_total, gdn_sessions_expired_total,
//   gdn_cow_copies_total                       counters (from the cache)
//   gdn_draft_tokens_total, gdn_draft_accepted_tokens_total  counters (from the
//                                              cache): speculative draft tokens
//                                              stored, and of those accepted
//   gdn_draft_pages                            gauge, pages of open drafts
//   gdn_kept_states                            gauge, kept states (prefix reuse)
//   gdn_kept_states_dropped_total              counter, dropped to make room
//   gdn_device_memory_{used,total}_bytes       gauges
//   gdn_io_buffer_bytes{state}                 gauge, state = in_use/allocated:
//                                              host I/O memory of calls in flight
//   gdn_io_buffer_refusals_total               counter, calls refused for lack of it
//   gdn_snapshot_sessions_written_total        counter, drain -> --snapshot_dir
//   gdn_snapshot_write_failures_total          counter, sessions not written
//   gdn_snapshot_sessions_restored_total       counter, restored on first use
//   gdn_snapshot_restore_failures_total        counter, snapshot files that
//                                              could not be restored
//   gdn_build_info{version,backend}            gauge = 1
//   gdn_state_format_info{state_dtype,rounding} gauge = 1 (SetStateFormat)
//   gdn_state_page_bytes                       gauge, bytes of one state page
//
// Handles are looked up once: phases at construction, methods on their first
// use (then a small map under a mutex), so recording costs no label building.
// Gauges from the cache, the device and the I/O arena are refreshed by the
// engine on a timer, not per batch.
#ifndef GDN_SERVER_OPS_METRICS_H_
#define GDN_SERVER_OPS_METRICS_H_

#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/backend.h"
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
  void RecordRequest(absl::string_view method, absl::StatusCode code, absl::Duration duration);
  // Time a Forward call waited from submission until its first batch.
  void RecordQueueDelay(absl::string_view method, absl::Duration delay);
  // A batch ("decode" or "prefill") went onto a lane / came back done.
  void RecordBatchLaunched(absl::string_view phase);
  void RecordBatch(absl::string_view phase, int num_seqs, int64_t tokens,
                   absl::Duration duration);
  // The host part of a batch's launch: its metadata built, its copies and
  // kernels enqueued (the rest of the batch's duration is the device's).
  void RecordBatchStaged(absl::string_view phase, absl::Duration staging);
  // Gauges and cache counters from a stats snapshot (engine thread).
  void UpdateStateCache(const StateCacheStats& stats);
  void UpdateDeviceMemory(const DeviceMemoryInfo& memory);
  // The engine's I/O arena (server/engine/io_arena.h); refusals is monotone.
  void UpdateIoBuffers(int64_t bytes_in_use, int64_t bytes_allocated, uint64_t refusals);
  // The state page format, once at start-up: dtype ("fp32", "bf16", "int8",
  // "fp8"), rounding of int8 / fp8 stores ("-" for the others) and page size.
  void SetStateFormat(absl::string_view state_dtype, absl::string_view rounding,
                      int64_t page_bytes);
  // --snapshot_dir (server/sessions/session_snapshot_dir.h).
  void RecordSnapshotWritten(bool ok);
  void RecordSnapshotRestored(bool ok);

 private:
  struct MethodHandles {
    prometheus::Histogram* duration = nullptr;
    prometheus::Histogram* queue = nullptr;
    std::array<prometheus::Counter*, 17> by_code{};  // absl::StatusCode 0..16
  };
  struct PhaseHandles {
    prometheus::Histogram* size = nullptr;
    prometheus::Histogram* tokens_histogram = nullptr;
    prometheus::Counter* tokens = nullptr;
    prometheus::Histogram* duration = nullptr;
    prometheus::Histogram* staging = nullptr;
    prometheus::Gauge* in_flight = nullptr;
  };
  MethodHandles& Method(absl::string_view method);  // under mu_
  PhaseHandles& Phase(absl::string_view phase);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& queue_duration_;
  prometheus::Family<prometheus::Histogram>& batch_size_;
  prometheus::Family<prometheus::Histogram>& batch_tokens_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Family<prometheus::Histogram>& kernel_duration_;
  prometheus::Family<prometheus::Histogram>& batch_staging_;
  prometheus::Family<prometheus::Gauge>& batches_in_flight_;
  prometheus::Gauge& sessions_;
  prometheus::Family<prometheus::Gauge>& cache_pages_;
  prometheus::Family<prometheus::Gauge>& cache_bytes_;
  prometheus::Counter& spills_;
  prometheus::Counter& restores_;
  prometheus::Counter& evictions_;
  prometheus::Counter& expired_;
  prometheus::Counter& cow_copies_;
  prometheus::Counter& draft_tokens_;
  prometheus::Counter& accepted_tokens_;
  prometheus::Gauge& draft_pages_;
  prometheus::Gauge& kept_states_;
  prometheus::Counter& kept_dropped_;
  prometheus::Gauge& device_used_;
  prometheus::Gauge& device_total_;
  prometheus::Family<prometheus::Gauge>& io_bytes_;
  prometheus::Gauge& io_in_use_;
  prometheus::Gauge& io_allocated_;
  prometheus::Counter& io_refusals_;
  prometheus::Counter& snapshots_written_;
  prometheus::Counter& snapshot_write_failures_;
  prometheus::Counter& snapshots_restored_;
  prometheus::Counter& snapshot_restore_failures_;
  std::array<PhaseHandles, 2> phases_;  // decode, prefill

  std::mutex mu_;
  absl::flat_hash_map<std::string, MethodHandles> methods_;
  // Cache and arena counters are monotone at their source; the last snapshot
  // seen turns them into increments.
  StateCacheStats last_stats_;
  uint64_t last_io_refusals_ = 0;
};

// Exponential latency buckets from 25 us to past 10 s (x1.25 each: a P99
// read off them is within 25%).
prometheus::Histogram::BucketBoundaries LatencyBuckets();

}  // namespace gdn

#endif  // GDN_SERVER_OPS_METRICS_H_
