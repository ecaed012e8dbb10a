#include "kernels/testing/error_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace gdn::testing {

ErrorStats Compare(const float* got, const double* ref, size_t n) {
  ErrorStats stats;
  double max_diff = 0, max_ref = 0, sum_diff2 = 0, sum_ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i];
    if (!std::isfinite(g)) {
      ++stats.nonfinite;
      continue;
    }
    const double diff = g - ref[i];
    max_diff = std::max(max_diff, std::abs(diff));
    max_ref = std::max(max_ref, std::abs(ref[i]));
    sum_diff2 += diff * diff;
    sum_ref2 += ref[i] * ref[i];
  }
  if (stats.nonfinite > 0) {
    stats.max_abs_rel = stats.rel_l2 = std::numeric_limits<double>::infinity();
    return stats;
  }
  stats.max_abs_rel = max_diff / (max_ref > 0 ? max_ref : 1.0);
  stats.rel_l2 = std::sqrt(sum_diff2) / (sum_ref2 > 0 ? std::sqrt(sum_ref2) : 1.0);
  return stats;
}

std::string ToString(const ErrorStats& stats) {
  return absl::StrCat("max_abs_rel=", stats.max_abs_rel,
                      " rel_l2=", stats.rel_l2, " nonfinite=", stats.nonfinite);
}

}  // namespace gdn::testing
