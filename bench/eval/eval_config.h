// What gdn-eval runs: the command line and the configuration grid.
//
//   --grid=ci    reduced grid for the cpu backend in CI (< 60 s on 2 cores)
//   --grid=full  seed 000's grid: lengths 512 .. 131072, batch 1 .. 32,
//                head dim 64 / 128, fp32 / bf16 (for the GPU)
#ifndef GDN_BENCH_EVAL_EVAL_CONFIG_H_
#define GDN_BENCH_EVAL_EVAL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/gdn_types.h"

namespace gdn::eval {

struct Grid {
  std::string name;  // "ci" or "full"
  int num_heads = 4;  // Hqk = Hv (seed 000's small models: no grouping)

  // Correctness against the float64 oracle.
  std::vector<int> check_lengths;
  std::vector<int> check_batches;
  std::vector<int> head_dims;
  std::vector<DType> input_dtypes;
  std::vector<StateDType> state_dtypes;
  // A config with more token-heads (B * L * H) than this is checked on a
  // prefix of at most 2 sequences (the outputs of a prefix depend only on the
  // prefix, so this is exact for those tokens), and the report says so.
  int64_t oracle_token_heads = 0;
  // Lengths checked in full on one head (Hqk = Hv = 1, B = 1): the long-length
  // numerics the prefix rule above leaves out.
  std::vector<int> single_head_lengths;
  int extreme_length = 0;     // tokens per sequence of the extreme inputs
  int no_decay_steps = 0;     // tokens of the "no decay for N steps" case

  // Performance (prefill over lengths x batches, decode over batches).
  std::vector<int> perf_lengths;  // ascending
  std::vector<int> perf_batches;
  std::vector<int> decode_batches;
  int64_t same_total_tokens = 0;       // few long vs many short
  std::vector<int> same_total_batches;  // sequences splitting that total
  int warmup_runs = 0;
  int min_runs = 0, max_runs = 0;
  double seconds_per_config = 0;  // timed-run budget per config
  int64_t copy_bytes = 0;         // size of the copy-bandwidth probe

  // Baseline "chunked vs recurrent": one Prefill call vs L Decode calls.
  std::vector<int> recurrent_lengths;
  int recurrent_batch = 1;

  // Stability.
  int stability_repeats = 0;
  std::vector<int> chain_checkpoints;  // decode steps at which error is read
  int chain_batch = 1;
  int chain_heads = 2;
};

Grid MakeGrid(const std::string& name);  // "ci" or "full"; else empty name

// The grid with only `lengths` (when not empty) kept in check_lengths,
// single_head_lengths and perf_lengths, order unchanged; InvalidArgument if a
// length is in none of them (a typo must not silently run nothing). The
// extreme inputs, decode, baselines and stability are not length-indexed and
// stay as they are.
absl::StatusOr<Grid> RestrictLengths(Grid grid, const std::vector<int>& lengths);

struct EvalFlags {
  std::string grid = "ci";
  std::string backend = "cpu";  // cpu | cuda | auto
  std::string out_dir = "eval-out";
  std::string sections = "all";  // comma list: correctness,performance,baselines,stability
  int cpu_threads = 0;
  uint64_t seed = 1;
  double time_budget_s = 0;  // 0: the grid's default; whole run
  std::string commit;        // recorded in the report
  std::string command;       // the command line, recorded
  // --lengths=L1,L2,...: run only these of the grid's sequence lengths
  // (correctness grid, single-head lengths, prefill performance), e.g. to
  // finish a grid that one device call could not; empty: all of them.
  std::vector<int> lengths;
};

// --key=value flags; unknown flags are an error (a typo must not silently run
// the default).
absl::StatusOr<EvalFlags> ParseFlags(int argc, char** argv);
bool SectionEnabled(const EvalFlags& flags, const std::string& section);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_EVAL_CONFIG_H_
