#include "kernels/testing/quantized_chain.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/oracle/quantized_round_trip.h"
#include "kernels/state_page_codec.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn::testing {

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
  const size_t row = size_t(options.shape.num_v_heads) * options.shape.head_dim_v;
  std::vector<std::vector<float>> got_states = in.initial_states, ref_states = in.initial_states;
  // o in the inputs' layout: sequence i's token t at row i * n + t.
  std::vector<float> got_o(size_t(batch) * n * row);
  std::vector<double> ref_o(got_o.size());
  for (int t0 = 0; t0 < n; t0 += per_call) {
    std::vector<oracle::Inputs> got_parts, ref_parts;
    for (int i = 0; i < batch; ++i) {
      got_parts.push_back(SliceSequence(options, in, i, t0, t0 + per_call, got_states[i]));
      ref_parts.push_back(SliceSequence(options, in, i, t0, t0 + per_call, ref_states[i]));
    }
    const oracle::Inputs call = ConcatSequences(got_parts);
    absl::StatusOr<BackendOutputs> got = RunOnBackend(backend, options, call, entry);
    if (!got.ok()) return got.status();
    const oracle::Outputs ref = oracle::Run(options, ConcatSequences(ref_parts));
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
  double max_ref = 0;
  for (double r : rs) max_ref = std::max(max_ref, std::fabs(r));
  int64_t differ = 0;
  for (size_t e = 0; e < gs.size(); ++e) differ += std::fabs(gs[e] - rs[e]) > 1e-5 * max_ref;
  out.differing_fraction = gs.empty() ? 0.0 : double(differ) / gs.size();
  return out;
}

}  // namespace gdn::testing
