#include "server/rpc/forward_request_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kernels/gating.h"
#include "proto/tensor_codec.h"

namespace gdn {
namespace {

using wire::TensorField;

// Bytes copied between two checks: small enough that a step is still in the
// cache when it is checked.
constexpr size_t kStepBytes = 64 << 10;

wire::TensorHeader HeaderOf(const TensorField& t) { return {t.dtype, t.shape, t.data.size}; }

// An empty Tensor counts as absent (some clients send one for unused fields).
absl::Status MustBeAbsent(const TensorField& t, absl::string_view field, GatingMode mode) {
  if (t.dtype == gdn::v1::DTYPE_UNSPECIFIED && t.shape.empty() && t.data.size == 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": not used with gating=", GatingModeName(mode), "; leave it unset"));
}

// fp32 values that must lie in [lo, hi]: the index of the first that does
// not, or n. Branch-free blocks, as FirstNonFinite.
size_t FirstOutOfRange(const float* x, size_t n, float lo, float hi) {
  constexpr size_t kBlock = 1024;
  size_t start = 0;
  for (; start + kBlock <= n; start += kBlock) {
    unsigned bad = 0;
    for (size_t i = 0; i < kBlock; ++i) bad |= !(x[start + i] >= lo && x[start + i] <= hi);
    if (bad != 0) break;
  }
  for (size_t i = start; i < n; ++i) {
    if (!(x[i] >= lo && x[i] <= hi)) return i;
  }
  return n;
}

struct Range {
  float lo, hi;
  const char* expectation;
};

// Copies t's payload to dst, checking each step right after it lands:
// finite, and within `range` when given (fp32 only).
absl::Status CopyChecked(const wire::WireMessage& message, const TensorField& t,
                         absl::string_view field, DType dtype, char* dst,
                         const Range* range = nullptr) {
  const size_t elem = DTypeSize(dtype);
  size_t copied = 0;   // bytes
  size_t checked = 0;  // elements
  absl::Status status;
  message.ForEachPiece(t.data, [&](const char* piece, size_t size) {
    for (size_t at = 0; at < size && status.ok(); at += kStepBytes) {
      const size_t n = std::min(kStepBytes, size - at);
      std::memcpy(dst + copied, piece + at, n);
      copied += n;
      const size_t whole = copied / elem;  // elements complete so far
      const char* from = dst + checked * elem;
      const size_t count = whole - checked;
      const size_t bad = wire::FirstNonFinite(from, count, dtype);
      if (bad < count) {
        status = wire::NonFiniteError(field, dst, dtype, checked + bad);
      } else if (range != nullptr) {
        const float* x = reinterpret_cast<const float*>(from);
        const size_t out = FirstOutOfRange(x, count, range->lo, range->hi);
        if (out < count) {
          status = absl::InvalidArgumentError(absl::StrCat(
              field, ": element ", checked + out, " is ", x[out], "; ", range->expectation));
        }
      }
      checked = whole;
    }
  });
  return status;
}

absl::StatusOr<std::vector<ForwardSequence>> ReadSequences(
    const std::vector<wire::SequenceField>& specs, int64_t* total) {
  if (specs.empty()) {
    return absl::InvalidArgumentError("sequences: at least one sequence is required");
  }
  std::vector<ForwardSequence> out;
  out.reserve(specs.size());
  absl::flat_hash_set<absl::string_view> seen;
  *total = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const wire::SequenceField& spec = specs[i];
    const std::string field = absl::StrCat("sequences[", i, "]");
    if (spec.session_id.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".session_id: must not be empty"));
    }
    if (!seen.insert(spec.session_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".session_id: session '", spec.session_id,
                       "' appears twice; each session at most once per request"));
    }
    if (spec.position < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".position: must be >= 0, got ", spec.position));
    }
    if (spec.num_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".num_tokens: must be >= 1, got ", spec.num_tokens));
    }
    out.push_back({spec.session_id, spec.position, spec.num_tokens,
                   static_cast<int32_t>(*total)});
    *total += spec.num_tokens;
    if (*total > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError("sequences: total num_tokens exceeds 2^31 - 1");
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ForwardCall>> ReadForwardRequest(
    const wire::WireMessage& message, int num_layers, const GdnOptions& options, IoArena& arena,
    uint64_t* request_id) {
  *request_id = 0;
  absl::StatusOr<wire::ForwardRequestFields> scanned = wire::ScanForwardRequest(message);
  if (!scanned.ok()) return scanned.status();
  const wire::ForwardRequestFields& r = *scanned;
  *request_id = r.request_id;
  if (r.layer < 0 || r.layer >= num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer: must be in [0, ", num_layers, "), got ", r.layer));
  }
  int64_t total = 0;
  absl::StatusOr<std::vector<ForwardSequence>> sequences = ReadSequences(r.sequences, &total);
  if (!sequences.ok()) return sequences.status();

  // Every header first: nothing is allocated for a request of the wrong shape.
  const LayerShape& s = options.shape;
  const int64_t T = total;
  const DType act = options.input_dtype;
  const bool direct = options.gating == GatingMode::kDirect;
  const std::vector<int64_t> per_token = {T, s.num_v_heads};
  const std::vector<int64_t> per_head = {s.num_v_heads};
  for (auto [t, name, dtype, shape] :
       {std::tuple{&r.q, "q", act, std::vector<int64_t>{T, s.num_qk_heads, s.head_dim_k}},
        {&r.k, "k", act, std::vector<int64_t>{T, s.num_qk_heads, s.head_dim_k}},
        {&r.v, "v", act, std::vector<int64_t>{T, s.num_v_heads, s.head_dim_v}}}) {
    if (absl::Status st = wire::CheckTensorHeader(HeaderOf(*t), name, dtype, shape); !st.ok()) {
      return st;
    }
  }
  if (direct) {
    for (auto [t, name] : {std::pair{&r.a, "a"}, {&r.b, "b"}, {&r.a_log, "a_log"},
                           {&r.dt_bias, "dt_bias"}}) {
      if (absl::Status st = MustBeAbsent(*t, name, options.gating); !st.ok()) return st;
    }
    for (auto [t, name] : {std::pair{&r.g, "g"}, {&r.beta, "beta"}}) {
      if (absl::Status st = wire::CheckTensorHeader(HeaderOf(*t), name, DType::kF32, per_token);
          !st.ok()) {
        return st;
      }
    }
  } else {
    for (auto [t, name] : {std::pair{&r.g, "g"}, {&r.beta, "beta"}}) {
      if (absl::Status st = MustBeAbsent(*t, name, options.gating); !st.ok()) return st;
    }
    for (auto [t, name, shape] :
         {std::tuple{&r.a, "a", &per_token}, {&r.b, "b", &per_token},
          {&r.a_log, "a_log", &per_head}, {&r.dt_bias, "dt_bias", &per_head}}) {
      if (absl::Status st = wire::CheckTensorHeader(HeaderOf(*t), name, DType::kF32, *shape);
          !st.ok()) {
        return st;
      }
    }
  }

  // Pack: q, k, v, then g and beta (fused: a and b land past the layout's
  // end, A_log and dt_bias in small vectors, and g, beta are computed).
  const InputLayout layout = InputLayout::For(s, act, T);
  const size_t gates = static_cast<size_t>(T) * s.num_v_heads;
  const size_t fused_bytes = direct ? 0 : 2 * gates * sizeof(float);
  absl::StatusOr<std::shared_ptr<IoBlock>> block = arena.Acquire(layout.bytes + fused_bytes);
  if (!block.ok()) return block.status();
  char* base = (*block)->data;
  for (auto [t, name, at] : {std::tuple{&r.q, "q", layout.q}, {&r.k, "k", layout.k},
                             {&r.v, "v", layout.v}}) {
    if (absl::Status st = CopyChecked(message, *t, name, act, base + at); !st.ok()) return st;
  }
  float* g = reinterpret_cast<float*>(base + layout.g);
  float* beta = reinterpret_cast<float*>(base + layout.beta);
  if (direct) {
    // g is a log-space decay (exp(g) <= 1); beta a write strength.
    const Range decay{-std::numeric_limits<float>::max(), 0.0f, "log-space decay must be <= 0"};
    const Range strength{0.0f, 1.0f, "must be in [0, 1]"};
    if (absl::Status st = CopyChecked(message, r.g, "g", DType::kF32, base + layout.g, &decay);
        !st.ok()) {
      return st;
    }
    if (absl::Status st =
            CopyChecked(message, r.beta, "beta", DType::kF32, base + layout.beta, &strength);
        !st.ok()) {
      return st;
    }
  } else {
    float* a = reinterpret_cast<float*>(base + layout.bytes);
    float* b = a + gates;
    std::vector<float> a_log(s.num_v_heads), dt_bias(s.num_v_heads);
    for (auto [t, name, dst] :
         {std::tuple{&r.a, "a", a}, {&r.b, "b", b}, {&r.a_log, "a_log", a_log.data()},
          {&r.dt_bias, "dt_bias", dt_bias.data()}}) {
      if (absl::Status st =
              CopyChecked(message, *t, name, DType::kF32, reinterpret_cast<char*>(dst));
          !st.ok()) {
        return st;
      }
    }
    const size_t hv = static_cast<size_t>(s.num_v_heads);
    for (size_t i = 0; i < gates; ++i) {
      g[i] = FusedDecay(a[i], a_log[i % hv], dt_bias[i % hv]);
      beta[i] = FusedBeta(b[i]);
    }
  }

  auto call = std::make_unique<ForwardCall>();
  call->layer = r.layer;
  call->sequences = std::move(*sequences);
  call->total_tokens = static_cast<int32_t>(T);
  call->inputs = {std::move(*block), layout};
  return call;
}

absl::StatusOr<std::unique_ptr<ForwardCall>> ReadForwardRequest(
    const grpc::ByteBuffer& request, int num_layers, const GdnOptions& options, IoArena& arena,
    uint64_t* request_id) {
  *request_id = 0;
  absl::StatusOr<wire::WireMessage> message = wire::WireMessage::FromByteBuffer(request);
  if (!message.ok()) return message.status();
  return ReadForwardRequest(*message, num_layers, options, arena, request_id);
}

}  // namespace gdn
