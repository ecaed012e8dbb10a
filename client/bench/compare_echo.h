// --compare_echo: the same workload against the server under test and an
// echo server of the same messages (bench/echo, gdn-echo), in one run, so
// the ratio server / echo says how far the server is from the transport's
// ceiling with both measured under the same conditions.
//
// The two arms take turns: K turns each, in ABBA order (server, echo, echo,
// server, ...) so a slow drift of the machine weighs on both alike. A turn is
// a full RunBench of 1/K of the run: --duration_s and --warmup_s divided by
// K, --rounds / --num_sessions divided by K rounded up. Sessions on the echo
// are created, used and closed like the server's (the echo accepts any).
// The layers are the server's (its first turn resolves --layers=0); the echo
// must report the server's shape (heads, head dims, activation dtype) and at
// least as many layers, else FailedPrecondition before anything runs.
// --metrics is scraped once before the first turn and once after the last
// (the server's arm only).
#ifndef GDN_CLIENT_BENCH_COMPARE_ECHO_H_
#define GDN_CLIENT_BENCH_COMPARE_ECHO_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/bench/workload.h"

namespace gdn::client::bench {

struct CompareEchoResult {
  std::string echo_address;
  int turns = 0;          // per arm
  BenchResult server;     // the server under test, its turns merged
  BenchResult echo;       // the echo, its turns merged
};

absl::StatusOr<CompareEchoResult> RunCompareEcho(const BenchConfig& config,
                                                 const std::string& echo_address, int turns);

// Per call type (prefill, decode, decode_step, create, close; those either
// arm recorded): count, P50 and P99 of each arm, and server / echo ratios.
std::string FormatCompareEchoText(const CompareEchoResult& r);
// The "compare_echo" object of the JSON report (with the echo's full report
// under "echo_report").
std::string CompareEchoJson(const CompareEchoResult& r);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_COMPARE_ECHO_H_
