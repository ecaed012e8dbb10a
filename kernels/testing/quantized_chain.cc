#include "kernels/testing/quantized_chain.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/oracle/quantized_round_trip.h"
#include "kernels/state_page_codec.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn::testing {

double StepOBar(DType out) {
  switch (out) {
    case DType::kBF16: return 0x1p-8 + 1e-4;
    case DType::kF16: return 0x1p-11 + 1e-4;
    case DType::kF32: return 1e-4;
  }
  return 0;
}

double ChainOBar(const GdnOptions& options) {
  const double out = options.input_dtype == DType::kF32 ? 1e-4 : 1.6e-3;
  return out + (options.state_dtype == StateDType::kInt8 ? 1.5e-3 : 3.5e-3);
}

double ChainStateBar(StateDType state) { return state == StateDType::kInt8 ? 3e-3 : 1e-2; }

std::vector<ChainCase> DecodeChainCases() {
  return {{1, 2, 64, 64, 1, DType::kBF16},
          {2, 6, 128, 128, 3, DType::kF32},
          {1, 3, 128, 64, 7, DType::kBF16},
          {4, 4, 64, 128, 17, DType::kF32},
          {16, 32, 128, 128, 5, DType::kBF16}};
}

GdnOptions ChainCaseOptions(const ChainCase& c, StateDType state, StateRounding rounding,
                            GatingMode gating) {
  GdnOptions o;
  o.shape = {c.hqk, c.hv, c.k, c.v};
  o.input_dtype = c.input;
  o.state_dtype = state;
  o.state_rounding = rounding;
  o.gating = gating;
  return o;
}

absl::StatusOr<ChainComparison> RunRoundTripChain(Backend& backend, const GdnOptions& options,
                                                  const oracle::Inputs& in, int per_call,
                                                  EntryPoint entry) {
  const int batch = in.num_seqs();
  const int n = batch > 0 ? in.cu_seqlens[1] : 0;
  if (batch < 1 || n < 1 || per_call < 1 || n % per_call != 0) {
    return absl::InvalidArgumentError("RunRoundTripChain: B >= 1 sequences of n tokens, "
                                      "n a multiple of tokens_per_call");
  }
  for (int i = 0; i < batch; ++i) {
    if (in.cu_seqlens[i + 1] - in.cu_seqlens[i] != n) {
      return absl::InvalidArgumentError("RunRoundTripChain: sequences of equal length");
    }
  }
  const StatePageFormat format = StatePageFormat::For(options);
  StatePageFormat staged = format;
  staged.rounding = StateRounding::kNearest;
  const size_t row = size_t(options.shape.num_v_heads) * options.shape.head_dim_v;
  std::vector<std::vector<float>> got_states = in.initial_states, ref_states = in.initial_states;
  // o in the inputs' layout: sequence i's token t at row i * n + t.
  std::vector<float> got_o(size_t(batch) * n * row);
  std::vector<double> ref_o(got_o.size());
  std::vector<float> step_o_got;  // every call's o, in call order
  std::vector<double> step_o_ref;
  double step_o_max = 0;
  int64_t step_o_nonfinite = 0, step_flips = 0, step_elements = 0;
  for (int t0 = 0; t0 < n; t0 += per_call) {
    std::vector<oracle::Inputs> got_parts, ref_parts;
    for (int i = 0; i < batch; ++i) {
      // RunOnBackend stages a state with round to nearest (backend_runner.cc):
      // where a stochastic store left a group's largest code below the
      // maximum, the group gets a new scale there. The backend reads those
      // values, so both chains go on from theirs staged the same way.
      for (std::vector<float>* s : {&got_states[i], &ref_states[i]}) {
        if (!s->empty()) RoundTripState(staged, {}, s);
      }
      got_parts.push_back(SliceSequence(options, in, i, t0, t0 + per_call, got_states[i]));
      ref_parts.push_back(SliceSequence(options, in, i, t0, t0 + per_call, ref_states[i]));
    }
    const oracle::Inputs call = ConcatSequences(got_parts);
    absl::StatusOr<BackendOutputs> got = RunOnBackend(backend, options, call, entry);
    if (!got.ok()) return got.status();
    const oracle::Outputs ref = oracle::Run(options, ConcatSequences(ref_parts));
    const oracle::Outputs step = oracle::Run(options, call);
    step_o_got.insert(step_o_got.end(), got->o.begin(), got->o.end());
    step_o_ref.insert(step_o_ref.end(), step.o.begin(), step.o.end());
    const ErrorStats call_o = Compare(got->o.data(), step.o.data(), step.o.size());
    step_o_max = std::max(step_o_max, call_o.max_abs_rel);
    step_o_nonfinite += call_o.nonfinite;
    std::vector<std::vector<float>> stored(batch);
    double step_max = 0;
    for (int i = 0; i < batch; ++i) {
      stored[i] = oracle::QuantizedRoundTrip(
          format, step.final_states[i],
          oracle::StoreSalts(options, call, call.cu_seqlens[i + 1] - 1));
      for (float x : stored[i]) step_max = std::max(step_max, double(std::fabs(x)));
    }
    for (int i = 0; i < batch; ++i) {
      const std::vector<float>& g = got->final_states[i];
      for (size_t e = 0; e < g.size(); ++e) {
        step_flips += !(std::fabs(g[e] - stored[i][e]) <= 1e-5 * step_max);  // NaN too
      }
      step_elements += g.size();
    }
    for (int i = 0; i < batch; ++i) {
      got_states[i] = got->final_states[i];
      // The state after the call's last token of sequence i, salted by that
      // token's gates, as the backend stores it.
      const int64_t last = call.cu_seqlens[i + 1] - 1;
      ref_states[i] = oracle::QuantizedRoundTrip(format, ref.final_states[i],
                                                 oracle::StoreSalts(options, call, last));
      const size_t from = size_t(call.cu_seqlens[i]) * row, to = size_t(last + 1) * row;
      const size_t dst = (size_t(i) * n + t0) * row;
      std::copy(got->o.begin() + from, got->o.begin() + to, got_o.begin() + dst);
      std::copy(ref.o.begin() + from, ref.o.begin() + to, ref_o.begin() + dst);
    }
  }
  const oracle::Outputs exact = oracle::Run(options, in);
  ChainComparison out;
  out.o = Compare(got_o.data(), ref_o.data(), ref_o.size());
  out.o_vs_exact = Compare(got_o.data(), exact.o.data(), exact.o.size());
  std::vector<float> gs;
  std::vector<double> rs;
  for (int i = 0; i < batch; ++i) {
    gs.insert(gs.end(), got_states[i].begin(), got_states[i].end());
    rs.insert(rs.end(), ref_states[i].begin(), ref_states[i].end());
  }
  out.final_state = Compare(gs.data(), rs.data(), rs.size());
  out.step_o = Compare(step_o_got.data(), step_o_ref.data(), step_o_ref.size());
  out.step_o.max_abs_rel = std::max(out.step_o.max_abs_rel, step_o_max);
  out.step_o.nonfinite = step_o_nonfinite;
  out.step_flip_fraction = step_elements == 0 ? 0.0 : double(step_flips) / step_elements;
  return out;
}

}  // namespace gdn::testing
