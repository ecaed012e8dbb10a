// The float64 model of a stored state (kernels/oracle/quantized_round_trip.h)
// against the fp32 page codec the backends use: the same values except
// where fp32 and float64 fall on different sides of a rounding boundary.
#include "kernels/oracle/quantized_round_trip.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/state_page_codec.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn::oracle {
namespace {

TEST(QuantizedRoundTripTest, AgreesWithThePageCodec) {
  for (StateDType d : {StateDType::kBF16, StateDType::kInt8, StateDType::kFP8}) {
    for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
      StatePageFormat f;
      f.dtype = d;
      f.rounding = r;
      f.num_v_heads = 3;
      f.head_dim_k = 64;
      f.head_dim_v = 128;
      std::mt19937_64 rng(17);
      std::normal_distribution<double> normal(0.0, 0.5);
      std::vector<double> state(f.elements());
      for (double& x : state) x = normal(rng) * (rng() % 7 == 0 ? 1e-3 : 1.0);
      const std::vector<uint32_t> salts = {5, 6, 7};
      const std::vector<float> model = QuantizedRoundTrip(f, state, salts);
      std::vector<float> codec(state.begin(), state.end());
      RoundTripState(f, salts, &codec);
      size_t differ = 0;
      for (size_t i = 0; i < state.size(); ++i) {
        // The scales may differ in their last bit (fp32 amax / qmax against
        // float64 rounded once): values then differ by ~1e-7 of themselves.
        if (std::fabs(model[i] - codec[i]) <= 1e-6 * std::fabs(codec[i])) continue;
        ++differ;
        // One step apart at most (the scales agree to fp32 rounding).
        EXPECT_NEAR(model[i], codec[i], std::fabs(codec[i]) * 0.14 + 0.02) << i;
      }
      EXPECT_LE(differ, state.size() / 1000)
          << StateDTypeName(d) << "/" << StateRoundingName(r);
    }
  }
}

TEST(QuantizedRoundTripTest, StoreSaltsFollowTheGates) {
  GdnOptions options;
  options.shape = {1, 2, 64, 64};
  const Inputs in = testing::MakeRandomInputs(options, {3}, 1, false);
  const std::vector<uint32_t> a = StoreSalts(options, in, 1), b = StoreSalts(options, in, 2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NE(a[0], a[1]);
  EXPECT_NE(a[0], b[0]);
  options.gating = GatingMode::kFused;
  const Inputs fused = testing::MakeRandomInputs(options, {3}, 1, false);
  EXPECT_EQ(StoreSalts(options, fused, 1).size(), 2u);
}

}  // namespace
}  // namespace gdn::oracle
