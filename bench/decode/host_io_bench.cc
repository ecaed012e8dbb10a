// The device phase of one decode layer call as the server runs it, timed
// on the host per call (wall clock, one call at a time, the engine's spin on
// an event), four ways:
//   copies:  the request's pinned input block (q | k | v | g | beta | cu |
//            page ids, the server's one-upload layout) copied to the device,
//            the kernel, o copied back into pinned memory;
//   mapped:  the kernel reading that pinned block where it lies and writing
//            o into pinned memory itself (zero-copy: no copy on the stream);
//   o_host:  the input block copied, o written into pinned memory by the
//            kernel (no copy back);
//   kernel:  the kernel alone on device buffers (the floor).
// Before timing, each way runs once from identical states: o and the final
// states must be bitwise equal to the copies' way.
//
//   decode_host_io_bench [--batches=1,8,32,64,128,256] [--calls=2000]
//                        [--rounds=3] [--state=fp32|bf16] [--gap_us=0]
//
// --gap_us: the host sleeps this long between calls (untimed), as a server
// waits for a client's next call: the GPU idles in between, as it does
// under a closed-loop client (0: calls back to back).
//
// Shape: Hqk 16, Hv 32, K = V = 128, bf16 activations, direct gating, L2
// norm on (the server's default). Pages rotate over >= 256 MiB so states
// come from HBM, not L2, as in a server with many sessions.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/dtype_convert.h"
#include "kernels/gdn_types.h"
#include "kernels/state_page_codec.h"

namespace gdn::bench {
namespace {

constexpr size_t kRotationBytes = size_t{256} << 20;
constexpr int kRandomPages = 8;  // filled on the host; every other page copies one

std::string Flag(int argc, char** argv, const std::string& name, const std::string& def) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return def;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// Byte offsets of one call's pinned input block (16-byte aligned pieces).
struct BlockLayout {
  size_t q, k, v, g, beta, cu, pages, bytes;
  static BlockLayout For(const LayerShape& s, int batch) {
    auto align = [](size_t n) { return (n + 15) / 16 * 16; };
    const size_t qk = size_t(batch) * s.num_qk_heads * s.head_dim_k * 2;
    const size_t vo = size_t(batch) * s.num_v_heads * s.head_dim_v * 2;
    const size_t gate = size_t(batch) * s.num_v_heads * sizeof(float);
    BlockLayout l;
    l.q = 0;
    l.k = align(l.q + qk);
    l.v = align(l.k + qk);
    l.g = align(l.v + vo);
    l.beta = align(l.g + gate);
    l.cu = align(l.beta + gate);
    l.pages = align(l.cu + (batch + 1) * sizeof(int32_t));
    l.bytes = align(l.pages + 2 * size_t(batch) * sizeof(int32_t));  // initial, final
    return l;
  }
};

// Random bf16 activations and gates (logsigmoid / 16, sigmoid), cu = 0..N.
void FillBlock(char* block, const BlockLayout& l, const LayerShape& s, int batch,
               std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  auto bf16 = [&](size_t at, size_t count) {
    uint16_t* x = reinterpret_cast<uint16_t*>(block + at);
    for (size_t i = 0; i < count; ++i) x[i] = FloatToBf16(normal(rng));
  };
  bf16(l.q, size_t(batch) * s.num_qk_heads * s.head_dim_k);
  bf16(l.k, size_t(batch) * s.num_qk_heads * s.head_dim_k);
  bf16(l.v, size_t(batch) * s.num_v_heads * s.head_dim_v);
  float* g = reinterpret_cast<float*>(block + l.g);
  float* beta = reinterpret_cast<float*>(block + l.beta);
  for (int i = 0; i < batch * s.num_v_heads; ++i) {
    g[i] = -std::log1p(std::exp(-normal(rng))) / 16.0f;
    beta[i] = 1.0f / (1.0f + std::exp(-normal(rng)));
  }
  int32_t* cu = reinterpret_cast<int32_t*>(block + l.cu);
  for (int i = 0; i <= batch; ++i) cu[i] = i;
}

// Page ids of rotation r into the block (in place: initial == final).
void SetPages(char* block, const BlockLayout& l, int batch, int r) {
  int32_t* pages = reinterpret_cast<int32_t*>(block + l.pages);
  for (int i = 0; i < batch; ++i) pages[i] = pages[batch + i] = r * batch + i;
}

cuda::RecurrentParams ParamsOver(const GdnOptions& options, const char* in, const BlockLayout& l,
                                 void* o, char* pool, int64_t page_bytes, int32_t num_pages,
                                 int batch) {
  const LayerShape& s = options.shape;
  cuda::RecurrentParams p;
  p.q = in + l.q;
  p.k = in + l.k;
  p.v = in + l.v;
  p.o = o;
  p.g = reinterpret_cast<const float*>(in + l.g);
  p.beta = reinterpret_cast<const float*>(in + l.beta);
  p.cu_seqlens = reinterpret_cast<const int32_t*>(in + l.cu);
  p.initial_pages = reinterpret_cast<const int32_t*>(in + l.pages);
  p.final_pages = p.initial_pages + batch;
  p.pool_base = pool;
  p.page_bytes = page_bytes;
  p.num_pages = num_pages;
  p.num_seqs = batch;
  p.num_qk_heads = s.num_qk_heads;
  p.num_v_heads = s.num_v_heads;
  p.group_size = s.group_size();
  p.scale = options.effective_scale();
  p.l2_norm_qk = options.l2_norm_qk;
  return p;
}

enum class Arm { kCopies, kMapped, kOHost, kKernel };
constexpr Arm kArms[] = {Arm::kCopies, Arm::kMapped, Arm::kOHost, Arm::kKernel};
constexpr int kNumArms = 4;
const char* ArmName(Arm a) {
  switch (a) {
    case Arm::kCopies: return "copies";
    case Arm::kMapped: return "mapped";
    case Arm::kOHost: return "o_host";
    case Arm::kKernel: return "kernel";
  }
  return "?";
}

struct Buffers {
  char* host_in = nullptr;  // pinned
  char* host_o = nullptr;   // pinned
  char* dev_in = nullptr;
  char* dev_o = nullptr;
  char* pool = nullptr;
};

// One call of `arm` on page rotation r: enqueue, record, spin until done.
absl::Status OneCall(Arm arm, const GdnOptions& options, const BlockLayout& l, const Buffers& b,
                     int64_t page_bytes, int32_t num_pages, int batch, size_t o_bytes,
                     cudaStream_t stream, cudaEvent_t done) {
  const bool mapped = arm == Arm::kMapped;
  const bool o_host = mapped || arm == Arm::kOHost;
  if (arm == Arm::kCopies || arm == Arm::kOHost) {
    GDN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(b.dev_in, b.host_in, l.bytes, cudaMemcpyHostToDevice, stream));
  }
  const cuda::RecurrentParams p =
      ParamsOver(options, mapped ? b.host_in : b.dev_in, l, o_host ? b.host_o : b.dev_o, b.pool,
                 page_bytes, num_pages, batch);
  if (absl::Status s = cuda::LaunchRecurrent(options, p, stream); !s.ok()) return s;
  if (arm == Arm::kCopies) {
    GDN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(b.host_o, b.dev_o, o_bytes, cudaMemcpyDeviceToHost, stream));
  }
  GDN_CUDA_RETURN_IF_ERROR(cudaEventRecord(done, stream));
  for (;;) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) return absl::OkStatus();
    if (e != cudaErrorNotReady) GDN_CUDA_RETURN_IF_ERROR(e);
  }
}

absl::Status RunBatch(const GdnOptions& options, int batch, int calls, int rounds, int gap_us,
                      cudaStream_t stream, std::mt19937_64& rng) {
  const LayerShape& s = options.shape;
  const StatePageLayout pages = StatePageLayout::For(s, options.state_dtype);
  const BlockLayout l = BlockLayout::For(s, batch);
  const size_t o_bytes = size_t(batch) * s.num_v_heads * s.head_dim_v * 2;
  const int rotations = std::max<int>(
      4, static_cast<int>((kRotationBytes + pages.page_bytes * batch - 1) /
                          (pages.page_bytes * batch)));
  const int32_t num_pages = rotations * batch;
  void *host_in, *host_o, *dev_in, *dev_o, *pool;
  GDN_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&host_in, l.bytes, cudaHostAllocPortable));
  GDN_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&host_o, o_bytes, cudaHostAllocPortable));
  GDN_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev_in, l.bytes));
  GDN_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev_o, o_bytes));
  GDN_CUDA_RETURN_IF_ERROR(cudaMalloc(&pool, pages.page_bytes * size_t(num_pages)));
  const Buffers b{static_cast<char*>(host_in), static_cast<char*>(host_o),
                  static_cast<char*>(dev_in), static_cast<char*>(dev_o), static_cast<char*>(pool)};
  cudaEvent_t done;
  GDN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));

  // Random states (fp32 or bf16 normals scaled down) in kRandomPages pages,
  // copied over the rest of the pool.
  {
    std::vector<char> page(pages.page_bytes);
    std::normal_distribution<float> normal;
    const bool bf16 = options.state_dtype == StateDType::kBF16;
    for (int32_t i = 0; i < num_pages; ++i) {
      if (i < kRandomPages) {  // the rest copy these: filling 256 MiB on the host is slow
        for (size_t j = 0; j < page.size() / (bf16 ? 2 : 4); ++j) {
          const float x = 0.1f * normal(rng);
          if (bf16) {
            reinterpret_cast<uint16_t*>(page.data())[j] = FloatToBf16(x);
          } else {
            reinterpret_cast<float*>(page.data())[j] = x;
          }
        }
        GDN_CUDA_RETURN_IF_ERROR(cudaMemcpy(b.pool + pages.page_bytes * i, page.data(),
                                            page.size(), cudaMemcpyHostToDevice));
      } else {
        GDN_CUDA_RETURN_IF_ERROR(cudaMemcpy(b.pool + pages.page_bytes * i,
                                            b.pool + pages.page_bytes * (i % kRandomPages),
                                            pages.page_bytes, cudaMemcpyDeviceToDevice));
      }
    }
  }
  FillBlock(b.host_in, l, s, batch, rng);

  // Same result every way: rotation 0 through copies, then rotations 1
  // and 2 (copies of rotation 0's states) mapped and o_host: o and the
  // final states must be bitwise equal.
  std::vector<char> o_copies(o_bytes), s_copies(pages.page_bytes * batch);
  for (int check = 0; check < 3; ++check) {
    const Arm arm = check == 0 ? Arm::kCopies : check == 1 ? Arm::kMapped : Arm::kOHost;
    char* states = b.pool + pages.page_bytes * batch * check;
    // Rotation 0's states are updated in place by its call: rotation 3
    // keeps them as they were, for the other two.
    if (check == 0) {
      GDN_CUDA_RETURN_IF_ERROR(cudaMemcpy(b.pool + pages.page_bytes * batch * 3, b.pool,
                                          pages.page_bytes * batch, cudaMemcpyDeviceToDevice));
    } else {
      GDN_CUDA_RETURN_IF_ERROR(cudaMemcpy(states, b.pool + pages.page_bytes * batch * 3,
                                          pages.page_bytes * batch, cudaMemcpyDeviceToDevice));
    }
    std::memset(b.host_o, 0xff, o_bytes);
    SetPages(b.host_in, l, batch, check);
    if (absl::Status st = OneCall(arm, options, l, b, pages.page_bytes, num_pages, batch, o_bytes,
                                  stream, done);
        !st.ok()) {
      return st;
    }
    std::vector<char> o(o_bytes), final_states(s_copies.size());
    std::memcpy(o.data(), b.host_o, o_bytes);
    GDN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(final_states.data(), states, final_states.size(), cudaMemcpyDeviceToHost));
    if (check == 0) {
      o_copies = std::move(o);
      s_copies = std::move(final_states);
    } else if (o != o_copies || final_states != s_copies) {
      return absl::InternalError(absl::StrCat(
          "batch ", batch, ": ", ArmName(arm), " and copies disagree (o ",
          o == o_copies ? "equal" : "differs", ", states ",
          final_states == s_copies ? "equal" : "differ", ")"));
    }
  }

  // Timed: arms take turns in rounds; each call moves to the next rotation.
  const Arm* arms = kArms;
  std::vector<double> us[kNumArms];
  int r = 0;
  for (int round = 0; round < rounds; ++round) {
    for (int a = 0; a < kNumArms; ++a) {
      for (int i = 0; i < calls + 50; ++i) {
        SetPages(b.host_in, l, batch, r);
        if (arms[a] == Arm::kKernel) {  // its page ids live on the device
          GDN_CUDA_RETURN_IF_ERROR(cudaMemcpy(b.dev_in + l.pages, b.host_in + l.pages,
                                              2 * batch * sizeof(int32_t),
                                              cudaMemcpyHostToDevice));
        }
        r = (r + 1) % rotations;
        if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
        const auto t0 = std::chrono::steady_clock::now();
        if (absl::Status st = OneCall(arms[a], options, l, b, pages.page_bytes, num_pages, batch,
                                      o_bytes, stream, done);
            !st.ok()) {
          return st;
        }
        const auto t1 = std::chrono::steady_clock::now();
        if (i >= 50) us[a].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
  }
  std::printf("batch %4d  in %8zu B  o %8zu B |", batch, l.bytes, o_bytes);
  for (int a = 0; a < kNumArms; ++a) {
    std::printf("  %s p50 %7.1f p99 %7.1f us", ArmName(arms[a]), Percentile(us[a], 0.5),
                Percentile(us[a], 0.99));
  }
  std::printf("  | p50 / copies: mapped %.2f, o_host %.2f\n",
              Percentile(us[1], 0.5) / Percentile(us[0], 0.5),
              Percentile(us[2], 0.5) / Percentile(us[0], 0.5));
  std::fflush(stdout);
  GDN_CUDA_RETURN_IF_ERROR(cudaEventDestroy(done));
  GDN_CUDA_RETURN_IF_ERROR(cudaFreeHost(b.host_in));
  GDN_CUDA_RETURN_IF_ERROR(cudaFreeHost(b.host_o));
  for (char* ptr : {b.dev_in, b.dev_o, b.pool}) GDN_CUDA_RETURN_IF_ERROR(cudaFree(ptr));
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  std::vector<int> batches;
  const std::string batch_list = Flag(argc, argv, "batches", "1,8,32,64,128,256");
  for (absl::string_view x : absl::StrSplit(batch_list, ',')) {
    batches.push_back(std::atoi(std::string(x).c_str()));
  }
  const int calls = std::atoi(Flag(argc, argv, "calls", "2000").c_str());
  const int rounds = std::atoi(Flag(argc, argv, "rounds", "3").c_str());
  const int gap_us = std::atoi(Flag(argc, argv, "gap_us", "0").c_str());
  GdnOptions options;
  options.shape = {16, 32, 128, 128};
  options.input_dtype = DType::kBF16;
  if (!ParseStateDType(Flag(argc, argv, "state", "fp32"), &options.state_dtype)) {
    std::fprintf(stderr, "--state: fp32 or bf16\n");
    return 2;
  }
  options.gating = GatingMode::kDirect;
  options.l2_norm_qk = true;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  std::printf("device %s, unified addressing %d, can map host memory %d; state %s, %d calls x %d "
              "rounds per arm, %d us between calls\n",
              prop.name, prop.unifiedAddressing, prop.canMapHostMemory,
              std::string(StateDTypeName(options.state_dtype)).c_str(), calls, rounds, gap_us);
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return 1;
  std::mt19937_64 rng(std::random_device{}());
  for (int batch : batches) {
    if (absl::Status s = RunBatch(options, batch, calls, rounds, gap_us, stream, rng); !s.ok()) {
      std::fprintf(stderr, "decode_host_io_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace gdn::bench

int main(int argc, char** argv) { return gdn::bench::Main(argc, argv); }
