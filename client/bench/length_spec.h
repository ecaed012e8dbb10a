// A per-session count (prefill tokens, decode steps) as a fixed value, a
// range or a distribution, parsed from a flag:
//
//   "128"                  always 128
//   "64:256"               uniform integer in [64, 256]
//   "uniform:64:256"       same
//   "normal:MEAN:STD"      rounded normal, clamped to >= min_value
//   "lognormal:MEDIAN:SIGMA"  rounded exp(N(ln MEDIAN, SIGMA)), clamped
//
// Samples are clamped to [min_value, kMaxValue].
#ifndef GDN_CLIENT_BENCH_LENGTH_SPEC_H_
#define GDN_CLIENT_BENCH_LENGTH_SPEC_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"

namespace gdn::client::bench {

class LengthSpec {
 public:
  enum class Kind { kFixed, kUniform, kNormal, kLognormal };
  static constexpr int kMaxValue = 1 << 20;

  LengthSpec() = default;
  static LengthSpec Fixed(int value);
  // InvalidArgument naming `flag` on a malformed text.
  static absl::StatusOr<LengthSpec> Parse(const std::string& text, const std::string& flag,
                                          int min_value = 0);

  int Sample(std::mt19937_64& rng) const;
  Kind kind() const { return kind_; }
  bool is_fixed() const { return kind_ == Kind::kFixed; }
  // Largest value a sample can take (for buffers): b for ranges, a few
  // standard deviations above the centre for distributions.
  int UpperBound() const;
  // The value everyone expects when they read the config: the fixed value,
  // the range's midpoint, the mean / median.
  double Typical() const;
  std::string ToString() const;

 private:
  Kind kind_ = Kind::kFixed;
  double a_ = 0, b_ = 0;  // fixed: a; uniform: [a, b]; normal: mean, std; lognormal: median, sigma
  int min_value_ = 0;
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_LENGTH_SPEC_H_
