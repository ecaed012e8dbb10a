#include "server/rpc/forward_request_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "absl/strings/str_cat.h"
#include "kernels/gating.h"
#include "kernels/gdn_params.h"
#include "proto/cpu_clones.h"
#include "proto/tensor_codec.h"
#include "server/engine/work_sharing_pool.h"
#include "server/sessions/session_id.h"

namespace gdn {
namespace {

using wire::TensorField;

// Bytes copied between two checks: small enough that a step is still in the
// cache when it is checked.
constexpr size_t kStepBytes = 64 << 10;

wire::TensorHeader HeaderOf(const TensorField& t) {
  return {t.dtype, t.shape, static_cast<size_t>(t.payload_bytes())};
}

// An empty Tensor counts as absent (some clients send one for unused fields).
absl::Status MustBeAbsent(const TensorField& t, absl::string_view field, GatingMode mode) {
  if (t.dtype == gdn::v1::DTYPE_UNSPECIFIED && t.shape.empty() && t.data.size == 0 && !t.has_ref) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": not used with gating=", GatingModeName(mode), "; leave it unset"));
}

// fp32 values that must lie in [lo, hi]: the index of the first that does
// not, or n. Branch-free blocks as FirstNonFinite (SkipCleanBlocks, built
// per x86-64 level like it: proto/cpu_clones.h).
GDN_CPU_CLONES size_t FirstOutOfRange(const float* x, size_t n, float lo, float hi) {
  const size_t start = SkipCleanBlocks<1024, 64>(n, [&](size_t at, auto block) {
    unsigned bad = 0;
    for (size_t i = 0; i < decltype(block)::value; ++i) {
      bad |= !(x[at + i] >= lo && x[at + i] <= hi);
    }
    return bad == 0;
  });
  for (size_t i = start; i < n; ++i) {
    if (!(x[i] >= lo && x[i] <= hi)) return i;
  }
  return n;
}

struct Range {
  float lo, hi;
  const char* expectation;
};

// The first problem in n elements at x: not finite, or outside `range`.
absl::Status CheckElements(const char* x, size_t n, size_t first_index, absl::string_view field,
                           DType dtype, const Range* range) {
  const size_t bad = wire::FirstNonFinite(x, n, dtype);
  if (bad < n) return wire::NonFiniteError(field, x - first_index * DTypeSize(dtype), dtype,
                                           first_index + bad);
  if (range != nullptr) {
    const float* f = reinterpret_cast<const float*>(x);
    const size_t out = FirstOutOfRange(f, n, range->lo, range->hi);
    if (out < n) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": element ", first_index + out,
                                                     " is ", f[out], "; ", range->expectation));
    }
  }
  return absl::OkStatus();
}

// Copies a payload given as pieces (for_each_piece(fn) calls fn(ptr, n) in
// order) to dst, checking each step right after it lands: finite, and
// within `range` when given (fp32 only).
// `first_element`: the index of dst's first element in its tensor (errors
// name the tensor's index).
template <typename ForEachPiece>
absl::Status CopyChecked(ForEachPiece&& for_each_piece, absl::string_view field, DType dtype,
                         char* dst, const Range* range = nullptr, size_t first_element = 0) {
  const size_t elem = DTypeSize(dtype);
  size_t copied = 0;   // bytes
  size_t checked = 0;  // elements
  absl::Status status;
  for_each_piece([&](const char* piece, size_t size) {
    for (size_t at = 0; at < size && status.ok(); at += kStepBytes) {
      const size_t n = std::min(kStepBytes, size - at);
      std::memcpy(dst + copied, piece + at, n);
      copied += n;
      const size_t whole = copied / elem;  // elements complete so far
      status = CheckElements(dst + checked * elem, whole - checked, first_element + checked,
                             field, dtype, range);
      checked = whole;
    }
  });
  return status;
}

absl::Status CopyChecked(const wire::WireMessage& message, const TensorField& t,
                         absl::string_view field, DType dtype, char* dst) {
  return CopyChecked([&](auto&& fn) { message.ForEachPiece(t.data, fn); }, field, dtype, dst);
}

// One inline tensor's payload, copied and checked into the block.
struct InlineCopy {
  const TensorField* tensor;
  const char* field;
  DType dtype;
  const Range* range;
  char* dst;
};

// Copies and checks every inline payload, in parts shared with the arena's
// copy workers when the request has at least arena.share_from_bytes() of
// them, or with a polling engine thread only (no wake-up) from
// arena.poll_share_from_bytes(): each part is the same copy-then-check as
// one thread's. Parts are 1 / (2 (helpers + 1)) of the request (a tenth
// with 4 helpers, a quarter with the poller; a multiple of every element
// size, 32-256 KiB), so that helpers arriving late still take a share (a
// 0.5 MiB decode call of 32 sessions measured no faster with woken workers
// on the H200). The error is the one a single thread going in order would
// meet first (the first tensor that fails, its first bad element).
absl::Status CopyAllChecked(const wire::WireMessage& message,
                            absl::Span<const InlineCopy> copies, IoArena& arena) {
  WorkSharingPool& workers = arena.copy_workers();
  size_t total = 0;
  for (const InlineCopy& c : copies) total += c.tensor->data.size;
  const bool woken = workers.threads() > 0 && total >= arena.share_from_bytes();
  const bool polled = !woken && arena.poll_share_from_bytes() > 0 &&
                      total >= arena.poll_share_from_bytes() && workers.has_pollers();
  const bool shared = woken || polled;
  const size_t helpers = woken ? workers.threads() : 1;
  constexpr size_t kAlign = 4 << 10, kMinPart = 32 << 10, kMaxPart = 256 << 10;
  const size_t part_bytes =
      shared ? std::clamp((total / (2 * (helpers + 1)) + kAlign - 1) / kAlign * kAlign, kMinPart,
                          kMaxPart)
             : kMaxPart;
  struct Part {
    const InlineCopy* copy;
    size_t begin, end;  // bytes of the payload
  };
  absl::InlinedVector<Part, 16> parts;
  for (const InlineCopy& c : copies) {
    const size_t bytes = c.tensor->data.size;
    for (size_t at = 0; at < bytes; at += part_bytes) {
      parts.push_back({&c, at, std::min(bytes, at + part_bytes)});
    }
  }
  absl::InlinedVector<absl::Status, 16> status(parts.size());
  auto copy_part = [&](size_t i) {
    const Part& p = parts[i];
    const InlineCopy& c = *p.copy;
    const wire::WireSpan span{c.tensor->data.offset + p.begin, p.end - p.begin};
    status[i] = CopyChecked([&](auto&& fn) { message.ForEachPiece(span, fn); }, c.field,
                            c.dtype, c.dst + p.begin, c.range, p.begin / DTypeSize(c.dtype));
  };
  if (shared) {
    workers.Run(parts.size(), copy_part,
                woken ? WorkSharingPool::Helpers::kThreads : WorkSharingPool::Helpers::kPollers);
  } else {
    for (size_t i = 0; i < parts.size(); ++i) {
      copy_part(i);
      if (!status[i].ok()) return status[i];
    }
  }
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Checks bytes that stay where they are (a SYSTEM region), step by step.
absl::Status CheckInPlace(const char* data, size_t bytes, absl::string_view field, DType dtype,
                          const Range* range) {
  const size_t elem = DTypeSize(dtype);
  for (size_t at = 0; at < bytes; at += kStepBytes) {
    const size_t n = std::min(kStepBytes, bytes - at);
    if (absl::Status s = CheckElements(data + at, n / elem, at / elem, field, dtype, range);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Moves each spec's session id into its ForwardSequence (one string per
// sequence, not two: a decode call of 256 sequences made 512).
absl::StatusOr<std::vector<ForwardSequence>> ReadSequences(
    std::vector<wire::SequenceField>& specs, int64_t* total) {
  if (specs.empty()) {
    return absl::InvalidArgumentError("sequences: at least one sequence is required");
  }
  std::vector<ForwardSequence> out;
  out.reserve(specs.size());
  // Views of the ids in `out`, whose elements never move (reserved above).
  absl::flat_hash_set<absl::string_view> seen;
  seen.reserve(specs.size());  // no rehash while it fills
  *total = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    wire::SequenceField& spec = specs[i];
    // The field's name only for an error (a decode call of 256 sequences
    // made two strings per sequence for nothing: perf, issue 16).
    auto field = [i] { return absl::StrCat("sequences[", i, "]"); };
    if (spec.session_id.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field(), ".session_id: must not be empty"));
    }
    if (absl::Status s = ValidateSessionId(spec.session_id, "session_id"); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(field(), ".", s.message()));
    }
    if (spec.position < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field(), ".position: must be >= 0, got ", spec.position));
    }
    if (spec.num_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(field(), ".num_tokens: must be >= 1, got ", spec.num_tokens));
    }
    if (spec.draft && (spec.num_tokens < 2 || spec.num_tokens > kMaxDecodeTokens)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field(), ".draft: a draft has 2..", kMaxDecodeTokens, " tokens, got num_tokens ",
          spec.num_tokens));
    }
    if (spec.checkpoint_interval != 0) {
      if (spec.checkpoint_interval < 0 || spec.checkpoint_interval % kCheckpointTokens != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            field(), ".checkpoint_interval: must be a positive multiple of ", kCheckpointTokens,
            " (or 0), got ", spec.checkpoint_interval));
      }
      if (spec.draft) {
        return absl::InvalidArgumentError(
            absl::StrCat(field(), ".checkpoint_interval: not with draft"));
      }
      if (spec.position % kCheckpointTokens != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            field(), ".checkpoint_interval: the sequence must start at a multiple of ",
            kCheckpointTokens, " tokens; position is ", spec.position));
      }
    }
    out.push_back({std::move(spec.session_id), spec.position, spec.num_tokens,
                   static_cast<int32_t>(*total), spec.draft, spec.checkpoint_interval});
    if (!seen.insert(out.back().session).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field(), ".session_id: session '", out.back().session,
                       "' appears twice; each session at most once per request"));
    }
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
    uint64_t* request_id, const RegionAccess* regions) {
  *request_id = 0;
  absl::StatusOr<wire::ForwardRequestFields> scanned = wire::ScanForwardRequest(message);
  if (!scanned.ok()) return scanned.status();
  wire::ForwardRequestFields& r = *scanned;
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
  // Tensors in regions are resolved and checked where they lie instead.
  const InputLayout layout = InputLayout::For(s, act, T);
  const size_t gates = static_cast<size_t>(T) * s.num_v_heads;
  const size_t fused_bytes = direct ? 0 : 2 * gates * sizeof(float);
  const TensorField* inputs[PackedInputs::kCount] = {&r.q, &r.k, &r.v, &r.g, &r.beta};
  static constexpr const char* kInputNames[] = {"q", "k", "v", "g", "beta"};
  const DType input_dtypes[PackedInputs::kCount] = {act, act, act, DType::kF32, DType::kF32};
  // g is a log-space decay (exp(g) <= 1), at least kMinFusedDecay (the
  // fused folding's floor: exp(g) is 0 long before, and the chunked prefill
  // sums g over 64 tokens, which -FLT_MAX would overflow); beta a write
  // strength.
  const Range decay{kMinFusedDecay, 0.0f, "log-space decay must be <= 0 (and >= -2^120)"};
  const Range strength{0.0f, 1.0f, "must be in [0, 1]"};
  const Range* ranges[PackedInputs::kCount] = {nullptr, nullptr, nullptr, &decay, &strength};
  const int in_requests = direct ? PackedInputs::kCount : PackedInputs::kG;  // g, beta: computed
  bool needs_block = !direct;
  for (int i = 0; i < in_requests; ++i) needs_block |= !inputs[i]->has_ref;

  PackedInputs packed;
  packed.layout = layout;
  if (needs_block) {
    absl::StatusOr<std::shared_ptr<IoBlock>> block = arena.Acquire(layout.bytes + fused_bytes);
    if (!block.ok()) return block.status();
    packed.block = std::move(*block);
    packed.PointIntoBlock();
  }
  char* base = needs_block ? packed.block->data : nullptr;
  std::shared_ptr<RegionHold> hold;  // made by the first ref (inline calls allocate none)
  // A ref resolved for `field`: held by the call; aligned for its dtype.
  auto resolve = [&](const wire::RegionRefField& ref, int64_t bytes, absl::string_view field,
                     DType dtype) -> absl::StatusOr<ResolvedRef> {
    if (regions == nullptr || regions->registry == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".ref: this server takes no region references"));
    }
    absl::StatusOr<ResolvedRef> resolved = regions->registry->Resolve(regions->owner, ref, bytes,
                                                                      field);
    if (!resolved.ok()) return resolved.status();
    if (reinterpret_cast<uintptr_t>(resolved->device) % DTypeSize(dtype) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".ref.offset: ", ref.offset, " is not aligned to its ", DTypeSize(dtype),
          "-byte elements"));
    }
    if (hold == nullptr) hold = std::make_shared<RegionHold>();
    hold->Add(resolved->region);
    return resolved;
  };

  absl::InlinedVector<InlineCopy, PackedInputs::kCount> inline_copies;
  std::vector<ValueCheck> device_checks;  // CUDA regions, checked in one launch
  std::vector<int> device_check_inputs;   // which input each check is
  for (int i = 0; i < in_requests; ++i) {
    const TensorField& t = *inputs[i];
    const char* name = kInputNames[i];
    if (!t.has_ref) {
      inline_copies.push_back({&t, name, input_dtypes[i], ranges[i],
                               const_cast<char*>(packed.source[i])});
      continue;
    }
    absl::StatusOr<ResolvedRef> ref = resolve(t.ref, t.ref.byte_size, name, input_dtypes[i]);
    if (!ref.ok()) return ref.status();
    packed.source[i] = ref->device;
    if (ref->host != nullptr) {
      if (absl::Status st = CheckInPlace(ref->host, static_cast<size_t>(t.ref.byte_size), name,
                                         input_dtypes[i], ranges[i]);
          !st.ok()) {
        return st;
      }
    } else {
      packed.on_device[i] = true;
      ValueCheck c;
      c.data = ref->device;
      c.count = t.ref.byte_size / static_cast<int64_t>(DTypeSize(input_dtypes[i]));
      c.dtype = input_dtypes[i];
      c.range = ranges[i] != nullptr;
      if (c.range) c.lo = ranges[i]->lo, c.hi = ranges[i]->hi;
      device_checks.push_back(c);
      device_check_inputs.push_back(i);
    }
  }
  if (absl::Status st = CopyAllChecked(message, inline_copies, arena); !st.ok()) {
    return st;
  }
  if (!device_checks.empty()) {
    absl::StatusOr<std::vector<int64_t>> first_bad = regions->backend->CheckValues(device_checks);
    if (!first_bad.ok()) return first_bad.status();
    for (size_t c = 0; c < device_checks.size(); ++c) {
      if ((*first_bad)[c] < device_checks[c].count) {
        const int i = device_check_inputs[c];
        return absl::InvalidArgumentError(absl::StrCat(
            kInputNames[i], ": element ", (*first_bad)[c], " (in region '", inputs[i]->ref.region,
            "') is not finite", ranges[i] != nullptr ? absl::StrCat(" or ", ranges[i]->expectation)
                                                     : std::string("; every value must be finite")));
      }
    }
  }
  if (!direct) {
    float* g = const_cast<float*>(reinterpret_cast<const float*>(packed.source[PackedInputs::kG]));
    float* beta =
        const_cast<float*>(reinterpret_cast<const float*>(packed.source[PackedInputs::kBeta]));
    float* a = reinterpret_cast<float*>(base + layout.bytes);
    float* b = a + gates;
    std::vector<float> a_log(s.num_v_heads), dt_bias(s.num_v_heads);
    for (auto [t, name, dst] :
         {std::tuple{&r.a, "a", a}, {&r.b, "b", b}, {&r.a_log, "a_log", a_log.data()},
          {&r.dt_bias, "dt_bias", dt_bias.data()}}) {
      absl::Status st;
      if (!t->has_ref) {
        st = CopyChecked(message, *t, name, DType::kF32, reinterpret_cast<char*>(dst));
      } else {
        absl::StatusOr<ResolvedRef> ref = resolve(t->ref, t->ref.byte_size, name, DType::kF32);
        if (!ref.ok()) return ref.status();
        if (ref->host == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              name, ".ref: fused gating inputs come inline or from a SYSTEM region (they are "
                    "folded into g and beta on the host); region '", t->ref.region,
              "' is CUDA memory"));
        }
        const char* src = ref->host;
        const size_t bytes = static_cast<size_t>(t->ref.byte_size);
        st = CopyChecked([&](auto&& fn) { fn(src, bytes); }, name, DType::kF32,
                         reinterpret_cast<char*>(dst));
      }
      if (!st.ok()) return st;
    }
    const size_t hv = static_cast<size_t>(s.num_v_heads);
    for (size_t i = 0; i < gates; ++i) {
      g[i] = FusedDecay(a[i], a_log[i % hv], dt_bias[i % hv]);
      beta[i] = FusedBeta(b[i]);
    }
  }
  char* o_region = nullptr;
  bool o_region_on_device = false;
  if (r.has_o_region) {
    absl::StatusOr<ResolvedRef> ref =
        resolve(r.o_region, static_cast<int64_t>(T * layout.v_row), "o_region", act);
    if (!ref.ok()) return ref.status();
    o_region = ref->device;
    o_region_on_device = ref->host == nullptr;
  }

  auto call = std::make_unique<ForwardCall>();
  call->layer = r.layer;
  call->sequences = std::move(*sequences);
  call->total_tokens = static_cast<int32_t>(T);
  call->inputs = std::move(packed);
  call->o_region = o_region;
  call->o_region_on_device = o_region_on_device;
  if (hold != nullptr) {
    call->check_before_start = [hold = std::move(hold)]() -> absl::Status {
      if (const Region* r = hold->FirstRevoked()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "region '", r->name, "' was unregistered before the call could run; the call "
            "was not applied"));
      }
      return absl::OkStatus();
    };
  }
  return call;
}

absl::StatusOr<std::unique_ptr<ForwardCall>> ReadForwardRequest(
    const grpc::ByteBuffer& request, int num_layers, const GdnOptions& options, IoArena& arena,
    uint64_t* request_id, const RegionAccess* regions) {
  *request_id = 0;
  absl::StatusOr<wire::WireMessage> message = wire::WireMessage::FromByteBuffer(request);
  if (!message.ok()) return message.status();
  return ReadForwardRequest(*message, num_layers, options, arena, request_id, regions);
}

}  // namespace gdn
