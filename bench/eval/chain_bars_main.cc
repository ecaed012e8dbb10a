// gdn-chain-bars: how near a backend comes to the bars of the quantized
// decode-chain tests (kernels/testing/quantized_chain.h) over many seeds, so
// that the bars are set from measured tails and two builds can be compared
// on the same inputs.
//
//   gdn-chain-bars [--backend=cpu|cuda] [--seeds=100] [--first_seed=1]
//                  [--cases=0,1,2,3,4]
//
// For each case of DecodeChainCases() (the device test's) and each int8 /
// fp8, rounding and gating, runs the chain with seeds first_seed ..
// first_seed + seeds - 1 and prints one line: how many runs broke a test bar
// (the chain's drift bars times kChainMargin, StepOBar, kStepFlipBar), and
// the largest ratio of each figure to its bar, then every failing seed.
// The tests draw a fresh seed per combination; GDN_TEST_SEED=<seed> replays one.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "kernels/backend.h"
#include "kernels/gdn_types.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "kernels/testing/quantized_chain.h"

ABSL_FLAG(std::string, backend, "cpu", "cpu or cuda");
ABSL_FLAG(int, seeds, 100, "seeds per combination (>= 1)");
ABSL_FLAG(uint64_t, first_seed, 1, "the first seed");
ABSL_FLAG(std::vector<std::string>, cases, std::vector<std::string>({"0", "1", "2", "3", "4"}),
          "indices into DecodeChainCases()");

namespace gdn::testing {
namespace {

struct Flags {
  std::string backend;
  int seeds = 0;
  uint64_t first_seed = 0;
  std::vector<int> cases;
};

bool ReadFlags(Flags* f) {
  f->backend = absl::GetFlag(FLAGS_backend);
  f->seeds = absl::GetFlag(FLAGS_seeds);
  f->first_seed = absl::GetFlag(FLAGS_first_seed);
  for (const std::string& c : absl::GetFlag(FLAGS_cases)) {
    int index = 0;
    if (!absl::SimpleAtoi(c, &index) || index < 0 ||
        index >= static_cast<int>(DecodeChainCases().size())) {
      return false;
    }
    f->cases.push_back(index);
  }
  return f->seeds >= 1 && (f->backend == "cpu" || f->backend == "cuda");
}

// The largest ratio of each figure to its test bar over the seeds.
struct Worst {
  double o = 0, state = 0, step_o = 0, flips = 0, mean_flips = 0;
  int failed = 0;
  std::vector<uint64_t> failing_seeds;
};

int Run(const Flags& flags) {
  BackendConfig config;
  config.kind = flags.backend == "cuda" ? BackendKind::kCuda : BackendKind::kCpu;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(config);
  if (!backend.ok()) {
    std::fprintf(stderr, "backend: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  const std::vector<ChainCase> cases = DecodeChainCases();
  std::printf("backend %s, seeds %llu..%llu; ratios to the tests' bars (> 1 fails)\n",
              flags.backend.c_str(), static_cast<unsigned long long>(flags.first_seed),
              static_cast<unsigned long long>(flags.first_seed + flags.seeds - 1));
  for (int index : flags.cases) {
    const ChainCase& c = cases[index];
    for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
      for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
        for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
          const GdnOptions options = ChainCaseOptions(c, st, r, gating);
          Worst w;
          for (int i = 0; i < flags.seeds; ++i) {
            const uint64_t seed = flags.first_seed + i;
            const oracle::Inputs in = MakeRandomInputs(
                options, std::vector<int>(c.batch, kDecodeChainTokens), seed, true);
            absl::StatusOr<ChainComparison> got =
                RunRoundTripChain(**backend, options, in, 1, EntryPoint::kDecode);
            if (!got.ok()) {
              std::fprintf(stderr, "chain: %s\n", std::string(got.status().message()).c_str());
              return 1;
            }
            const double o = got->o.rel_l2 / (kChainMargin * ChainOBar(options));
            const double state = got->final_state.rel_l2 / (kChainMargin * ChainStateBar(st));
            const double step_o = got->step_o.max_abs_rel / StepOBar(options.input_dtype);
            const double flips = got->step_flip_fraction / kStepFlipBar;
            const bool nonfinite = got->o.nonfinite + got->final_state.nonfinite +
                                       got->step_o.nonfinite > 0;
            // NaN ratios count as failures too.
            const bool failed = nonfinite || !(std::max({o, state, step_o, flips}) <= 1.0);
            w.o = std::max(w.o, o);
            w.state = std::max(w.state, state);
            w.step_o = std::max(w.step_o, step_o);
            w.flips = std::max(w.flips, flips);
            w.mean_flips += got->step_flip_fraction / flags.seeds;
            if (failed) {
              ++w.failed;
              w.failing_seeds.push_back(seed);
            }
          }
          std::printf(
              "case %d (%d/%d K %d V %d batch %d %s) %s %s %s: failed %d/%d; worst chain o %.2f "
              "state %.2f, step o %.2f flips %.3f; mean flip fraction %.2e\n",
              index, c.hqk, c.hv, c.k, c.v, c.batch, std::string(DTypeName(c.input)).c_str(),
              std::string(StateDTypeName(st)).c_str(), std::string(StateRoundingName(r)).c_str(),
              gating == GatingMode::kFused ? "fused" : "direct", w.failed, flags.seeds, w.o,
              w.state, w.step_o, w.flips, w.mean_flips);
          for (uint64_t seed : w.failing_seeds) {
            std::printf("  failing seed %llu\n", static_cast<unsigned long long>(seed));
          }
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace gdn::testing

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gdn-chain-bars [--backend=cpu|cuda] [--seeds=N] [--first_seed=S] [--cases=0,1,2,3,4]");
  absl::ParseCommandLine(argc, argv);
  gdn::testing::Flags flags;
  if (!gdn::testing::ReadFlags(&flags)) {
    std::fprintf(stderr, "bad flags: --backend cpu or cuda, --seeds >= 1, --cases 0..%zu\n",
                 gdn::testing::DecodeChainCases().size() - 1);
    return 2;
  }
  return gdn::testing::Run(flags);
}
