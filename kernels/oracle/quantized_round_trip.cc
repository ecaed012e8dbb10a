#include "kernels/oracle/quantized_round_trip.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/dtype_convert.h"
#include "kernels/state_quant.h"

namespace gdn::oracle {
namespace {

// The 127 non-negative finite e4m3 values, by code (0 .. 0x7e), exact.
const std::array<double, 127>& Fp8Values() {
  static const std::array<double, 127> values = [] {
    std::array<double, 127> v{};
    for (int c = 0; c < 127; ++c) {
      const int e = c >> 3, f = c & 7;
      v[c] = e == 0 ? f * std::ldexp(1.0, -9) : (1.0 + f / 8.0) * std::ldexp(1.0, e - 7);
    }
    return v;
  }();
  return values;
}

// Chooses between neighbours lo and lo + 1 (in code steps) for a fraction
// frac of the step: nearest with ties to the even code, or stochastic.
int RoundStep(int lo, double frac, bool stochastic, double u) {
  if (stochastic) return frac >= 1.0 - u ? lo + 1 : lo;
  if (frac > 0.5) return lo + 1;
  if (frac < 0.5) return lo;
  return (lo & 1) == 0 ? lo : lo + 1;
}

// One element's stored value (before the scale), for |y| <= qmax.
double EncodeDecode(StateDType dtype, double y, bool stochastic, uint32_t bits) {
  const double sign = y < 0 ? -1.0 : 1.0;
  const double m = std::fabs(y);
  const double u24 = (bits >> 8) * std::ldexp(1.0, -24);
  if (dtype == StateDType::kInt8) {
    const double f = std::floor(y);
    const int lo = static_cast<int>(f);
    return RoundStep(lo, y - f, stochastic, u24);
  }
  if (m < std::ldexp(1.0, -6)) {  // subnormal steps of 2^-9 (code 8: 2^-6)
    const double t = m * 512.0;
    const int lo = static_cast<int>(std::floor(t));
    return sign * RoundStep(lo, t - lo, stochastic, u24) * std::ldexp(1.0, -9);
  }
  const std::array<double, 127>& values = Fp8Values();
  const int lo = static_cast<int>(std::upper_bound(values.begin(), values.end(), m) -
                                  values.begin()) - 1;
  if (lo >= 126) return sign * values[126];
  const double frac = (m - values[lo]) / (values[lo + 1] - values[lo]);
  const double u20 = quant::Random20(bits) * std::ldexp(1.0, -20);
  return sign * values[RoundStep(lo, frac, stochastic, u20)];
}

}  // namespace

std::vector<float> QuantizedRoundTrip(const StatePageFormat& f, const std::vector<double>& state,
                                      const std::vector<uint32_t>& salts) {
  std::vector<float> out(state.size());
  if (f.dtype == StateDType::kF32 || f.dtype == StateDType::kBF16) {
    for (size_t i = 0; i < state.size(); ++i) {
      const float x = static_cast<float>(state[i]);
      out[i] = f.dtype == StateDType::kF32 ? x : Bf16ToFloat(FloatToBf16(x));
    }
    return out;
  }
  const bool stochastic = f.rounding == StateRounding::kStochastic;
  const double qmax = f.dtype == StateDType::kInt8 ? quant::kInt8Max : quant::kFp8Max;
  const int K = f.head_dim_k, V = f.head_dim_v;
  for (int h = 0; h < f.num_v_heads; ++h) {
    const uint32_t salt = salts.empty() ? 0 : salts[h];
    for (int c = 0; c < V; c += f.scale_cols) {
      auto at = [&](int k, int j) { return (size_t(h) * K + k) * V + c + j; };
      double amax = 0;
      bool finite = true;
      for (int k = 0; k < K; ++k) {
        for (int j = 0; j < f.scale_cols; ++j) {
          finite &= std::isfinite(state[at(k, j)]);
          amax = std::max(amax, std::fabs(state[at(k, j)]));
        }
      }
      for (int k = 0; k < K; ++k) {
        for (int j = 0; j < f.scale_cols; ++j) {
          float& o = out[at(k, j)];
          if (!finite) {
            o = NAN;
          } else if (amax < quant::kMinGroupAmax) {
            o = 0.0f;
          } else {
            const double scale = static_cast<float>(amax / qmax);
            const double y = std::clamp(state[at(k, j)] / scale, -qmax, qmax);
            const uint32_t bits =
                stochastic ? quant::ElementBits(salt, static_cast<uint32_t>(at(k, j))) : 0;
            o = static_cast<float>(EncodeDecode(f.dtype, y, stochastic, bits) * scale);
          }
        }
      }
    }
  }
  return out;
}

std::vector<uint32_t> StoreSalts(const GdnOptions& options, const Inputs& in, int64_t t) {
  const int hv = options.shape.num_v_heads;
  std::vector<uint32_t> salts(hv);
  for (int h = 0; h < hv; ++h) {
    const size_t at = static_cast<size_t>(t) * hv + h;
    salts[h] = options.gating == GatingMode::kDirect ? quant::RoundingSalt(in.g[at], in.beta[at])
                                                     : quant::RoundingSalt(in.a[at], in.b[at]);
  }
  return salts;
}

}  // namespace gdn::oracle
