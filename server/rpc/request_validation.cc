#include "server/rpc/request_validation.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "proto/tensor_codec.h"

namespace gdn {
namespace {

bool Present(const gdn::v1::Tensor& t) {
  return t.dtype() != gdn::v1::DTYPE_UNSPECIFIED || t.shape_size() > 0 ||
         !t.data().empty();
}

absl::Status CheckValues(const gdn::v1::Tensor& t, absl::string_view field,
                         DType dtype, const std::vector<int64_t>& shape) {
  if (absl::Status s = wire::CheckTensor(t, field, dtype, shape); !s.ok()) {
    return s;
  }
  return wire::CheckFinite(t, field);
}

// fp32 tensors whose elements must lie in [lo, hi] (already finite).
absl::Status CheckRange(const gdn::v1::Tensor& t, absl::string_view field,
                        float lo, float hi, absl::string_view expectation) {
  const size_t n = t.data().size() / sizeof(float);
  const char* data = t.data().data();
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, data + i * sizeof(float), sizeof(float));
    if (!(x >= lo && x <= hi)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": element ", i, " is ", x, "; ", expectation));
    }
  }
  return absl::OkStatus();
}

absl::Status MustBeAbsent(const gdn::v1::Tensor& t, absl::string_view field,
                          GatingMode mode) {
  if (!Present(t)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": not used with gating=", GatingModeName(mode),
                   "; leave it unset"));
}

}  // namespace

absl::StatusOr<ValidatedForward> ValidateForwardRequest(
    const gdn::v1::ForwardRequest& r, int num_layers,
    const GdnOptions& options) {
  ValidatedForward out;
  if (r.layer() < 0 || r.layer() >= num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer: must be in [0, ", num_layers, "), got ",
                     r.layer()));
  }
  out.layer = r.layer();
  if (r.sequences_size() == 0) {
    return absl::InvalidArgumentError(
        "sequences: at least one sequence is required");
  }
  absl::flat_hash_set<absl::string_view> seen;
  int64_t total = 0;
  for (int i = 0; i < r.sequences_size(); ++i) {
    const gdn::v1::SequenceSpec& spec = r.sequences(i);
    const std::string field = absl::StrCat("sequences[", i, "]");
    if (spec.session_id().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".session_id: must not be empty"));
    }
    if (!seen.insert(spec.session_id()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".session_id: session '", spec.session_id(),
          "' appears twice; each session at most once per request"));
    }
    if (spec.position() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".position: must be >= 0, got ", spec.position()));
    }
    if (spec.num_tokens() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".num_tokens: must be >= 1, got ", spec.num_tokens()));
    }
    ForwardSequence seq;
    seq.session = spec.session_id();
    seq.position = spec.position();
    seq.num_tokens = spec.num_tokens();
    seq.row_offset = static_cast<int32_t>(total);
    total += spec.num_tokens();
    if (total > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          "sequences: total num_tokens exceeds 2^31 - 1");
    }
    out.sequences.push_back(std::move(seq));
  }
  out.total_tokens = static_cast<int32_t>(total);

  const LayerShape& s = options.shape;
  const int64_t T = total;
  const DType act = options.input_dtype;
  if (absl::Status st = CheckValues(r.q(), "q", act, {T, s.num_qk_heads, s.head_dim_k});
      !st.ok()) {
    return st;
  }
  if (absl::Status st = CheckValues(r.k(), "k", act, {T, s.num_qk_heads, s.head_dim_k});
      !st.ok()) {
    return st;
  }
  if (absl::Status st = CheckValues(r.v(), "v", act, {T, s.num_v_heads, s.head_dim_v});
      !st.ok()) {
    return st;
  }
  const std::vector<int64_t> per_token = {T, s.num_v_heads};
  const std::vector<int64_t> per_head = {s.num_v_heads};
  if (options.gating == GatingMode::kDirect) {
    for (auto [t, name] : {std::pair{&r.a(), "a"}, {&r.b(), "b"},
                           {&r.a_log(), "a_log"}, {&r.dt_bias(), "dt_bias"}}) {
      if (absl::Status st = MustBeAbsent(*t, name, options.gating); !st.ok()) {
        return st;
      }
    }
    if (absl::Status st = CheckValues(r.g(), "g", DType::kF32, per_token);
        !st.ok()) {
      return st;
    }
    if (absl::Status st = CheckValues(r.beta(), "beta", DType::kF32, per_token);
        !st.ok()) {
      return st;
    }
    // g is a log-space decay (exp(g) <= 1); beta a write strength.
    if (absl::Status st = CheckRange(r.g(), "g", -std::numeric_limits<float>::max(),
                                     0.0f, "log-space decay must be <= 0");
        !st.ok()) {
      return st;
    }
    if (absl::Status st =
            CheckRange(r.beta(), "beta", 0.0f, 1.0f, "must be in [0, 1]");
        !st.ok()) {
      return st;
    }
  } else {
    for (auto [t, name] : {std::pair{&r.g(), "g"}, {&r.beta(), "beta"}}) {
      if (absl::Status st = MustBeAbsent(*t, name, options.gating); !st.ok()) {
        return st;
      }
    }
    for (auto [t, name, shape] :
         {std::tuple{&r.a(), "a", &per_token}, {&r.b(), "b", &per_token},
          {&r.a_log(), "a_log", &per_head},
          {&r.dt_bias(), "dt_bias", &per_head}}) {
      if (absl::Status st = CheckValues(*t, name, DType::kF32, *shape);
          !st.ok()) {
        return st;
      }
    }
  }
  return out;
}

}  // namespace gdn
