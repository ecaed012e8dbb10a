// RequestFactory: the in-place request (BuildParts: tensors referencing the
// pool, a wrapped window as two runs) encodes to exactly the bytes of the
// protobuf request (Build) drawn from the same random state, for both gating
// modes and for calls larger than the pool; and it references the pool
// instead of copying it.
#include "client/bench/request_factory.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gdn::client::bench {
namespace {

v1::LayerConfig Config(const std::string& gating, v1::DType dtype) {
  v1::LayerConfig c;
  c.set_num_layers(2);
  c.set_num_qk_heads(2);
  c.set_num_v_heads(4);
  c.set_head_dim_k(16);
  c.set_head_dim_v(8);
  c.set_activation_dtype(dtype);
  c.set_gating_mode(gating);
  c.set_l2_norm_qk(true);
  return c;
}

std::string Bytes(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(RequestFactoryTest, PartsEncodeToTheProtobufRequest) {
  const uint64_t seed = std::random_device{}();
  for (const char* gating : {"direct", "fused"}) {
    for (v1::DType dtype : {v1::DTYPE_BF16, v1::DTYPE_FP32}) {
      std::mt19937_64 init(seed);
      const RequestFactory factory(Config(gating, dtype), /*pool_rows=*/37, init);
      std::mt19937_64 a(seed + 1), b(seed + 1);
      for (int i = 0; i < 30; ++i) {
        std::vector<SequenceSlot> seqs;
        const int n = 1 + i % 4;
        for (int s = 0; s < n; ++s) seqs.push_back({"id" + std::to_string(s), 5 * s, 1 + (i * 7 + s) % 30});
        const wire::ForwardRequestParts parts = factory.BuildParts(i % 2, seqs, a);
        const v1::ForwardRequest proto = factory.Build(i % 2, seqs, b);
        EXPECT_EQ(Bytes(wire::EncodeForwardRequest(parts)), proto.SerializeAsString())
            << gating << " seed " << seed << " call " << i;
      }
    }
  }
}

TEST(RequestFactoryTest, PartsReferenceThePoolAndOutliveTheFactory) {
  std::mt19937_64 rng(5);
  wire::ForwardRequestParts parts;
  std::string expected;
  {
    auto factory = std::make_unique<RequestFactory>(Config("direct", v1::DTYPE_BF16), 8, rng);
    // 20 rows of an 8-row pool: at least three runs, each inside the pool.
    parts = factory->BuildParts(0, {{"s", 0, 20}}, rng);
    EXPECT_GE(parts.v.data.size(), 3u);
    size_t total = 0;
    for (const wire::BytesRef& r : parts.v.data) {
      EXPECT_NE(r.owner, nullptr);
      EXPECT_LE(r.size, 8u * 4 * 8 * 2);
      total += r.size;
    }
    EXPECT_EQ(total, 20u * 4 * 8 * 2);
    expected = Bytes(wire::EncodeForwardRequest(parts));
  }
  // The factory is gone; the owners keep the pool.
  EXPECT_EQ(Bytes(wire::EncodeForwardRequest(parts)), expected);
}

}  // namespace
}  // namespace gdn::client::bench
