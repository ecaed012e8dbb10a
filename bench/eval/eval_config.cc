#include "bench/eval/eval_config.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gdn::eval {

Grid MakeGrid(const std::string& name) {
  Grid g;
  if (name == "ci") {
    g.name = "ci";
    g.num_heads = 2;
    g.check_lengths = {64, 300};
    g.check_batches = {1, 3};
    g.head_dims = {64, 128};
    g.input_dtypes = {DType::kF32, DType::kBF16};
    g.state_dtypes = {StateDType::kF32, StateDType::kBF16};
    g.oracle_token_heads = 1 << 20;  // everything in full
    g.single_head_lengths = {2048};
    g.extreme_length = 128;
    g.no_decay_steps = 2048;
    g.perf_lengths = {256, 512, 1024, 2048};
    g.perf_batches = {1, 4};
    g.decode_batches = {1, 4, 16};
    g.same_total_tokens = 2048;
    g.same_total_batches = {1, 4, 16};
    g.warmup_runs = 2;
    g.min_runs = 5;
    g.max_runs = 40;
    g.seconds_per_config = 0.15;
    g.copy_bytes = 64ll << 20;
    g.recurrent_lengths = {256, 1024};
    g.recurrent_batch = 1;
    g.stability_repeats = 5;
    g.chain_checkpoints = {1, 64, 1024, 2048};
    g.chain_batch = 1;
    g.chain_heads = 2;
  } else if (name == "full") {
    g.name = "full";
    g.num_heads = 16;
    g.check_lengths = {512, 4096, 16384, 65536, 131072};
    g.check_batches = {1, 4, 16, 32};
    g.head_dims = {64, 128};
    g.input_dtypes = {DType::kF32, DType::kBF16};
    g.state_dtypes = {StateDType::kF32, StateDType::kBF16};
    g.oracle_token_heads = 1 << 19;  // 16 heads: 1 x 32768 in full, else 2 x 16384 tokens (oracle on all cores)
    g.single_head_lengths = {16384, 65536, 131072};
    g.extreme_length = 1024;
    g.no_decay_steps = 100000;
    g.perf_lengths = {512, 4096, 16384, 65536, 131072};
    g.perf_batches = {1, 4, 16, 32};
    g.decode_batches = {1, 4, 16, 32, 64, 256};
    g.same_total_tokens = 131072;
    g.same_total_batches = {1, 4, 32, 256};
    g.warmup_runs = 3;
    g.min_runs = 10;
    g.max_runs = 200;
    g.seconds_per_config = 0.5;
    g.copy_bytes = 2ll << 30;
    g.recurrent_lengths = {512, 4096};
    g.recurrent_batch = 1;
    g.stability_repeats = 10;
    g.chain_checkpoints = {1, 64, 1024, 8192, 65536};
    g.chain_batch = 1;
    g.chain_heads = 4;
  }
  return g;
}

absl::StatusOr<EvalFlags> ParseFlags(int argc, char** argv) {
  EvalFlags f;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) f.command += ' ';
    f.command += argv[i];
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (!absl::StartsWith(arg, "--") || eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("expected --key=value, got ", arg));
    }
    const std::string key = arg.substr(2, eq - 2);
    const std::string value = arg.substr(eq + 1);
    bool ok = true;
    if (key == "grid") f.grid = value;
    else if (key == "backend") f.backend = value;
    else if (key == "out_dir") f.out_dir = value;
    else if (key == "sections") f.sections = value;
    else if (key == "commit") f.commit = value;
    else if (key == "cpu_threads") ok = absl::SimpleAtoi(value, &f.cpu_threads);
    else if (key == "seed") ok = absl::SimpleAtoi(value, &f.seed);
    else if (key == "time_budget_s") ok = absl::SimpleAtod(value, &f.time_budget_s);
    else if (key == "lengths") {
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        int length = 0;
        ok = ok && absl::SimpleAtoi(part, &length) && length > 0;
        f.lengths.push_back(length);
      }
    }
    else return absl::InvalidArgumentError(absl::StrCat("unknown flag --", key));
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value for --", key, ": ", value));
  }
  if (f.grid != "ci" && f.grid != "full") {
    return absl::InvalidArgumentError("--grid must be ci or full");
  }
  return f;
}

absl::StatusOr<Grid> RestrictLengths(Grid grid, const std::vector<int>& lengths) {
  if (lengths.empty()) return grid;
  auto keep = [&](std::vector<int>* list) {
    std::vector<int> kept;
    for (int l : *list) {
      if (std::find(lengths.begin(), lengths.end(), l) != lengths.end()) kept.push_back(l);
    }
    *list = std::move(kept);
  };
  for (int l : lengths) {
    bool known = false;
    for (const std::vector<int>* list :
         {&grid.check_lengths, &grid.single_head_lengths, &grid.perf_lengths}) {
      known |= std::find(list->begin(), list->end(), l) != list->end();
    }
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("--lengths: ", l, " is not a length of the ", grid.name, " grid"));
    }
  }
  keep(&grid.check_lengths);
  keep(&grid.single_head_lengths);
  keep(&grid.perf_lengths);
  return grid;
}

bool SectionEnabled(const EvalFlags& flags, const std::string& section) {
  if (flags.sections == "all") return true;
  for (absl::string_view s : absl::StrSplit(flags.sections, ',')) {
    if (s == section) return true;
  }
  return false;
}

}  // namespace gdn::eval
