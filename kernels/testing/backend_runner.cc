#include "kernels/testing/backend_runner.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/dtype_convert.h"
#include "kernels/state_page_codec.h"

namespace gdn::testing {
namespace {

// A quiet NaN of each element type, repeated over the pool / o buffers.
constexpr uint32_t kNanF32 = 0x7fc00000u;
constexpr uint16_t kNanBf16 = 0x7fc0u;
constexpr uint16_t kNanF16 = 0x7e00u;

template <typename T>
void Fill(std::vector<uint8_t>* bytes, T pattern) {
  for (size_t i = 0; i + sizeof(T) <= bytes->size(); i += sizeof(T)) {
    std::memcpy(bytes->data() + i, &pattern, sizeof(T));
  }
}

void FillNan(std::vector<uint8_t>* bytes, size_t element_size, bool is_f16) {
  if (element_size == 4) Fill(bytes, kNanF32);
  else Fill(bytes, is_f16 ? kNanF16 : kNanBf16);
}

absl::Status CheckSize(const char* name, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "RunOnBackend: ", name, " has ", got, " values, expected ", want));
}

}  // namespace

StagedCall::StagedCall(Backend& backend, const GdnOptions& options)
    : backend_(backend), options_(options) {}

StagedCall::~StagedCall() {
  (void)backend_.Synchronize();
  for (void* p : allocations_) backend_.Free(p);
}

absl::StatusOr<void*> StagedCall::Upload(const void* host, size_t bytes) {
  if (bytes == 0) return nullptr;
  absl::StatusOr<void*> ptr = backend_.Allocate(bytes);
  if (!ptr.ok()) return ptr.status();
  allocations_.push_back(*ptr);
  if (host != nullptr) {
    absl::Status st = backend_.CopyToDevice(*ptr, host, bytes);
    if (!st.ok()) return st;
  }
  return *ptr;
}

absl::StatusOr<std::unique_ptr<StagedCall>> StagedCall::Create(
    Backend& backend, const GdnOptions& options, const oracle::Inputs& in,
    int32_t checkpoint_interval) {
  const LayerShape& s = options.shape;
  const int32_t n = in.num_seqs();
  const int64_t t = in.total_tokens();
  if (n < 1) return absl::InvalidArgumentError("RunOnBackend: no sequences");
  const int64_t state_size = int64_t{s.num_v_heads} * s.head_dim_k * s.head_dim_v;
  absl::Status st;
  if (!(st = CheckSize("q", in.q.size(), t * s.num_qk_heads * s.head_dim_k)).ok()) return st;
  if (!(st = CheckSize("k", in.k.size(), t * s.num_qk_heads * s.head_dim_k)).ok()) return st;
  if (!(st = CheckSize("v", in.v.size(), t * s.num_v_heads * s.head_dim_v)).ok()) return st;
  if (!(st = CheckSize("initial_states", in.initial_states.size(), n)).ok()) return st;
  for (const auto& state : in.initial_states) {
    if (!state.empty() &&
        !(st = CheckSize("initial_states[i]", state.size(), state_size)).ok()) {
      return st;
    }
  }

  std::unique_ptr<StagedCall> call(new StagedCall(backend, options));
  GdnParams& p = call->params_;
  p.num_seqs = n;
  p.total_tokens = static_cast<int32_t>(t);
  call->cu_seqlens_host_ = in.cu_seqlens;
  p.cu_seqlens_host = call->cu_seqlens_host_.data();

  // Activations in the wire dtype.
  const size_t esize = DTypeSize(options.input_dtype);
  auto upload_activation = [&](const std::vector<float>& values)
      -> absl::StatusOr<void*> {
    std::vector<uint8_t> bytes(values.size() * esize);
    ConvertFromFloat(values.data(), values.size(), options.input_dtype,
                     bytes.data());
    return call->Upload(bytes.data(), bytes.size());
  };
  auto upload_floats = [&](const std::vector<float>& values)
      -> absl::StatusOr<const float*> {
    absl::StatusOr<void*> ptr =
        call->Upload(values.data(), values.size() * sizeof(float));
    if (!ptr.ok()) return ptr.status();
    return static_cast<const float*>(*ptr);
  };
  absl::StatusOr<void*> ptr;
  if (!(ptr = call->Upload(in.cu_seqlens.data(), (n + 1) * sizeof(int32_t))).ok()) return ptr.status();
  p.cu_seqlens = static_cast<const int32_t*>(*ptr);
  if (!(ptr = upload_activation(in.q)).ok()) return ptr.status();
  p.q = *ptr;
  if (!(ptr = upload_activation(in.k)).ok()) return ptr.status();
  p.k = *ptr;
  if (!(ptr = upload_activation(in.v)).ok()) return ptr.status();
  p.v = *ptr;
  {
    std::vector<uint8_t> poison(t * s.num_v_heads * s.head_dim_v * esize);
    FillNan(&poison, esize, options.input_dtype == DType::kF16);
    if (!(ptr = call->Upload(poison.data(), poison.size())).ok()) return ptr.status();
    p.o = *ptr;
  }
  // Gating inputs stay fp32; empty vectors stay null pointers.
  absl::StatusOr<const float*> f;
  if (!(f = upload_floats(in.g)).ok()) return f.status();
  p.g = *f;
  if (!(f = upload_floats(in.beta)).ok()) return f.status();
  p.beta = *f;
  if (!(f = upload_floats(in.a)).ok()) return f.status();
  p.a = *f;
  if (!(f = upload_floats(in.b)).ok()) return f.status();
  p.b = *f;
  if (!(f = upload_floats(in.A_log)).ok()) return f.status();
  p.A_log = *f;
  if (!(f = upload_floats(in.dt_bias)).ok()) return f.status();
  p.dt_bias = *f;

  // Pool: page 0 is a guard page nobody uses; sequence i owns pages 2i + 1
  // and 2i + 2. Even sequences update page 2i + 1 in place, odd ones read
  // 2i + 1 and write 2i + 2. Then, with checkpoints, per_seq slots per
  // sequence, each with a page of its own (kZeroStatePage past the
  // sequence's count). Everything starts as NaN.
  const StatePageLayout layout = StatePageLayout::For(s, options.state_dtype);
  int32_t per_seq = 0;
  if (checkpoint_interval > 0) {
    for (int32_t i = 0; i < n; ++i) {
      per_seq = std::max(per_seq, CheckpointCount(in.cu_seqlens[i + 1] - in.cu_seqlens[i],
                                                  checkpoint_interval));
    }
    per_seq = std::max(per_seq, 1);  // a non-null slot array even when no sequence has one
    for (int32_t i = 0; i < n; ++i) {
      const int32_t count =
          CheckpointCount(in.cu_seqlens[i + 1] - in.cu_seqlens[i], checkpoint_interval);
      for (int32_t m = 0; m < per_seq; ++m) {
        call->checkpoint_pages_.push_back(m < count ? 2 * n + 1 + i * per_seq + m
                                                    : kZeroStatePage);
      }
    }
  }
  const int32_t num_pages = 2 * n + 1 + n * per_seq;
  std::vector<uint8_t> pool(layout.page_bytes * num_pages);
  FillNan(&pool, StateDTypeSize(options.state_dtype), false);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t own = 2 * i + 1;
    const auto& state = in.initial_states[i];
    call->initial_pages_.push_back(state.empty() ? kZeroStatePage : own);
    call->final_pages_.push_back(i % 2 == 0 ? own : own + 1);
    // Staged with round to nearest: a state already rounded through the
    // dtype (RoundThroughState) is stored back as the same values.
    if (!state.empty()) {
      StatePageFormat format = StatePageFormat::For(options);
      format.rounding = StateRounding::kNearest;
      EncodeStatePage(format, state.data(), {}, pool.data() + layout.page_bytes * own);
    }
  }
  if (!(ptr = call->Upload(pool.data(), pool.size())).ok()) return ptr.status();
  p.pool.base = *ptr;
  p.pool.page_bytes = static_cast<int64_t>(layout.page_bytes);
  p.pool.num_pages = num_pages;
  p.pool.dtype = options.state_dtype;
  call->staged_pool_ = std::move(pool);

  if (!(ptr = call->Upload(nullptr, n * sizeof(int32_t))).ok()) return ptr.status();
  call->initial_pages_device_ = static_cast<int32_t*>(*ptr);
  if (!(ptr = call->Upload(nullptr, n * sizeof(int32_t))).ok()) return ptr.status();
  call->final_pages_device_ = static_cast<int32_t*>(*ptr);
  p.initial_pages = call->initial_pages_device_;
  p.final_pages = call->final_pages_device_;
  const std::vector<int32_t> initial = call->initial_pages_;
  const std::vector<int32_t> final = call->final_pages_;
  if (!(st = call->SetPages(initial, final)).ok()) return st;
  if (checkpoint_interval > 0) {
    const size_t slots = call->checkpoint_pages_.size();
    if (!(ptr = call->Upload(nullptr, slots * sizeof(int32_t))).ok()) return ptr.status();
    call->checkpoint_pages_device_ = static_cast<int32_t*>(*ptr);
    p.checkpoint_interval = checkpoint_interval;
    p.checkpoints_per_seq = per_seq;
    p.checkpoint_pages = call->checkpoint_pages_device_;
    const std::vector<int32_t> pages = call->checkpoint_pages_;
    if (!(st = call->SetCheckpointPages(pages)).ok()) return st;
  }
  // The host vectors above are temporaries: wait for the copies.
  if (!(st = backend.Synchronize()).ok()) return st;
  return call;
}

absl::Status StagedCall::SetPages(const std::vector<int32_t>& initial_pages,
                                  const std::vector<int32_t>& final_pages) {
  if (static_cast<int32_t>(initial_pages.size()) != params_.num_seqs ||
      static_cast<int32_t>(final_pages.size()) != params_.num_seqs) {
    return absl::InvalidArgumentError("SetPages: need one page per sequence");
  }
  initial_pages_ = initial_pages;
  final_pages_ = final_pages;
  const size_t bytes = initial_pages_.size() * sizeof(int32_t);
  absl::Status st =
      backend_.CopyToDevice(initial_pages_device_, initial_pages_.data(), bytes);
  if (!st.ok()) return st;
  st = backend_.CopyToDevice(final_pages_device_, final_pages_.data(), bytes);
  if (!st.ok()) return st;
  return backend_.Synchronize();
}

absl::Status StagedCall::SetCheckpointPages(const std::vector<int32_t>& pages) {
  if (checkpoint_pages_device_ == nullptr ||
      pages.size() != size_t(params_.num_seqs) * params_.checkpoints_per_seq) {
    return absl::InvalidArgumentError(
        "SetCheckpointPages: staged without checkpoints, or not num_seqs * checkpoints_per_seq");
  }
  checkpoint_pages_ = pages;
  absl::Status st = backend_.CopyToDevice(checkpoint_pages_device_, checkpoint_pages_.data(),
                                          checkpoint_pages_.size() * sizeof(int32_t));
  if (!st.ok()) return st;
  return backend_.Synchronize();
}

absl::Status StagedCall::Run(EntryPoint entry) {
  absl::Status st = entry == EntryPoint::kDecode
                        ? backend_.Decode(options_, params_)
                        : backend_.Prefill(options_, params_);
  absl::Status sync = backend_.Synchronize();
  return st.ok() ? sync : st;
}

absl::StatusOr<std::vector<uint8_t>> StagedCall::PoolBytes() {
  std::vector<uint8_t> bytes(staged_pool_.size());
  absl::Status st =
      backend_.CopyToHost(bytes.data(), params_.pool.base, bytes.size());
  if (st.ok()) st = backend_.Synchronize();
  if (!st.ok()) return st;
  return bytes;
}

absl::StatusOr<BackendOutputs> StagedCall::Fetch() {
  const LayerShape& s = options_.shape;
  const size_t esize = DTypeSize(options_.input_dtype);
  const size_t o_count =
      size_t(params_.total_tokens) * s.num_v_heads * s.head_dim_v;
  std::vector<uint8_t> o_bytes(o_count * esize);
  absl::Status st = backend_.CopyToHost(o_bytes.data(), params_.o, o_bytes.size());
  if (!st.ok()) return st;
  absl::StatusOr<std::vector<uint8_t>> pool = PoolBytes();  // synchronises
  if (!pool.ok()) return pool.status();

  BackendOutputs out;
  out.o.resize(o_count);
  ConvertToFloat(o_bytes.data(), options_.input_dtype, o_count, out.o.data());

  const size_t page_bytes = static_cast<size_t>(params_.pool.page_bytes);
  const int32_t n = params_.num_seqs;
  // Sequence i's checkpoint slots that hold a page (the rest are skipped).
  auto checkpoint_slots = [&](int32_t i) {
    std::vector<int32_t> slots;
    if (params_.checkpoint_interval <= 0) return slots;
    const int32_t count =
        CheckpointCount(cu_seqlens_host_[i + 1] - cu_seqlens_host_[i], params_.checkpoint_interval);
    for (int32_t m = 0; m < count; ++m) {
      slots.push_back(checkpoint_pages_[size_t(i) * params_.checkpoints_per_seq + m]);
    }
    return slots;
  };
  std::vector<bool> written(params_.pool.num_pages, false);
  for (int32_t page : final_pages_) {
    if (page >= 0 && page < params_.pool.num_pages) written[page] = true;
  }
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t page : checkpoint_slots(i)) {
      if (page >= 0 && page < params_.pool.num_pages) written[page] = true;
    }
  }
  for (int32_t page = 0; page < params_.pool.num_pages; ++page) {
    if (!written[page] &&
        std::memcmp(pool->data() + page * page_bytes,
                    staged_pool_.data() + page * page_bytes, page_bytes) != 0) {
      return absl::InternalError(absl::StrCat(
          "page ", page, " is no sequence's final or checkpoint page but was modified"));
    }
  }
  const size_t state_size = size_t(s.num_v_heads) * s.head_dim_k * s.head_dim_v;
  auto read_page = [&](int32_t page) -> absl::StatusOr<std::vector<float>> {
    if (page < 0 || page >= params_.pool.num_pages) {
      return absl::InvalidArgumentError(absl::StrCat("page ", page, " out of range"));
    }
    std::vector<float> state(state_size);
    DecodeStatePage(StatePageFormat::For(options_), pool->data() + page * page_bytes,
                    state.data());
    return state;
  };
  for (int32_t page : final_pages_) {
    absl::StatusOr<std::vector<float>> state = read_page(page);
    if (!state.ok()) return state.status();
    out.final_states.push_back(*std::move(state));
  }
  if (params_.checkpoint_interval > 0) {
    out.checkpoint_states.resize(n);
    for (int32_t i = 0; i < n; ++i) {
      for (int32_t page : checkpoint_slots(i)) {
        if (page == kZeroStatePage) {
          out.checkpoint_states[i].emplace_back();
          continue;
        }
        absl::StatusOr<std::vector<float>> state = read_page(page);
        if (!state.ok()) return state.status();
        out.checkpoint_states[i].push_back(*std::move(state));
      }
    }
  }
  return out;
}

absl::StatusOr<BackendOutputs> RunOnBackend(Backend& backend,
                                            const GdnOptions& options,
                                            const oracle::Inputs& inputs,
                                            EntryPoint entry,
                                            int32_t checkpoint_interval) {
  absl::StatusOr<std::unique_ptr<StagedCall>> call =
      StagedCall::Create(backend, options, inputs, checkpoint_interval);
  if (!call.ok()) return call.status();
  absl::Status st = (*call)->Run(entry);
  if (!st.ok()) return st;
  return (*call)->Fetch();
}

}  // namespace gdn::testing
