// A run's report: a text table for people, JSON for tools (the plot script,
// tests), CSV rows for spreadsheets. Field meanings are in README.md.
#ifndef GDN_CLIENT_BENCH_REPORT_H_
#define GDN_CLIENT_BENCH_REPORT_H_

#include <string>

#include "client/bench/json_writer.h"
#include "client/bench/workload.h"

namespace gdn::client::bench {

struct Throughput {
  double forward_calls_per_s = 0, tokens_per_s = 0, token_layers_per_s = 0;
  double prefill_tokens_per_s = 0, decode_tokens_per_s = 0, sessions_per_s = 0;
};
Throughput ThroughputOf(const BenchResult& r);

// The P99 in ms of `phase`: create, prefill, decode, fork, close, ttfo or
// decode_step. -1 for an unknown name.
double PhaseP99Ms(const BenchResult& r, const std::string& phase);
bool IsPhaseName(const std::string& phase);

// `ceiling`, when given, is the same traffic against a --diagnostic_no_compute
// server; the report then says how far this run is from it.
std::string FormatTextReport(const BenchResult& r, const BenchResult* ceiling = nullptr);
// One object; `extra` fields (e.g. "compare_echo") are appended at its end.
std::string FormatJsonReport(const BenchResult& r, const BenchResult* ceiling = nullptr,
                             const JsonFields& extra = {});
std::string CsvHeader();
std::string CsvRow(const BenchResult& r);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_REPORT_H_
