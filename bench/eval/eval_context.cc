#include "bench/eval/eval_context.h"

#include <cmath>
#include <cstdio>

namespace gdn::eval {

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

GdnOptions EvalOptions(int heads, int head_dim, DType input, StateDType state) {
  GdnOptions o;
  o.shape.num_qk_heads = heads;
  o.shape.num_v_heads = heads;
  o.shape.head_dim_k = head_dim;
  o.shape.head_dim_v = head_dim;
  o.input_dtype = input;
  o.state_dtype = state;
  o.gating = GatingMode::kDirect;
  o.l2_norm_qk = true;
  return o;
}

std::string Outcome(const absl::Status& status) {
  if (status.ok()) return "ok";
  if (absl::IsResourceExhausted(status)) return "resource_limit";
  if (absl::IsUnimplemented(status)) return "unsupported";
  return "error";
}

Json StatusJson(const absl::Status& status) {
  Json j = Json::Object();
  j.Set("outcome", Outcome(status));
  if (!status.ok()) j.Set("message", std::string(status.message()));
  return j;
}

Json ErrorJson(const testing::ErrorStats& stats) {
  return Json::Object()
      .Set("max_abs_rel", stats.max_abs_rel)
      .Set("rel_l2", stats.rel_l2)
      .Set("nonfinite", stats.nonfinite);
}

Json OptionsJson(const GdnOptions& o) {
  return Json::Object()
      .Set("num_qk_heads", o.shape.num_qk_heads)
      .Set("num_v_heads", o.shape.num_v_heads)
      .Set("head_dim", o.shape.head_dim_k)
      .Set("input_dtype", std::string(DTypeName(o.input_dtype)))
      .Set("state_dtype", std::string(StateDTypeName(o.state_dtype)))
      .Set("gating", std::string(GatingModeName(o.gating)))
      .Set("l2_norm_qk", o.l2_norm_qk);
}

std::string Sci(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2e", v);
  return buf;
}

std::string Fixed(double v, int decimals) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : "inf";
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

}  // namespace gdn::eval
