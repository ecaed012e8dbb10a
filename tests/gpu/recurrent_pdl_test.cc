// Programmatic dependent launch of the recurrent kernels (LaunchRecurrent's
// `pdl`): a chain of decode launches back to back on one stream, in place on
// the same pages, each with its own staged inputs, every variant and state
// dtype, launched directly and captured into a CUDA graph. Each launch's
// prologue may overlap the previous launch, but its state reads must see that
// launch's writes: every step must match the float64 oracle run from the
// previous step's stored state, and the whole chain (every output and the
// final pages) must equal, bit for bit, the same chain launched without PDL
// (PDL changes when a kernel starts, never what it computes: any difference
// is a read that raced a write).
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/dtype_convert.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

constexpr int kSteps = 24;
constexpr int kSeqs = 5;

struct StepBuffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *g = nullptr, *beta = nullptr;
  int32_t* cu = nullptr;
};

class PdlChain {
 public:
  PdlChain(Backend& backend, const GdnOptions& options) : backend_(backend), options_(options) {}
  ~PdlChain() {
    for (void* p : allocations_) backend_.Free(p);
  }

  void* Alloc(size_t bytes) {
    absl::StatusOr<void*> p = backend_.Allocate(bytes);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return nullptr;
    allocations_.push_back(*p);
    return *p;
  }

  void Upload(void* dst, const void* src, size_t bytes) {
    EXPECT_TRUE(backend_.CopyToDevice(dst, src, bytes).ok());
    EXPECT_TRUE(backend_.Synchronize().ok());
  }

  void UploadAs(void* dst, const std::vector<float>& values, DType dtype) {
    std::vector<uint8_t> bytes(values.size() * DTypeSize(dtype));
    ConvertFromFloat(values.data(), values.size(), dtype, bytes.data());
    Upload(dst, bytes.data(), bytes.size());
  }

  std::vector<float> Download(const void* src, size_t n, DType dtype) {
    std::vector<uint8_t> bytes(n * DTypeSize(dtype));
    EXPECT_TRUE(backend_.CopyToHost(bytes.data(), src, bytes.size()).ok());
    EXPECT_TRUE(backend_.Synchronize().ok());
    std::vector<float> out(n);
    ConvertToFloat(bytes.data(), dtype, n, out.data());
    return out;
  }

 private:
  Backend& backend_;
  GdnOptions options_;
  std::vector<void*> allocations_;
};

// What a chain leaves behind, as raw bytes: every step's o, then the pages.
struct ChainBytes {
  std::vector<uint8_t> outputs;
  std::vector<uint8_t> pages;
};

// A bf16 state is rounded after every step and the oracle chain re-rounds
// its own state, so one-ulp differences (2^-9 relative) can add up over the
// chain: at most one per step.
double ChainStateTolerance(const GdnOptions& options) {
  return options.state_dtype == StateDType::kF32 ? StateTolerance(options)
                                                 : std::max(5e-3, kSteps / 512.0);
}

void RunChain(Backend& backend, const GdnOptions& options, cuda::RecurrentVariant variant,
              bool captured, bool pdl, uint64_t seed, ChainBytes* bytes) {
  auto* cuda_backend = dynamic_cast<cuda::CudaBackend*>(&backend);
  ASSERT_NE(cuda_backend, nullptr);
  cudaStream_t stream = cuda_backend->stream();
  std::mt19937_64 rng(seed);
  const LayerShape& s = options.shape;
  const StatePageLayout layout = StatePageLayout::For(s, options.state_dtype);
  const DType state_as = options.state_dtype == StateDType::kF32 ? DType::kF32 : DType::kBF16;
  const size_t state_elems = size_t(s.num_v_heads) * s.head_dim_k * s.head_dim_v;
  PdlChain chain(backend, options);

  // Pages 0..kSeqs-1 in place; random initial states (one sequence from zero).
  char* pool = static_cast<char*>(chain.Alloc(layout.page_bytes * kSeqs));
  std::vector<int32_t> pages(kSeqs), initial_first(kSeqs);
  for (int i = 0; i < kSeqs; ++i) pages[i] = initial_first[i] = i;
  initial_first[3] = kZeroStatePage;
  std::vector<std::vector<float>> states(kSeqs);
  {
    const oracle::Inputs seed_inputs =
        testing::MakeRandomInputs(options, std::vector<int>(kSeqs, 1), rng(), true);
    for (int i = 0; i < kSeqs; ++i) {
      states[i] = i == 3 ? std::vector<float>() : seed_inputs.initial_states[i];
      if (i != 3) chain.UploadAs(pool + layout.page_bytes * i, states[i], state_as);
    }
  }
  auto* pages_dev = static_cast<int32_t*>(chain.Alloc(kSeqs * 4));
  auto* first_dev = static_cast<int32_t*>(chain.Alloc(kSeqs * 4));
  chain.Upload(pages_dev, pages.data(), kSeqs * 4);
  chain.Upload(first_dev, initial_first.data(), kSeqs * 4);

  // Every step's inputs staged before any launch.
  std::vector<oracle::Inputs> inputs(kSteps);
  std::vector<StepBuffers> buffers(kSteps);
  const size_t es = DTypeSize(options.input_dtype);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<int> lens(kSeqs);
    for (int& l : lens) l = rng() % 2 ? 1 : 1 + static_cast<int>(rng() % kMaxDecodeTokens);
    inputs[step] = testing::MakeRandomInputs(options, lens, rng(), false);
    const oracle::Inputs& in = inputs[step];
    const size_t t = in.total_tokens();
    StepBuffers& b = buffers[step];
    b.q = chain.Alloc(t * s.num_qk_heads * s.head_dim_k * es);
    b.k = chain.Alloc(t * s.num_qk_heads * s.head_dim_k * es);
    b.v = chain.Alloc(t * s.num_v_heads * s.head_dim_v * es);
    b.o = chain.Alloc(t * s.num_v_heads * s.head_dim_v * es);
    b.g = chain.Alloc(t * s.num_v_heads * 4);
    b.beta = chain.Alloc(t * s.num_v_heads * 4);
    b.cu = static_cast<int32_t*>(chain.Alloc((kSeqs + 1) * 4));
    chain.UploadAs(b.q, in.q, options.input_dtype);
    chain.UploadAs(b.k, in.k, options.input_dtype);
    chain.UploadAs(b.v, in.v, options.input_dtype);
    chain.Upload(b.g, in.g.data(), in.g.size() * 4);
    chain.Upload(b.beta, in.beta.data(), in.beta.size() * 4);
    chain.Upload(b.cu, in.cu_seqlens.data(), (kSeqs + 1) * 4);
  }

  // The chain: back to back, no synchronisation in between.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (captured) {
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  }
  absl::Status launch = absl::OkStatus();
  for (int step = 0; step < kSteps && launch.ok(); ++step) {
    const StepBuffers& b = buffers[step];
    cuda::RecurrentParams p;
    p.q = b.q;
    p.k = b.k;
    p.v = b.v;
    p.o = b.o;
    p.g = static_cast<const float*>(b.g);
    p.beta = static_cast<const float*>(b.beta);
    p.cu_seqlens = b.cu;
    p.initial_pages = step == 0 ? first_dev : pages_dev;
    p.final_pages = pages_dev;
    p.pool_base = pool;
    p.page_bytes = layout.page_bytes;
    p.num_pages = kSeqs;
    p.num_seqs = kSeqs;
    p.num_qk_heads = s.num_qk_heads;
    p.num_v_heads = s.num_v_heads;
    p.group_size = s.group_size();
    p.scale = options.effective_scale();
    p.l2_norm_qk = options.l2_norm_qk;
    launch = cuda::LaunchRecurrent(options, p, stream, variant, pdl);
  }
  if (captured) {
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(launch.ok()) << launch;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  }
  ASSERT_TRUE(launch.ok()) << launch;
  ASSERT_TRUE(backend.Synchronize().ok());
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);

  // The oracle chain, from each step's stored (state-dtype) state.
  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    oracle::Inputs in = inputs[step];
    in.initial_states = states;
    const oracle::Outputs want = oracle::Run(options, in);
    const std::vector<float> o =
        chain.Download(buffers[step].o, want.o.size(), options.input_dtype);
    const auto o_err = testing::Compare(o.data(), want.o.data(), want.o.size());
    EXPECT_EQ(o_err.nonfinite, 0);
    EXPECT_LE(o_err.max_abs_rel, OutputTolerance(options)) << testing::ToString(o_err);
    for (int i = 0; i < kSeqs; ++i) {
      std::vector<float> next(want.final_states[i].begin(), want.final_states[i].end());
      RoundThrough(state_as, next.data(), next.size());
      states[i] = std::move(next);
    }
    if (o_err.max_abs_rel > OutputTolerance(options)) break;
  }
  for (int i = 0; i < kSeqs; ++i) {
    const std::vector<float> got =
        chain.Download(pool + layout.page_bytes * i, state_elems, state_as);
    std::vector<double> want(states[i].begin(), states[i].end());
    const auto s_err = testing::Compare(got.data(), want.data(), want.size());
    EXPECT_LE(s_err.max_abs_rel, ChainStateTolerance(options)) << "final page " << i;
  }

  // Raw bytes for the PDL / plain comparison.
  for (int step = 0; step < kSteps; ++step) {
    const size_t n = inputs[step].total_tokens() * size_t(s.num_v_heads) * s.head_dim_v * es;
    const size_t at = bytes->outputs.size();
    bytes->outputs.resize(at + n);
    ASSERT_TRUE(backend.CopyToHost(bytes->outputs.data() + at, buffers[step].o, n).ok());
  }
  bytes->pages.resize(layout.page_bytes * kSeqs);
  ASSERT_TRUE(backend.CopyToHost(bytes->pages.data(), pool, bytes->pages.size()).ok());
  ASSERT_TRUE(backend.Synchronize().ok());
}

TEST_F(CudaBackendTest, PdlChainMatchesOracleEveryVariant) {
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    for (auto variant : {cuda::RecurrentVariant::kSmall, cuda::RecurrentVariant::kWide,
                         cuda::RecurrentVariant::kPersistent}) {
      // kWide is compiled for fp32 states only (UncompiledVariantsAreInvalidArgument).
      if (variant == cuda::RecurrentVariant::kWide && st != StateDType::kF32) continue;
      for (bool captured : {false, true}) {
        const uint64_t seed = FreshSeed();
        SCOPED_TRACE(absl::StrCat("seed ", seed, " variant ", cuda::RecurrentVariantName(variant),
                                  " state ", StateDTypeName(st), captured ? " graph" : " stream"));
        GdnOptions options;
        options.shape = {4, 8, 128, 128};
        options.input_dtype = DType::kBF16;
        options.state_dtype = st;
        options.gating = GatingMode::kDirect;
        options.l2_norm_qk = true;
        ChainBytes plain, pdl;
        RunChain(*backend_, options, variant, captured, /*pdl=*/false, seed, &plain);
        RunChain(*backend_, options, variant, captured, /*pdl=*/true, seed, &pdl);
        ASSERT_EQ(plain.outputs.size(), pdl.outputs.size());
        EXPECT_TRUE(plain.outputs == pdl.outputs) << "outputs differ with PDL";
        EXPECT_TRUE(plain.pages == pdl.pages) << "final pages differ with PDL";
      }
    }
  }
}

}  // namespace
}  // namespace gdn::gpu_test
