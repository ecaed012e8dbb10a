// The no-copy split (client/forward_parts_split.h) against the protobuf one
// (client/forward_split.h): for random shapes, limits and payload layouts
// (tensors as one run or cut into several runs, as a wrapped pool window
// is), the parts encode to exactly the bytes of SplitForwardRequest's parts,
// with the same sequence maps and the same errors; and the wire size
// computed without encoding is the encoded size.
#include "client/forward_parts_split.h"

#include <random>
#include <string>
#include <vector>

#include "client/forward_split.h"
#include "gtest/gtest.h"

namespace gdn::client {
namespace {

struct Request {
  v1::ForwardRequest proto;
  wire::ForwardRequestParts parts;
  std::vector<std::shared_ptr<std::string>> payloads;  // what parts reference
};

// Cuts `bytes` into 1..4 runs at random points (a wrapped pool window is two).
std::vector<wire::BytesRef> RandomRuns(const std::shared_ptr<std::string>& bytes,
                                       std::mt19937_64& rng) {
  std::vector<size_t> cuts = {0, bytes->size()};
  const int extra = static_cast<int>(rng() % 4);
  for (int i = 0; i < extra && !bytes->empty(); ++i) cuts.push_back(rng() % bytes->size());
  std::sort(cuts.begin(), cuts.end());
  std::vector<wire::BytesRef> runs;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    if (cuts[i + 1] > cuts[i]) runs.push_back({bytes->data() + cuts[i], cuts[i + 1] - cuts[i], bytes});
  }
  return runs;
}

void AddTensor(Request& r, v1::Tensor* proto, wire::TensorParts* parts, int64_t rows,
               std::vector<int64_t> inner, int elem_bytes, std::mt19937_64& rng) {
  auto data = std::make_shared<std::string>();
  int64_t row_bytes = elem_bytes;
  for (int64_t d : inner) row_bytes *= d;
  data->resize(rows * row_bytes);
  for (char& c : *data) c = static_cast<char>(rng());
  const v1::DType dtype = elem_bytes == 2 ? v1::DTYPE_BF16 : v1::DTYPE_FP32;
  proto->set_dtype(dtype);
  parts->dtype = dtype;
  proto->add_shape(rows);
  parts->shape.push_back(rows);
  for (int64_t d : inner) {
    proto->add_shape(d);
    parts->shape.push_back(d);
  }
  proto->set_data(*data);
  parts->data = RandomRuns(data, rng);
  r.payloads.push_back(data);
}

Request RandomRequest(std::mt19937_64& rng, bool fused) {
  Request r;
  const int layer = static_cast<int>(rng() % 40);
  r.proto.set_layer(layer);
  r.parts.layer = layer;
  const uint64_t id = rng() % 3 == 0 ? 0 : rng();
  r.proto.set_request_id(id);
  r.parts.request_id = id;
  const int sessions = 1 + static_cast<int>(rng() % 6);
  int64_t t = 0;
  for (int i = 0; i < sessions; ++i) {
    const std::string sid = "r-" + std::to_string(rng() % 1000) + "/s" + std::to_string(i);
    const int64_t position = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 100000);
    const int tokens = 1 + static_cast<int>(rng() % (rng() % 2 ? 3 : 80));
    v1::SequenceSpec* s = r.proto.add_sequences();
    s->set_session_id(sid);
    s->set_position(position);
    s->set_num_tokens(tokens);
    // Some short sequences are speculative drafts: never split across parts.
    // and some keep states (checkpoint_interval): neither is ever split.
    const bool draft = tokens >= 2 && tokens <= 8 && rng() % 2 == 0;
    const int32_t interval = !draft && rng() % 4 == 0 ? 64 : 0;
    s->set_draft(draft);
    s->set_checkpoint_interval(interval);
    r.parts.sequences.push_back({sid, position, tokens, draft, interval});
    t += tokens;
  }
  const int64_t hqk = 1 + rng() % 3, hv = hqk * (1 + rng() % 2), k = 8 << (rng() % 3);
  const int act = rng() % 2 ? 2 : 4;
  AddTensor(r, r.proto.mutable_q(), &r.parts.q, t, {hqk, k}, act, rng);
  AddTensor(r, r.proto.mutable_k(), &r.parts.k, t, {hqk, k}, act, rng);
  AddTensor(r, r.proto.mutable_v(), &r.parts.v, t, {hv, k}, act, rng);
  if (fused) {
    AddTensor(r, r.proto.mutable_a(), &r.parts.a, t, {hv}, 4, rng);
    AddTensor(r, r.proto.mutable_b(), &r.parts.b, t, {hv}, 4, rng);
    // [Hv], not packed over tokens: "rows" = Hv of one value each.
    AddTensor(r, r.proto.mutable_a_log(), &r.parts.a_log, hv, {}, 4, rng);
    AddTensor(r, r.proto.mutable_dt_bias(), &r.parts.dt_bias, hv, {}, 4, rng);
  } else {
    AddTensor(r, r.proto.mutable_g(), &r.parts.g, t, {hv}, 4, rng);
    AddTensor(r, r.proto.mutable_beta(), &r.parts.beta, t, {hv}, 4, rng);
  }
  return r;
}

std::string Encoded(const wire::ForwardRequestParts& parts) {
  grpc::ByteBuffer buffer = wire::EncodeForwardRequest(parts);
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

std::string Serialized(const v1::ForwardRequest& r) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  r.SerializeToCodedStream(&coded);
  return out;
}

TEST(ForwardPartsSplitTest, WireSizeIsTheEncodedSize) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 200; ++i) {
    const Request r = RandomRequest(rng, i % 3 == 0);
    EXPECT_EQ(ForwardRequestWireSize(r.parts), static_cast<int64_t>(r.proto.ByteSizeLong()));
    EXPECT_EQ(ForwardRequestWireSize(r.parts), static_cast<int64_t>(Encoded(r.parts).size()));
  }
}

TEST(ForwardPartsSplitTest, SameBytesAndMapsAsTheProtobufSplit) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  int split_cases = 0;
  for (int i = 0; i < 300; ++i) {
    const Request r = RandomRequest(rng, i % 4 == 0);
    const int64_t size = static_cast<int64_t>(r.proto.ByteSizeLong());
    // Limits from "far too small" through "just fits" to roomy.
    const int64_t limit = kForwardMessageSlackBytes + static_cast<int64_t>(rng() % (size + 2));
    absl::StatusOr<std::vector<ForwardPart>> want = SplitForwardRequest(r.proto, limit);
    absl::StatusOr<std::vector<ForwardPartRefs>> got = SplitForwardRequestParts(r.parts, limit);
    ASSERT_EQ(got.ok(), want.ok()) << "seed " << seed << " case " << i << ": "
                                   << (got.ok() ? want.status() : got.status());
    if (!want.ok()) {
      EXPECT_EQ(got.status(), want.status()) << "seed " << seed << " case " << i;
      continue;
    }
    ASSERT_EQ(got->size(), want->size()) << "seed " << seed << " case " << i;
    split_cases += want->size() > 1;
    for (size_t p = 0; p < want->size(); ++p) {
      EXPECT_EQ(Encoded((*got)[p].request), Serialized((*want)[p].request))
          << "seed " << seed << " case " << i << " part " << p;
      EXPECT_EQ((*got)[p].original_sequence, (*want)[p].original_sequence);
    }
  }
  EXPECT_GT(split_cases, 20) << "the limits should force many splits";
}

TEST(ForwardPartsSplitTest, PartsReferenceTheCallersBytes) {
  std::mt19937_64 rng(7);
  // Packed rows well over the slack, so that a third of them plus the fixed
  // fields (the limit below) makes 3 or 4 parts.
  auto packed_bytes = [](const Request& r) {
    int64_t n = 0;
    for (const v1::Tensor* t : {&r.proto.q(), &r.proto.k(), &r.proto.v(), &r.proto.g(),
                                &r.proto.beta()}) {
      n += static_cast<int64_t>(t->data().size());
    }
    return n;
  };
  Request r = RandomRequest(rng, false);
  while (packed_bytes(r) < 4 * kForwardMessageSlackBytes) r = RandomRequest(rng, false);
  for (size_t i = 0; i < r.parts.sequences.size(); ++i) {  // splittable everywhere
    r.parts.sequences[i].draft = false;
    r.parts.sequences[i].checkpoint_interval = 0;
    r.proto.mutable_sequences(static_cast<int>(i))->clear_draft();
    r.proto.mutable_sequences(static_cast<int>(i))->clear_checkpoint_interval();
  }
  const int64_t packed = packed_bytes(r);
  const int64_t limit = kForwardMessageSlackBytes +
                        static_cast<int64_t>(r.proto.ByteSizeLong()) - packed + packed / 3;
  absl::StatusOr<std::vector<ForwardPartRefs>> parts = SplitForwardRequestParts(r.parts, limit);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_GT(parts->size(), 1u);
  const std::string& v = *r.payloads[2];  // q, k, v in order
  for (const ForwardPartRefs& p : *parts) {
    for (const wire::BytesRef& run : p.request.v.data) {
      const char* at = static_cast<const char*>(run.data);
      EXPECT_GE(at, v.data());
      EXPECT_LE(at + run.size, v.data() + v.size());
    }
  }
}

TEST(ForwardPartsSplitTest, BadRequestsFailLikeTheProtobufSplit) {
  std::mt19937_64 rng(3);
  Request r = RandomRequest(rng, false);
  r.proto.mutable_sequences(0)->set_num_tokens(0);
  r.parts.sequences[0].num_tokens = 0;
  EXPECT_EQ(SplitForwardRequestParts(r.parts, 1 << 20).status(),
            SplitForwardRequest(r.proto, 1 << 20).status());
}

}  // namespace
}  // namespace gdn::client
