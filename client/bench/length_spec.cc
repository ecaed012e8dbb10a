#include "client/bench/length_spec.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gdn::client::bench {
namespace {

absl::Status Bad(const std::string& flag, const std::string& text, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, "='", text, "': ", why,
      " (expected N, A:B, uniform:A:B, normal:MEAN:STD or lognormal:MEDIAN:SIGMA)"));
}

}  // namespace

LengthSpec LengthSpec::Fixed(int value) {
  LengthSpec s;
  s.a_ = s.b_ = value;
  return s;
}

absl::StatusOr<LengthSpec> LengthSpec::Parse(const std::string& text, const std::string& flag,
                                             int min_value) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  LengthSpec s;
  s.min_value_ = min_value;
  std::vector<double> numbers;
  size_t first_number = 0;
  if (!parts.empty() && !parts[0].empty() && std::isalpha(static_cast<unsigned char>(parts[0][0]))) {
    first_number = 1;
    if (parts[0] == "uniform") {
      s.kind_ = Kind::kUniform;
    } else if (parts[0] == "normal") {
      s.kind_ = Kind::kNormal;
    } else if (parts[0] == "lognormal") {
      s.kind_ = Kind::kLognormal;
    } else {
      return Bad(flag, text, absl::StrCat("unknown distribution '", parts[0], "'"));
    }
  } else {
    s.kind_ = parts.size() == 1 ? Kind::kFixed : Kind::kUniform;
  }
  for (size_t i = first_number; i < parts.size(); ++i) {
    double x;
    if (!absl::SimpleAtod(parts[i], &x) || !std::isfinite(x)) {
      return Bad(flag, text, absl::StrCat("'", parts[i], "' is not a number"));
    }
    numbers.push_back(x);
  }
  const size_t want = s.kind_ == Kind::kFixed ? 1 : 2;
  if (numbers.size() != want) return Bad(flag, text, "wrong number of fields");
  s.a_ = numbers[0];
  s.b_ = want == 2 ? numbers[1] : numbers[0];
  switch (s.kind_) {
    case Kind::kFixed:
      if (s.a_ != std::floor(s.a_)) return Bad(flag, text, "not an integer");
      if (s.a_ < min_value || s.a_ > kMaxValue) {
        return Bad(flag, text, absl::StrCat("must be in [", min_value, ", ", kMaxValue, "]"));
      }
      break;
    case Kind::kUniform:
      if (s.a_ < min_value || s.b_ < s.a_ || s.b_ > kMaxValue) {
        return Bad(flag, text, absl::StrCat("needs ", min_value, " <= A <= B <= ", kMaxValue));
      }
      break;
    case Kind::kNormal:
      if (s.b_ < 0) return Bad(flag, text, "STD must be >= 0");
      break;
    case Kind::kLognormal:
      if (s.a_ <= 0 || s.b_ < 0) return Bad(flag, text, "needs MEDIAN > 0 and SIGMA >= 0");
      break;
  }
  return s;
}

int LengthSpec::Sample(std::mt19937_64& rng) const {
  double x = a_;
  switch (kind_) {
    case Kind::kFixed:
      break;
    case Kind::kUniform:
      x = std::uniform_int_distribution<int64_t>(static_cast<int64_t>(a_),
                                                 static_cast<int64_t>(b_))(rng);
      break;
    case Kind::kNormal:
      x = std::normal_distribution<double>(a_, b_)(rng);
      break;
    case Kind::kLognormal:
      x = std::exp(std::normal_distribution<double>(std::log(a_), b_)(rng));
      break;
  }
  return static_cast<int>(std::clamp<double>(std::round(x), min_value_, kMaxValue));
}

int LengthSpec::UpperBound() const {
  double x = a_;
  switch (kind_) {
    case Kind::kFixed:
      break;
    case Kind::kUniform:
      x = b_;
      break;
    case Kind::kNormal:
      x = a_ + 4 * b_;
      break;
    case Kind::kLognormal:
      x = a_ * std::exp(3 * b_);
      break;
  }
  return static_cast<int>(std::clamp<double>(std::ceil(x), min_value_, kMaxValue));
}

double LengthSpec::Typical() const {
  return kind_ == Kind::kUniform ? (a_ + b_) / 2 : a_;
}

std::string LengthSpec::ToString() const {
  switch (kind_) {
    case Kind::kFixed:
      return absl::StrCat(a_);
    case Kind::kUniform:
      return absl::StrCat(a_, ":", b_);
    case Kind::kNormal:
      return absl::StrCat("normal:", a_, ":", b_);
    case Kind::kLognormal:
      return absl::StrCat("lognormal:", a_, ":", b_);
  }
  return "";
}

}  // namespace gdn::client::bench
