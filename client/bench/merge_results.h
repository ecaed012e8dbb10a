// One BenchResult from several runs of the same workload against the same
// server (the turns of --compare_echo): counts, latencies, RPCs, retries and
// client CPU add up; times add up; the windows of every turn are checked for
// stability together. Server metrics are not merged (the caller scrapes once
// around all the turns).
#ifndef GDN_CLIENT_BENCH_MERGE_RESULTS_H_
#define GDN_CLIENT_BENCH_MERGE_RESULTS_H_

#include <vector>

#include "client/bench/workload.h"

namespace gdn::client::bench {

// `turns` must not be empty. The config, workers and server info are the
// first turn's; `stability_pct` is the tolerance of the combined check.
BenchResult MergeTurns(const std::vector<BenchResult>& turns, double stability_pct);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_MERGE_RESULTS_H_
