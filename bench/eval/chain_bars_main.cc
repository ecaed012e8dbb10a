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

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/backend.h"
#include "kernels/gdn_types.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "kernels/testing/quantized_chain.h"

namespace gdn::testing {
namespace {

struct Flags {
  std::string backend = "cpu";
  int seeds = 100;
  uint64_t first_seed = 1;
  std::vector<int> cases = {0, 1, 2, 3, 4};
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (name == "--backend") {
      f->backend = value;
    } else if (name == "--seeds") {
      if (!absl::SimpleAtoi(value, &f->seeds) || f->seeds < 1) return false;
    } else if (name == "--first_seed") {
      if (!absl::SimpleAtoi(value, &f->first_seed)) return false;
    } else if (name == "--cases") {
      f->cases.clear();
      for (absl::string_view c : absl::StrSplit(value, ',')) {
        int index = 0;
        if (!absl::SimpleAtoi(c, &index) || index < 0 ||
            index >= static_cast<int>(DecodeChainCases().size())) {
          return false;
        }
        f->cases.push_back(index);
      }
    } else {
      return false;
    }
  }
  return f->backend == "cpu" || f->backend == "cuda";
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
  gdn::testing::Flags flags;
  if (!gdn::testing::ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: gdn-chain-bars [--backend=cpu|cuda] [--seeds=N] [--first_seed=S] "
                 "[--cases=0,1,2,3,4]\n");
    return 2;
  }
  return gdn::testing::Run(flags);
}
