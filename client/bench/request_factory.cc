#include "client/bench/request_factory.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/gdn_types.h"
#include "proto/tensor_codec.h"

namespace gdn::client::bench {
namespace {

std::vector<float> Randn(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& x : out) x = normal(rng);
  return out;
}

// Rows of `dim` values scaled to unit L2 norm (q, k when the server does not
// normalise them itself).
void NormalizeRows(std::vector<float>* x, int dim) {
  for (size_t r = 0; r + dim <= x->size(); r += dim) {
    double sum = 0;
    for (int i = 0; i < dim; ++i) sum += double((*x)[r + i]) * (*x)[r + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum + 1e-6));
    for (int i = 0; i < dim; ++i) (*x)[r + i] *= inv;
  }
}

}  // namespace

RequestFactory::RequestFactory(const v1::LayerConfig& c, int pool_rows, std::mt19937_64& rng)
    : config_(c), fused_(c.gating_mode() == "fused"), pool_rows_(std::max(1, pool_rows)) {
  DType act = DType::kBF16;
  wire::FromProtoDType(c.activation_dtype(), &act);
  const int64_t t = pool_rows_;
  const int64_t hqk = c.num_qk_heads(), hv = c.num_v_heads();
  const int64_t dk = c.head_dim_k(), dv = c.head_dim_v();
  auto make_pool = [&](Pool* pool, DType dtype, std::vector<int64_t> row_shape,
                       const std::vector<float>& values) {
    std::vector<int64_t> shape = {t};
    shape.insert(shape.end(), row_shape.begin(), row_shape.end());
    v1::Tensor tensor = wire::MakeTensor(dtype, shape, values.data());
    pool->dtype = tensor.dtype();
    pool->bytes = std::move(*tensor.mutable_data());
    pool->row_bytes = pool->bytes.size() / t;
    pool->row_shape = std::move(row_shape);
  };
  auto pools = std::make_shared<Pools>();
  std::vector<float> q = Randn(t * hqk * dk, rng), k = Randn(t * hqk * dk, rng);
  if (!c.l2_norm_qk()) {
    NormalizeRows(&q, static_cast<int>(dk));
    NormalizeRows(&k, static_cast<int>(dk));
  }
  make_pool(&pools->q, act, {hqk, dk}, q);
  make_pool(&pools->k, act, {hqk, dk}, k);
  make_pool(&pools->v, act, {hv, dv}, Randn(t * hv * dv, rng));
  std::vector<float> x = Randn(t * hv, rng), y = Randn(t * hv, rng);
  if (fused_) {
    // Qwen3-Next's initialisation: A in [1, 16], dt_bias small.
    std::uniform_real_distribution<float> a_range(1.0f, 16.0f);
    std::vector<float> a_log(hv), dt_bias = Randn(hv, rng);
    for (float& a : a_log) a = std::log(a_range(rng));
    pools->a_log = wire::MakeTensor(DType::kF32, {hv}, a_log.data());
    pools->dt_bias = wire::MakeTensor(DType::kF32, {hv}, dt_bias.data());
  } else {
    for (float& g : x) g = -std::log1p(std::exp(-g)) / 16.0f;  // logsigmoid / 16
    for (float& b : y) b = 1.0f / (1.0f + std::exp(-b));       // sigmoid
  }
  make_pool(&pools->gate_x, DType::kF32, {hv}, x);
  make_pool(&pools->gate_y, DType::kF32, {hv}, y);
  pools_ = std::move(pools);
}

std::vector<std::pair<const char*, size_t>> RequestFactory::PoolSpans() const {
  std::vector<std::pair<const char*, size_t>> spans;
  for (const Pool* p : {&pools_->q, &pools_->k, &pools_->v, &pools_->gate_x, &pools_->gate_y}) {
    spans.emplace_back(p->bytes.data(), p->bytes.size());
  }
  for (const v1::Tensor* t : {&pools_->a_log, &pools_->dt_bias}) {
    if (!t->data().empty()) spans.emplace_back(t->data().data(), t->data().size());
  }
  return spans;
}

int64_t RequestFactory::FirstRow(std::mt19937_64& rng, int64_t rows) const {
  // A window that fits never wraps: each tensor is then one run of its pool
  // (what a region reference needs: shm_transport.h).
  const int64_t last = rows <= pool_rows_ ? pool_rows_ - rows : pool_rows_ - 1;
  return std::uniform_int_distribution<int64_t>(0, last)(rng);
}

wire::TensorParts RequestFactory::TensorRows(const Pool& pool, int64_t first_row,
                                             int64_t rows) const {
  wire::TensorParts out;
  out.dtype = pool.dtype;
  out.shape.reserve(1 + pool.row_shape.size());
  out.shape.push_back(rows);
  out.shape.insert(out.shape.end(), pool.row_shape.begin(), pool.row_shape.end());
  for (int64_t done = 0; done < rows;) {
    const int64_t row = (first_row + done) % pool_rows_;
    const int64_t n = std::min<int64_t>(rows - done, pool_rows_ - row);
    out.data.push_back(
        {pool.bytes.data() + row * pool.row_bytes, static_cast<size_t>(n) * pool.row_bytes, pools_});
    done += n;
  }
  return out;
}

wire::TensorParts RequestFactory::WholeTensor(const v1::Tensor& t) const {
  wire::TensorParts out;
  out.dtype = t.dtype();
  out.shape.assign(t.shape().begin(), t.shape().end());
  out.data.push_back({t.data().data(), t.data().size(), pools_});
  return out;
}

wire::ForwardRequestParts RequestFactory::BuildParts(int32_t layer,
                                                     const std::vector<SequenceSlot>& sequences,
                                                     std::mt19937_64& rng) const {
  wire::ForwardRequestParts r;
  r.layer = layer;
  r.sequences.reserve(sequences.size());
  int64_t t = 0;
  for (const SequenceSlot& s : sequences) {
    r.sequences.push_back({s.session_id, s.position, s.num_tokens, s.draft, s.checkpoint_interval});
    t += s.num_tokens;
  }
  const int64_t first = FirstRow(rng, t);
  const Pools& p = *pools_;
  r.q = TensorRows(p.q, first, t);
  r.k = TensorRows(p.k, first, t);
  r.v = TensorRows(p.v, first, t);
  if (fused_) {
    r.a = TensorRows(p.gate_x, first, t);
    r.b = TensorRows(p.gate_y, first, t);
    r.a_log = WholeTensor(p.a_log);
    r.dt_bias = WholeTensor(p.dt_bias);
  } else {
    r.g = TensorRows(p.gate_x, first, t);
    r.beta = TensorRows(p.gate_y, first, t);
  }
  return r;
}

void RequestFactory::FillTensor(const Pool& pool, int64_t first_row, int64_t rows,
                                v1::Tensor* out) const {
  out->set_dtype(pool.dtype);
  out->add_shape(rows);
  for (int64_t d : pool.row_shape) out->add_shape(d);
  std::string* data = out->mutable_data();
  data->resize(rows * pool.row_bytes);
  int64_t done = 0;
  while (done < rows) {
    const int64_t row = (first_row + done) % pool_rows_;
    const int64_t n = std::min<int64_t>(rows - done, pool_rows_ - row);
    std::memcpy(data->data() + done * pool.row_bytes, pool.bytes.data() + row * pool.row_bytes,
                n * pool.row_bytes);
    done += n;
  }
}

v1::ForwardRequest RequestFactory::Build(int32_t layer, const std::vector<SequenceSlot>& sequences,
                                         std::mt19937_64& rng) const {
  v1::ForwardRequest r;
  r.set_layer(layer);
  int64_t t = 0;
  for (const SequenceSlot& s : sequences) {
    v1::SequenceSpec* spec = r.add_sequences();
    spec->set_session_id(s.session_id);
    spec->set_position(s.position);
    spec->set_num_tokens(s.num_tokens);
    if (s.draft) spec->set_draft(true);
    if (s.checkpoint_interval != 0) spec->set_checkpoint_interval(s.checkpoint_interval);
    t += s.num_tokens;
  }
  const int64_t first = FirstRow(rng, t);
  const Pools& p = *pools_;
  FillTensor(p.q, first, t, r.mutable_q());
  FillTensor(p.k, first, t, r.mutable_k());
  FillTensor(p.v, first, t, r.mutable_v());
  if (fused_) {
    FillTensor(p.gate_x, first, t, r.mutable_a());
    FillTensor(p.gate_y, first, t, r.mutable_b());
    *r.mutable_a_log() = p.a_log;
    *r.mutable_dt_bias() = p.dt_bias;
  } else {
    FillTensor(p.gate_x, first, t, r.mutable_g());
    FillTensor(p.gate_y, first, t, r.mutable_beta());
  }
  return r;
}

}  // namespace gdn::client::bench
