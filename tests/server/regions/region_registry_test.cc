// The registry alone over the cpu backend: registering SYSTEM regions (and
// refusing CUDA ones there), names scoped by owner, resolving references
// with their bounds, and unregistering while a call holds the region.
#include "server/regions/region_registry.h"

#include <cstring>
#include <limits>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "tests/server/regions/shm_object.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;
using gdn::testing::ShmObject;

class RegionRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BackendConfig config;
    config.kind = BackendKind::kCpu;
    config.cpu_threads = 1;
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(config);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    registry_ = std::make_unique<RegionRegistry>(backend_.get());
  }

  static gdn::v1::RegisterRegionRequest System(const std::string& name, const ShmObject& shm,
                                               int64_t offset, int64_t bytes) {
    gdn::v1::RegisterRegionRequest r;
    r.set_name(name);
    r.set_kind(gdn::v1::REGION_SYSTEM);
    r.set_key(shm.name());
    r.set_offset(offset);
    r.set_byte_size(bytes);
    return r;
  }

  static wire::RegionRefField Ref(const std::string& region, int64_t offset, int64_t bytes) {
    return {region, offset, bytes};
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<RegionRegistry> registry_;
};

TEST_F(RegionRegistryTest, SystemRegionResolvesToTheSharedBytes) {
  ShmObject shm(1 << 16);
  std::memcpy(shm.data() + 4096 + 100, "hello", 5);
  ASSERT_TRUE(registry_->Register("", System("r", shm, 4096, 8192)).ok());
  absl::StatusOr<ResolvedRef> ref = registry_->Resolve("", Ref("r", 100, 5), 5, "q");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(std::memcmp(ref->host, "hello", 5), 0);  // the server sees the client's bytes
  EXPECT_EQ(ref->device, ref->host);                 // cpu: the same memory
  std::memcpy(ref->host, "HELLO", 5);                // and the client sees the server's
  EXPECT_EQ(std::memcmp(shm.data() + 4096 + 100, "HELLO", 5), 0);
  ASSERT_EQ(registry_->List("").size(), 1u);
  EXPECT_EQ(registry_->List("")[0].byte_size(), 8192);
}

TEST_F(RegionRegistryTest, RefusesBadRegistrations) {
  ShmObject shm(4096);
  ASSERT_TRUE(registry_->Register("", System("r", shm, 0, 4096)).ok());
  EXPECT_EQ(registry_->Register("", System("r", shm, 0, 4096)).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry_->Register("", System("bad name!", shm, 0, 16)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Register("", System("past-end", shm, 4000, 200)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Register("", System("zero", shm, 0, 0)).code(),
            absl::StatusCode::kInvalidArgument);
  gdn::v1::RegisterRegionRequest missing = System("missing", shm, 0, 16);
  missing.set_key("/gdn-test-no-such-object");
  EXPECT_EQ(registry_->Register("", missing).code(), absl::StatusCode::kNotFound);
  gdn::v1::RegisterRegionRequest cuda;
  cuda.set_name("gpu");
  cuda.set_kind(gdn::v1::REGION_CUDA);
  cuda.set_cuda_ipc_handle(std::string(64, '\0'));
  cuda.set_byte_size(16);
  const absl::Status s = registry_->Register("", cuda);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("--backend=cuda"));
  gdn::v1::RegisterRegionRequest no_kind = System("no-kind", shm, 0, 16);
  no_kind.set_kind(gdn::v1::REGION_KIND_UNSPECIFIED);
  EXPECT_EQ(registry_->Register("", no_kind).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->size(), 1u);  // only the first one
}

TEST_F(RegionRegistryTest, ResolveChecksNameSizeAndBounds) {
  ShmObject shm(4096);
  ASSERT_TRUE(registry_->Register("", System("r", shm, 0, 1024)).ok());
  EXPECT_EQ(registry_->Resolve("", Ref("nope", 0, 16), 16, "q").status().code(),
            absl::StatusCode::kNotFound);
  const absl::Status size = registry_->Resolve("", Ref("r", 0, 16), 32, "k").status();
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(size.message(), HasSubstr("k.ref.byte_size"));
  EXPECT_EQ(registry_->Resolve("", Ref("r", 1000, 32), 32, "v").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Resolve("", Ref("r", -1, 32), 32, "v").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry_->Resolve("", Ref("r", 992, 32), 32, "v").ok());
}

// Found by tests/fuzz/forward_request_reader_fuzz.cc (UBSan): the error
// message computed offset + byte_size in int64, which overflows (undefined)
// for an offset near 2^63; the end is now exact.
TEST_F(RegionRegistryTest, AnOffsetNear2To63IsRefusedWithTheExactRange) {
  ShmObject shm(4096);
  ASSERT_TRUE(registry_->Register("", System("r", shm, 0, 4096)).ok());
  const int64_t far = std::numeric_limits<int64_t>::max() - 8;
  const absl::Status s = registry_->Resolve("", Ref("r", far, 16), 16, "q").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("q.ref: bytes [9223372036854775799, 9223372036854775815) lie outside"));
}

TEST_F(RegionRegistryTest, NamesAreScopedToTheirOwner) {
  ShmObject shm(4096);
  ASSERT_TRUE(registry_->Register("alice", System("r", shm, 0, 4096)).ok());
  EXPECT_TRUE(registry_->Register("bob", System("r", shm, 0, 4096)).ok());  // own namespace
  EXPECT_EQ(registry_->Resolve("carol", Ref("r", 0, 8), 8, "q").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Unregister("carol", "r").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->List("alice").size(), 1u);
  EXPECT_TRUE(registry_->List("carol").empty());
}

TEST_F(RegionRegistryTest, UnregisterRevokesHoldersAndKeepsTheirMemoryMapped) {
  ShmObject shm(4096);
  ASSERT_TRUE(registry_->Register("", System("r", shm, 0, 4096)).ok());
  absl::StatusOr<ResolvedRef> ref = registry_->Resolve("", Ref("r", 0, 8), 8, "q");
  ASSERT_TRUE(ref.ok());
  RegionHold hold;
  hold.Add(ref->region);
  EXPECT_EQ(registry_->List("")[0].calls_in_flight(), 1);
  EXPECT_EQ(hold.FirstRevoked(), nullptr);
  ASSERT_TRUE(registry_->Unregister("", "r").ok());
  ASSERT_NE(hold.FirstRevoked(), nullptr);
  EXPECT_EQ(hold.FirstRevoked()->name, "r");
  std::memcpy(ref->host, "still mapped", 12);  // the holder's mapping outlives the name
  EXPECT_EQ(registry_->Resolve("", Ref("r", 0, 8), 8, "q").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry_->Register("", System("r", shm, 0, 4096)).ok());  // the name is free
}

}  // namespace
}  // namespace gdn
