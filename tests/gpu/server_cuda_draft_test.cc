// Speculative drafts through the whole service on the cuda backend (per-token
// states written by the recurrent kernels into the draft's pages, the
// engine's lanes and gather), against the float64 oracle: every acceptance
// count 1..T for T in 2..8, two sessions, two layers, interleaved with
// ordinary decode and prefill calls (tests/server/rpc/draft_forward_fixture.h).
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/server/rpc/draft_forward_fixture.h"

namespace gdn {
namespace {

class ServerCudaDraftTest : public testing::DraftForwardFixture {
 protected:
  ServerConfig MakeConfig() override {
    ServerConfig config = testing::SmallServerConfig();
    config.backend.kind = BackendKind::kCuda;
    return config;
  }
  double Tolerance() const override { return 1e-3; }  // as server_cuda_test

  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    DraftForwardFixture::SetUp();
  }
};

TEST_F(ServerCudaDraftTest, EveryAcceptanceCountMatchesTheOracle) { RunEveryAcceptanceCount(); }

}  // namespace
}  // namespace gdn
