// A workload trace: one session per record, replayed in open loop at its
// arrival times (scaled by --trace_speed). Two formats, chosen by the file's
// extension (.csv, anything else is JSONL):
//
//   JSONL: one object per line,
//     {"arrival_s": 0.125, "prefill_tokens": 512, "decode_steps": 64}
//   CSV: a header naming the three columns (any order), then one row each:
//     arrival_s,prefill_tokens,decode_steps
//     0.125,512,64
//
// arrival_s is seconds from the start of the replay; records may come in any
// order (they are sorted). Blank lines and lines starting with '#' are
// skipped.
#ifndef GDN_CLIENT_BENCH_TRACE_H_
#define GDN_CLIENT_BENCH_TRACE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gdn::client::bench {

struct TraceRecord {
  double arrival_s = 0;
  int prefill_tokens = 0;
  int decode_steps = 0;
};

// Sorted by arrival. InvalidArgument with the line number on a bad record.
absl::StatusOr<std::vector<TraceRecord>> ParseTrace(const std::string& text, bool csv);
absl::StatusOr<std::vector<TraceRecord>> LoadTrace(const std::string& path);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_TRACE_H_
