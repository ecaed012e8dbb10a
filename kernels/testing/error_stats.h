// How far a backend's fp32 result is from the float64 oracle, as shared/GDN.md
// asks to report it. Test-only.
#ifndef GDN_KERNELS_TESTING_ERROR_STATS_H_
#define GDN_KERNELS_TESTING_ERROR_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace gdn::testing {

struct ErrorStats {
  double max_abs_rel = 0;  // max|got - ref| / max|ref|
  double rel_l2 = 0;       // ||got - ref|| / ||ref||
  int64_t nonfinite = 0;   // NaN / Inf count in got
};

// n elements each. A NaN / Inf in `got` is counted in `nonfinite` and makes
// both error figures +Inf, so a tolerance check on them fails too. When `ref`
// is all zeros the denominators are 1 (absolute errors).
ErrorStats Compare(const float* got, const double* ref, size_t n);

// "max_abs_rel=… rel_l2=… nonfinite=…", for failure messages.
std::string ToString(const ErrorStats& stats);

}  // namespace gdn::testing

#endif  // GDN_KERNELS_TESTING_ERROR_STATS_H_
