// RunOnBackend must not let a broken backend pass: outputs it did not write
// come back NaN, stray page writes are reported, page layouts are as
// documented (in place for even sequences, copy-on-write for odd ones).
#include "kernels/testing/backend_runner.h"

#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn::testing {
namespace {

// Forwards everything to the cpu backend except the operator, which a test
// replaces.
class FakeBackend : public Backend {
 public:
  using Op = std::function<absl::Status(const GdnOptions&, const GdnParams&)>;
  explicit FakeBackend(Op op) : cpu_(CreateCpuBackend(1)), op_(std::move(op)) {}
  absl::string_view name() const override { return "fake"; }
  std::string device_description() const override { return "fake"; }
  absl::Status Supports(const GdnOptions& o) const override { return cpu_->Supports(o); }
  absl::Status Decode(const GdnOptions& o, const GdnParams& p) override { return op_(o, p); }
  absl::Status Prefill(const GdnOptions& o, const GdnParams& p) override { return op_(o, p); }
  absl::StatusOr<void*> Allocate(size_t n) override { return cpu_->Allocate(n); }
  void Free(void* p) override { cpu_->Free(p); }
  absl::StatusOr<void*> AllocateHost(size_t n) override { return cpu_->AllocateHost(n); }
  void FreeHost(void* p) override { cpu_->FreeHost(p); }
  absl::Status CopyToDevice(void* d, const void* s, size_t n) override { return cpu_->CopyToDevice(d, s, n); }
  absl::Status CopyToHost(void* d, const void* s, size_t n) override { return cpu_->CopyToHost(d, s, n); }
  absl::Status CopyOnDevice(void* d, const void* s, size_t n) override { return cpu_->CopyOnDevice(d, s, n); }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  DeviceMemoryInfo MemoryInfo() const override { return cpu_->MemoryInfo(); }
  Backend& cpu() { return *cpu_; }

 private:
  std::unique_ptr<Backend> cpu_;
  Op op_;
};

GdnOptions Small() {
  GdnOptions options;
  options.shape = {1, 2, 64, 64};
  options.input_dtype = DType::kF16;
  options.state_dtype = StateDType::kBF16;
  return options;
}

TEST(BackendRunnerTest, UnwrittenOutputsAndStatesComeBackNan) {
  FakeBackend lazy([](const GdnOptions&, const GdnParams&) { return absl::OkStatus(); });
  const oracle::Inputs in = MakeRandomInputs(Small(), {2, 3, 1}, 1, true);
  absl::StatusOr<BackendOutputs> out = RunOnBackend(lazy, Small(), in, EntryPoint::kDecode);
  ASSERT_TRUE(out.ok()) << out.status();
  for (float o : out->o) ASSERT_TRUE(std::isnan(o));
  // Odd sequence 1 writes a fresh page: never written, so NaN.
  for (float s : out->final_states[1]) ASSERT_TRUE(std::isnan(s));
  // Even sequences update in place: untouched, they still hold the initial
  // state (a comparison with the oracle catches that).
  EXPECT_EQ(out->final_states[0], in.initial_states[0]);
}

TEST(BackendRunnerTest, PagesAreInPlaceForEvenAndCopyOnWriteForOdd) {
  std::vector<int32_t> initial, final_pages;
  int32_t num_pages = 0;
  FakeBackend spy([&](const GdnOptions&, const GdnParams& p) {
    num_pages = p.pool.num_pages;
    initial.assign(p.initial_pages, p.initial_pages + p.num_seqs);
    final_pages.assign(p.final_pages, p.final_pages + p.num_seqs);
    return absl::OkStatus();
  });
  oracle::Inputs in = MakeRandomInputs(Small(), {1, 1, 1, 1}, 2, true);
  in.initial_states[2].clear();  // a zero-state sequence
  ASSERT_TRUE(RunOnBackend(spy, Small(), in, EntryPoint::kDecode).ok());
  EXPECT_EQ(initial[0], final_pages[0]);
  EXPECT_NE(initial[1], final_pages[1]);
  EXPECT_EQ(initial[2], kZeroStatePage);
  EXPECT_NE(initial[3], final_pages[3]);
  for (int32_t page : final_pages) {
    EXPECT_GE(page, 0);
    EXPECT_LT(page, num_pages);
  }
}

TEST(BackendRunnerTest, StrayPageWritesAreReported) {
  // Writes the right final pages (copied from the initial ones) but also
  // scribbles on the guard page 0.
  FakeBackend stray([](const GdnOptions&, const GdnParams& p) {
    std::memset(p.pool.base, 0, 16);
    return absl::OkStatus();
  });
  const oracle::Inputs in = MakeRandomInputs(Small(), {2}, 3, true);
  absl::StatusOr<BackendOutputs> out = RunOnBackend(stray, Small(), in, EntryPoint::kPrefill);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("page 0"));
}

TEST(BackendRunnerTest, BackendErrorsPropagate) {
  FakeBackend failing([](const GdnOptions&, const GdnParams&) {
    return absl::UnavailableError("device lost");
  });
  const oracle::Inputs in = MakeRandomInputs(Small(), {2}, 4, false);
  EXPECT_EQ(RunOnBackend(failing, Small(), in, EntryPoint::kPrefill).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(BackendRunnerTest, AllocationsAreFreed) {
  std::unique_ptr<Backend> cpu = CreateCpuBackend(1);
  const size_t before = cpu->MemoryInfo().used_bytes;
  const oracle::Inputs in = MakeRandomInputs(Small(), {5, 2}, 5, true);
  ASSERT_TRUE(RunOnBackend(*cpu, Small(), in, EntryPoint::kPrefill).ok());
  EXPECT_EQ(cpu->MemoryInfo().used_bytes, before);
}

}  // namespace
}  // namespace gdn::testing
