// The cuda backend's BackendStream: the gather kernel (many items, host and
// device sources, every alignment) and the plain-copy path land every byte
// where the list says; WaitFor orders two streams; decode / prefill on a
// stream match the backend's own entry points bit for bit.
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn {
namespace {

class CudaStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<std::unique_ptr<Backend>> b = CreateCudaBackend(0);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
  }
  std::unique_ptr<Backend> backend_;
};

// Gathers `layout` (src offset, bytes, dst offset) from host pinned or device
// memory into a device buffer and checks every byte.
void CheckGather(Backend& backend, BackendStream& stream, bool device_source, int items_wanted) {
  std::mt19937_64 rng(items_wanted * 7 + device_source);
  const size_t source_bytes = 3 << 20;
  absl::StatusOr<void*> host = backend.AllocateHost(source_bytes);
  ASSERT_TRUE(host.ok());
  char* src_host = static_cast<char*>(*host);
  for (size_t i = 0; i < source_bytes; ++i) src_host[i] = static_cast<char>(rng());
  const char* src = src_host;
  void* device_src = nullptr;
  if (device_source) {
    absl::StatusOr<void*> d = backend.Allocate(source_bytes);
    ASSERT_TRUE(d.ok());
    device_src = *d;
    ASSERT_TRUE(backend.CopyToDevice(device_src, src_host, source_bytes).ok());
    ASSERT_TRUE(backend.Synchronize().ok());
    src = static_cast<const char*>(device_src);
    ASSERT_TRUE(stream.WaitForBackend().ok());
  }
  std::vector<GatherCopy> items;
  std::vector<char> expected(4 << 20, 0);
  uint64_t dst = 0;
  while (static_cast<int>(items.size()) < items_wanted) {
    // Mostly 16-byte aligned rows, some odd ones.
    const uint64_t off = (rng() % (source_bytes / 2)) & ~uint64_t{rng() % 3 == 0 ? 0 : 15};
    const uint64_t bytes = rng() % 4 == 0 ? 1 + rng() % 1000 : 16 * (1 + rng() % 8000);
    if (dst + bytes > expected.size()) break;
    AppendGatherCopies(src + off, dst, bytes, &items);
    std::memcpy(expected.data() + dst, src_host + off, bytes);
    dst += bytes + (rng() % 2 ? 0 : 4);
  }
  absl::StatusOr<void*> out = backend.Allocate(expected.size());
  absl::StatusOr<void*> list = backend.Allocate(items.size() * sizeof(GatherCopy) + 16);
  ASSERT_TRUE(out.ok() && list.ok());
  std::vector<char> zeros(expected.size(), 0);
  ASSERT_TRUE(stream.CopyToDevice(*out, zeros.data(), zeros.size()).ok());
  ASSERT_TRUE(stream.CopyToDevice(*list, items.data(), items.size() * sizeof(GatherCopy)).ok());
  ASSERT_TRUE(stream.Gather(*out, items.data(), static_cast<const GatherCopy*>(*list),
                            static_cast<int>(items.size())).ok());
  std::vector<char> got(expected.size());
  ASSERT_TRUE(stream.CopyToHost(got.data(), *out, got.size()).ok());
  ASSERT_TRUE(stream.Record().ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  absl::StatusOr<bool> done = stream.Query();
  ASSERT_TRUE(done.ok() && *done);
  EXPECT_TRUE(got == expected) << items.size() << " items, device source " << device_source;
  backend.Free(*out);
  backend.Free(*list);
  if (device_src != nullptr) backend.Free(device_src);
  backend.FreeHost(src_host);
}

TEST_F(CudaStreamTest, GatherLandsEveryByteFromHostAndDeviceSources) {
  absl::StatusOr<std::unique_ptr<BackendStream>> stream = backend_->CreateStream(true);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (bool device_source : {false, true}) {
    for (int items : {1, 2, 3, 40, 700}) CheckGather(*backend_, **stream, device_source, items);
  }
}

TEST_F(CudaStreamTest, WaitForOrdersOneStreamAfterAnother) {
  absl::StatusOr<std::unique_ptr<BackendStream>> a = backend_->CreateStream(false);
  absl::StatusOr<std::unique_ptr<BackendStream>> b = backend_->CreateStream(true);
  ASSERT_TRUE(a.ok() && b.ok());
  const size_t bytes = 64 << 20;  // long enough that b would overtake a
  std::vector<char> big(bytes, 7), got(bytes, 0);
  absl::StatusOr<void*> host = backend_->AllocateHost(bytes);
  absl::StatusOr<void*> dev = backend_->Allocate(bytes);
  ASSERT_TRUE(host.ok() && dev.ok());
  std::memcpy(*host, big.data(), bytes);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE((*a)->CopyToDevice(*dev, *host, bytes).ok());
    ASSERT_TRUE((*a)->Record().ok());
    ASSERT_TRUE((*b)->WaitFor(**a).ok());
    ASSERT_TRUE((*b)->CopyToHost(got.data(), *dev, bytes).ok());
    ASSERT_TRUE((*b)->Record().ok());
    ASSERT_TRUE((*b)->Synchronize().ok());
    EXPECT_TRUE(got == big);
    std::memset(got.data(), 0, bytes);
  }
  backend_->Free(*dev);
  backend_->FreeHost(*host);
}

TEST_F(CudaStreamTest, DecodeAndPrefillOnAStreamMatchTheBackendBitForBit) {
  absl::StatusOr<std::unique_ptr<BackendStream>> stream = backend_->CreateStream(true);
  ASSERT_TRUE(stream.ok());
  GdnOptions options;
  options.shape = {4, 8, 128, 128};
  options.input_dtype = DType::kBF16;
  for (bool prefill : {false, true}) {
    const std::vector<int> lens = prefill ? std::vector<int>{300, 65} : std::vector<int>{1, 4, 8};
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, 5, true);
    const testing::EntryPoint entry =
        prefill ? testing::EntryPoint::kPrefill : testing::EntryPoint::kDecode;
    absl::StatusOr<testing::BackendOutputs> direct =
        testing::RunOnBackend(*backend_, options, inputs, entry);
    ASSERT_TRUE(direct.ok()) << direct.status();
    absl::StatusOr<std::unique_ptr<testing::StagedCall>> staged =
        testing::StagedCall::Create(*backend_, options, inputs);
    ASSERT_TRUE(staged.ok());
    ASSERT_TRUE((*stream)->WaitForBackend().ok());  // the staged pages
    const GdnParams& p = (*staged)->params();
    ASSERT_TRUE((prefill ? (*stream)->Prefill(options, p) : (*stream)->Decode(options, p)).ok());
    ASSERT_TRUE((*stream)->Record().ok());
    ASSERT_TRUE((*stream)->Synchronize().ok());
    absl::StatusOr<testing::BackendOutputs> on_stream = (*staged)->Fetch();
    ASSERT_TRUE(on_stream.ok()) << on_stream.status();
    EXPECT_EQ(on_stream->o, direct->o);
    EXPECT_EQ(on_stream->final_states, direct->final_states);
  }
}

}  // namespace
}  // namespace gdn
