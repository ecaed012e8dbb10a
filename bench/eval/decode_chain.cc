#include "bench/eval/decode_chain.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/dtype_convert.h"

namespace gdn::eval {
namespace {

// [B * n, width] sequence-major rows -> [n, B] step-major rows.
std::vector<float> StepMajor(const std::vector<float>& src, int batch, int steps,
                             size_t width) {
  if (src.empty()) return {};
  std::vector<float> dst(src.size());
  for (int i = 0; i < batch; ++i) {
    for (int t = 0; t < steps; ++t) {
      std::memcpy(&dst[(size_t(t) * batch + i) * width],
                  &src[(size_t(i) * steps + t) * width], width * sizeof(float));
    }
  }
  return dst;
}

}  // namespace

DecodeChain::~DecodeChain() {
  (void)backend_.Synchronize();
  for (void* p : allocations_) backend_.Free(p);
}

absl::StatusOr<void*> DecodeChain::Upload(const void* host, size_t bytes) {
  if (bytes == 0) return nullptr;
  absl::StatusOr<void*> ptr = backend_.Allocate(bytes);
  if (!ptr.ok()) return ptr.status();
  allocations_.push_back(*ptr);
  if (host != nullptr) {
    if (absl::Status st = backend_.CopyToDevice(*ptr, host, bytes); !st.ok()) return st;
    // Host vectors here are temporaries.
    if (absl::Status st = backend_.Synchronize(); !st.ok()) return st;
  }
  return *ptr;
}

absl::StatusOr<std::unique_ptr<DecodeChain>> DecodeChain::Create(
    Backend& backend, const GdnOptions& options, const oracle::Inputs& in) {
  const LayerShape& s = options.shape;
  const int batch = in.num_seqs();
  if (batch < 1) return absl::InvalidArgumentError("DecodeChain: no sequences");
  const int steps = in.cu_seqlens[1] - in.cu_seqlens[0];
  for (int i = 0; i < batch; ++i) {
    if (in.cu_seqlens[i + 1] - in.cu_seqlens[i] != steps) {
      return absl::InvalidArgumentError("DecodeChain: sequences must have equal lengths");
    }
  }
  std::unique_ptr<DecodeChain> c(new DecodeChain(backend, options));
  c->batch_ = batch;
  c->steps_ = steps;
  const size_t qk_width = size_t(s.num_qk_heads) * s.head_dim_k;
  const size_t v_width = size_t(s.num_v_heads) * s.head_dim_v;
  const size_t esize = DTypeSize(options.input_dtype);
  c->qk_row_bytes_ = qk_width * esize;
  c->v_row_bytes_ = v_width * esize;
  c->gate_row_floats_ = s.num_v_heads;

  auto upload_activation = [&](const std::vector<float>& seq_major,
                               size_t width) -> absl::StatusOr<void*> {
    std::vector<float> rows = StepMajor(seq_major, batch, steps, width);
    std::vector<uint8_t> bytes(rows.size() * esize);
    ConvertFromFloat(rows.data(), rows.size(), options.input_dtype, bytes.data());
    return c->Upload(bytes.data(), bytes.size());
  };
  auto upload_gate = [&](const std::vector<float>& seq_major) -> absl::StatusOr<const float*> {
    std::vector<float> rows = StepMajor(seq_major, batch, steps, s.num_v_heads);
    absl::StatusOr<void*> p = c->Upload(rows.data(), rows.size() * sizeof(float));
    if (!p.ok()) return p.status();
    return static_cast<const float*>(*p);
  };
  auto upload_floats = [&](const std::vector<float>& v) -> absl::StatusOr<const float*> {
    absl::StatusOr<void*> p = c->Upload(v.data(), v.size() * sizeof(float));
    if (!p.ok()) return p.status();
    return static_cast<const float*>(*p);
  };

  GdnParams& p = c->base_;
  p.num_seqs = batch;
  p.total_tokens = batch;
  for (int i = 0; i <= batch; ++i) c->cu_host_.push_back(i);
  p.cu_seqlens_host = c->cu_host_.data();
  absl::StatusOr<void*> ptr;
  if (!(ptr = c->Upload(c->cu_host_.data(), c->cu_host_.size() * 4)).ok()) return ptr.status();
  p.cu_seqlens = static_cast<const int32_t*>(*ptr);
  if (!(ptr = upload_activation(in.q, qk_width)).ok()) return ptr.status();
  p.q = *ptr;
  if (!(ptr = upload_activation(in.k, qk_width)).ok()) return ptr.status();
  p.k = *ptr;
  if (!(ptr = upload_activation(in.v, v_width)).ok()) return ptr.status();
  p.v = *ptr;
  if (!(ptr = c->Upload(nullptr, size_t(steps) * batch * c->v_row_bytes_)).ok()) return ptr.status();
  p.o = *ptr;
  absl::StatusOr<const float*> f;
  if (!(f = upload_gate(in.g)).ok()) return f.status();
  p.g = *f;
  if (!(f = upload_gate(in.beta)).ok()) return f.status();
  p.beta = *f;
  if (!(f = upload_gate(in.a)).ok()) return f.status();
  p.a = *f;
  if (!(f = upload_gate(in.b)).ok()) return f.status();
  p.b = *f;
  if (!(f = upload_floats(in.A_log)).ok()) return f.status();
  p.A_log = *f;
  if (!(f = upload_floats(in.dt_bias)).ok()) return f.status();
  p.dt_bias = *f;

  // Pool: page 0 unused, sequence i lives in page i + 1.
  const StatePageLayout layout = StatePageLayout::For(s, options.state_dtype);
  std::vector<uint8_t> pool(layout.page_bytes * (batch + 1), 0);
  std::vector<int32_t> first_pages(batch), own_pages(batch);
  for (int i = 0; i < batch; ++i) {
    own_pages[i] = i + 1;
    const std::vector<float>& state = in.initial_states[i];
    first_pages[i] = state.empty() ? kZeroStatePage : i + 1;
    uint8_t* page = pool.data() + layout.page_bytes * (i + 1);
    for (size_t e = 0; e < state.size(); ++e) {
      if (options.state_dtype == StateDType::kF32) {
        std::memcpy(page + 4 * e, &state[e], 4);
      } else {
        const uint16_t h = FloatToBf16(state[e]);
        std::memcpy(page + 2 * e, &h, 2);
      }
    }
  }
  if (!(ptr = c->Upload(pool.data(), pool.size())).ok()) return ptr.status();
  p.pool.base = *ptr;
  p.pool.page_bytes = static_cast<int64_t>(layout.page_bytes);
  p.pool.num_pages = batch + 1;
  p.pool.dtype = options.state_dtype;
  if (!(ptr = c->Upload(first_pages.data(), batch * 4)).ok()) return ptr.status();
  p.initial_pages = static_cast<const int32_t*>(*ptr);
  if (!(ptr = c->Upload(own_pages.data(), batch * 4)).ok()) return ptr.status();
  p.final_pages = static_cast<const int32_t*>(*ptr);
  c->steady_pages_ = p.final_pages;
  return c;
}

absl::Status DecodeChain::Step(int step) {
  if (step < 0 || step >= steps_) return absl::OutOfRangeError("DecodeChain: step");
  GdnParams p = base_;
  const size_t row = size_t(step) * batch_;
  auto offset = [](const void* base, size_t bytes) -> const char* {
    return base == nullptr ? nullptr : static_cast<const char*>(base) + bytes;
  };
  auto gate = [&](const float* base) -> const float* {
    return base == nullptr ? nullptr : base + row * gate_row_floats_;
  };
  p.q = offset(base_.q, row * qk_row_bytes_);
  p.k = offset(base_.k, row * qk_row_bytes_);
  p.v = offset(base_.v, row * v_row_bytes_);
  p.o = static_cast<char*>(base_.o) + row * v_row_bytes_;
  p.g = gate(base_.g);
  p.beta = gate(base_.beta);
  p.a = gate(base_.a);
  p.b = gate(base_.b);
  if (step > 0) p.initial_pages = steady_pages_;
  return backend_.Decode(options_, p);
}

absl::Status DecodeChain::RunAll() {
  for (int t = 0; t < steps_; ++t) {
    if (absl::Status st = Step(t); !st.ok()) return st;
  }
  return backend_.Synchronize();
}

absl::StatusOr<testing::BackendOutputs> DecodeChain::Fetch() {
  const LayerShape& s = options_.shape;
  const size_t v_width = size_t(s.num_v_heads) * s.head_dim_v;
  std::vector<uint8_t> o_bytes(size_t(steps_) * batch_ * v_row_bytes_);
  const size_t page_bytes = static_cast<size_t>(base_.pool.page_bytes);
  std::vector<uint8_t> pool(page_bytes * (batch_ + 1));
  absl::Status st = backend_.CopyToHost(o_bytes.data(), base_.o, o_bytes.size());
  if (st.ok()) st = backend_.CopyToHost(pool.data(), base_.pool.base, pool.size());
  if (st.ok()) st = backend_.Synchronize();
  if (!st.ok()) return st;
  testing::BackendOutputs out;
  std::vector<float> step_major(size_t(steps_) * batch_ * v_width);
  ConvertToFloat(o_bytes.data(), options_.input_dtype, step_major.size(), step_major.data());
  out.o.resize(step_major.size());
  for (int i = 0; i < batch_; ++i) {
    for (int t = 0; t < steps_; ++t) {
      std::memcpy(&out.o[(size_t(i) * steps_ + t) * v_width],
                  &step_major[(size_t(t) * batch_ + i) * v_width], v_width * sizeof(float));
    }
  }
  const size_t state_size = size_t(s.num_v_heads) * s.head_dim_k * s.head_dim_v;
  for (int i = 0; i < batch_; ++i) {
    std::vector<float> state(state_size);
    const uint8_t* src = pool.data() + page_bytes * (i + 1);
    if (options_.state_dtype == StateDType::kF32) {
      std::memcpy(state.data(), src, state_size * 4);
    } else {
      for (size_t e = 0; e < state_size; ++e) {
        uint16_t h;
        std::memcpy(&h, src + 2 * e, 2);
        state[e] = Bf16ToFloat(h);
      }
    }
    out.final_states.push_back(std::move(state));
  }
  return out;
}

}  // namespace gdn::eval
