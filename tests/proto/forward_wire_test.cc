// Tests of proto/forward_wire.h against protobuf's own serializer and parser:
// random messages, split into random slices, scanned field for field; encoded
// messages byte-equal to SerializeAsString; any field order, unpacked shapes,
// unknown fields; duplicates and truncations refused, never a crash.
#include "proto/forward_wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/test_random.h"

namespace gdn::wire {
namespace {

using ::testing::HasSubstr;

std::string RandomBytes(size_t n, std::mt19937_64& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

void FillTensor(gdn::v1::Tensor* t, std::mt19937_64& rng) {
  t->set_dtype(static_cast<gdn::v1::DType>(1 + rng() % 3));
  const int dims = 1 + static_cast<int>(rng() % 3);
  int64_t elems = 1;
  for (int d = 0; d < dims; ++d) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % (d == 0 ? 300 : 40));
    t->add_shape(n);
    elems *= n;
  }
  t->set_data(RandomBytes(static_cast<size_t>(elems) * 2, rng));
}

gdn::v1::ForwardRequest RandomRequest(std::mt19937_64& rng) {
  gdn::v1::ForwardRequest r;
  r.set_layer(static_cast<int32_t>(rng() % 64));
  const int n = 1 + static_cast<int>(rng() % 5);
  for (int i = 0; i < n; ++i) {
    gdn::v1::SequenceSpec* s = r.add_sequences();
    s->set_session_id(absl::StrCat("session-", rng() % 100000, i));
    s->set_position(static_cast<int64_t>(rng() % 100000));
    s->set_num_tokens(1 + static_cast<int32_t>(rng() % 64));
    if (rng() % 3 == 0) s->set_draft(true);
    if (rng() % 3 == 0) s->set_checkpoint_interval(64 << (rng() % 3));
  }
  for (gdn::v1::Tensor* t : {r.mutable_q(), r.mutable_k(), r.mutable_v(), r.mutable_g(),
                             r.mutable_beta()}) {
    FillTensor(t, rng);
  }
  if (rng() % 2) FillTensor(r.mutable_a_log(), rng);
  r.set_request_id(rng());
  return r;
}

// `bytes` as a ByteBuffer of `pieces` random-sized slices (some empty).
grpc::ByteBuffer Sliced(const std::string& bytes, int pieces, std::mt19937_64& rng) {
  std::vector<size_t> cuts = {0, bytes.size()};
  for (int i = 1; i < pieces; ++i) cuts.push_back(bytes.empty() ? 0 : rng() % bytes.size());
  std::sort(cuts.begin(), cuts.end());
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    slices.emplace_back(bytes.data() + cuts[i], cuts[i + 1] - cuts[i]);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

WireMessage Message(const grpc::ByteBuffer& buffer) {
  absl::StatusOr<WireMessage> m = WireMessage::FromByteBuffer(buffer);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

std::string Payload(const WireMessage& m, const TensorField& t) {
  std::string out(t.data.size, '\0');
  m.CopyTo(t.data, out.data());
  return out;
}

void ExpectTensor(const WireMessage& m, const TensorField& got, const gdn::v1::Tensor& want,
                  bool present) {
  EXPECT_EQ(got.present, present);
  EXPECT_EQ(got.dtype, want.dtype());
  EXPECT_EQ(got.shape, std::vector<int64_t>(want.shape().begin(), want.shape().end()));
  EXPECT_EQ(Payload(m, got), want.data());
}

void ExpectFields(const WireMessage& m, const ForwardRequestFields& f,
                  const gdn::v1::ForwardRequest& r) {
  EXPECT_EQ(f.layer, r.layer());
  ASSERT_EQ(f.sequences.size(), static_cast<size_t>(r.sequences_size()));
  for (int i = 0; i < r.sequences_size(); ++i) {
    EXPECT_EQ(f.sequences[i].session_id, r.sequences(i).session_id());
    EXPECT_EQ(f.sequences[i].position, r.sequences(i).position());
    EXPECT_EQ(f.sequences[i].num_tokens, r.sequences(i).num_tokens());
    EXPECT_EQ(f.sequences[i].draft, r.sequences(i).draft());
    EXPECT_EQ(f.sequences[i].checkpoint_interval, r.sequences(i).checkpoint_interval());
  }
  ExpectTensor(m, f.q, r.q(), r.has_q());
  ExpectTensor(m, f.k, r.k(), r.has_k());
  ExpectTensor(m, f.v, r.v(), r.has_v());
  ExpectTensor(m, f.g, r.g(), r.has_g());
  ExpectTensor(m, f.beta, r.beta(), r.has_beta());
  ExpectTensor(m, f.a_log, r.a_log(), r.has_a_log());
  EXPECT_FALSE(f.a.present);
  EXPECT_EQ(f.request_id, r.request_id());
}

TEST(ForwardWireTest, ScanMatchesProtobufOverRandomSlicing) {
  const uint64_t seed = testing::FreshSeed();
  SCOPED_TRACE(absl::StrCat("GDN_TEST_SEED=", seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 40; ++trial) {
    const gdn::v1::ForwardRequest r = RandomRequest(rng);
    const std::string bytes = r.SerializeAsString();
    const WireMessage m = Message(Sliced(bytes, 1 + trial % 9, rng));
    EXPECT_EQ(m.size(), bytes.size());
    absl::StatusOr<ForwardRequestFields> f = ScanForwardRequest(m);
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectFields(m, *f, r);
  }
}

TEST(ForwardWireTest, ForEachPieceVisitsASpanAcrossSlicesInOrder) {
  std::mt19937_64 rng(7);
  const std::string bytes = RandomBytes(1000, rng);
  const WireMessage m = Message(Sliced(bytes, 12, rng));
  for (size_t offset : {0, 1, 333, 999}) {
    const WireSpan span{offset, std::min<size_t>(500, 1000 - offset)};
    std::string seen;
    m.ForEachPiece(span, [&](const char* p, size_t n) { seen.append(p, n); });
    EXPECT_EQ(seen, bytes.substr(offset, span.size));
  }
}

TEST(ForwardWireTest, AnyFieldOrderUnknownFieldsAndUnpackedShapesScan) {
  std::mt19937_64 rng(11);
  const gdn::v1::ForwardRequest r = RandomRequest(rng);
  // Protobuf merges concatenated messages: tensors first, then the rest.
  gdn::v1::ForwardRequest tensors = r, rest;
  tensors.clear_layer();
  tensors.clear_sequences();
  tensors.clear_request_id();
  rest.set_layer(r.layer());
  *rest.mutable_sequences() = r.sequences();
  rest.set_request_id(r.request_id());
  std::string bytes = tensors.SerializeAsString();
  {  // an unknown varint field, an unknown length field
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteTag((99 << 3) | 0);
    out.WriteVarint64(12345);
    out.WriteTag((100 << 3) | 2);
    out.WriteVarint32(3);
    out.WriteRaw("xyz", 3);
  }
  bytes += rest.SerializeAsString();
  gdn::v1::ForwardRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));  // protobuf agrees it is valid
  const WireMessage m = Message(Sliced(bytes, 5, rng));
  absl::StatusOr<ForwardRequestFields> f = ScanForwardRequest(m);
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectFields(m, *f, parsed);

  // A Tensor whose shape comes one element per tag (unpacked).
  std::string unpacked;
  {
    google::protobuf::io::StringOutputStream stream(&unpacked);
    google::protobuf::io::CodedOutputStream out(&stream);
    std::string tensor;
    {
      google::protobuf::io::StringOutputStream ts(&tensor);
      google::protobuf::io::CodedOutputStream t(&ts);
      t.WriteTag((1 << 3) | 0);
      t.WriteVarint32(gdn::v1::DTYPE_BF16);
      for (int64_t d : {3, 4}) {
        t.WriteTag((2 << 3) | 0);
        t.WriteVarint64(d);
      }
      t.WriteTag((3 << 3) | 2);
      t.WriteVarint32(24);
      t.WriteRaw(std::string(24, 'q').data(), 24);
    }
    out.WriteTag((3 << 3) | 2);
    out.WriteVarint32(static_cast<uint32_t>(tensor.size()));
    out.WriteRaw(tensor.data(), static_cast<int>(tensor.size()));
  }
  const WireMessage u = WireMessage::FromString(unpacked);
  absl::StatusOr<ForwardRequestFields> uf = ScanForwardRequest(u);
  ASSERT_TRUE(uf.ok()) << uf.status();
  EXPECT_EQ(uf->q.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Payload(u, uf->q), std::string(24, 'q'));
}

TEST(ForwardWireTest, ATensorTwiceIsRefused) {
  std::mt19937_64 rng(3);
  gdn::v1::ForwardRequest one;
  FillTensor(one.mutable_v(), rng);
  const std::string bytes = one.SerializeAsString() + one.SerializeAsString();
  absl::StatusOr<ForwardRequestFields> f = ScanForwardRequest(WireMessage::FromString(bytes));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr("v appears twice"));
}

// Found by tests/fuzz/forward_wire_fuzz.cc: bytes protobuf's parser refuses
// must not scan. A length-delimited field longer than what is left was
// silently cut to the end of the message (PushLimit clamps); a ref twice
// merged in protobuf but not here; a ref then an empty data field is data
// in protobuf (the oneof's last) but was a ref here; a tag varint over 5
// bytes had its high bits dropped, and so had a length over 5 bytes.
TEST(ForwardWireTest, BytesProtobufRefusesDoNotScan) {
  using namespace std::string_literals;
  // Refused by protobuf's parser too.
  const std::string refused[] = {
      "\x1a\x05\x08\x02"s,                  // q: 5 bytes claimed, 2 left
      "\x1a\x04\x12\x05\x02\x03"s,          // q.shape: 5 packed bytes claimed, 2 left
      "\x12\x09\x0a\x01s"s,                 // sequences[0]: 9 claimed, 3 left
      "\x6a\x07\x0a\x01r"s,                 // o_region: 7 claimed, 3 left
      "\x9a\x80\x80\x80\x80\x01\x00"s,     // q's tag in 6 bytes
      "\x02\x00"s,                           // field number 0
      // An unknown group (field 100) holding a tag in 6 bytes: skipping it
      // with CodedInputStream's lenient tags accepted it (the fuzzer, seed 1).
      "\xa3\x06\x88\x80\x80\x80\x80\x01\x00\xa4\x06"s,
      "\xa3\x06\x08\x01"s,                   // a group the message ends inside
      "\xa3\x06\x08\x01\xac\x06"s,           // closed by field 101's end-group
      // Lengths over 5 bytes: CodedInputStream keeps the low 32 bits (here
      // 0), protobuf's parser refuses them (the fuzzer, seed 1, CI).
      "\x1a\x0a\x22\x80\x80\x80\x80\x80\x80\x80\x80\x10"s,  // q.ref
      "\x1a\x0a\x1a\x80\x80\x80\x80\x80\x80\x80\x80\x10"s,  // q.data
      "\x1a\x07\x12\x80\x80\x80\x80\x80\x00"s,      // q.shape, 6-byte length 0
      "\x12\x80\x80\x80\x80\x80\x00"s,                // sequences[0]
      "\xa2\x06\x80\x80\x80\x80\x80\x00"s,           // unknown field 100
      "\x1a\x06\x22\x80\x80\x80\x80\x08"s,           // q.ref: 2^31 in 5 bytes
  };
  for (const std::string& bytes : refused) {
    SCOPED_TRACE(absl::CEscape(bytes));
    gdn::v1::ForwardRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(bytes));  // the reference refuses them
    absl::StatusOr<ForwardRequestFields> f = ScanForwardRequest(WireMessage::FromString(bytes));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  }
  // Parsed by protobuf, but not as the scanner read them: refused, like a
  // tensor field twice.
  const std::string ambiguous[] = {
      "\x1a\x08\x22\x02\x18\x04\x22\x02\x10\x01"s,  // q.ref twice (protobuf merges)
      "\x1a\x06\x22\x02\x18\x04\x1a\x00"s,  // q: ref, then empty data (protobuf: data)
  };
  for (const std::string& bytes : ambiguous) {
    SCOPED_TRACE(absl::CEscape(bytes));
    absl::StatusOr<ForwardRequestFields> f = ScanForwardRequest(WireMessage::FromString(bytes));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  }
  const std::string responses[] = {
      "\x0a\x49"s,              // o: 73 bytes claimed, none left
      "\x12\x03\x01"s,          // positions: 3 packed bytes claimed, 1 left
      "\xfd\xff\xff\xff\xff\xff\xff\xff\xff\x0f\x00\x00\x00\x00"s,  // a 10-byte tag
      "\x4b\x88\x80\x80\x80\x80\x01\x00\x4c"s,  // a 6-byte tag inside a group
      "\x2a\x80\x80\x80\x80\x80\x80\x00"s,       // error_message: 7-byte length
      "\x0a\x09\x1a\x80\x80\x80\x80\x80\x80\x80\x00"s,  // o.data: 8-byte length
  };
  for (const std::string& bytes : responses) {
    SCOPED_TRACE(absl::CEscape(bytes));
    gdn::v1::ForwardResponse parsed;
    EXPECT_FALSE(parsed.ParseFromString(bytes));
    absl::StatusOr<ForwardResponseFields> f = ScanForwardResponse(WireMessage::FromString(bytes));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// SequenceSpecs are read directly in their usual form and by protobuf's
// parser otherwise: every form here scans to protobuf's fields, or is
// refused where protobuf refuses it.
TEST(ForwardWireTest, SequencesInAnyFormScanAsProtobufParsesThem) {
  using namespace std::string_literals;
  auto request = [](const std::string& spec) {  // sequences[0] = spec
    return "\x08\x01\x12"s + static_cast<char>(spec.size()) + spec;
  };
  const std::string accepted[] = {
      "\x0a\x02s1\x10\x05\x18\x01"s,                  // the usual form
      "\x18\x02\x10\x07\x0a\x02s2\x20\x01\x28\x40"s,  // reversed, draft, interval
      "\x0a\x01x\x0a\x02yy\x10\x01\x10\x02"s,         // fields twice: the last wins
      "\x0a\x03\xc3\xa9z\x10\x01"s,                    // a UTF-8 id ("\u00e9z")
      "\x0a\x01u\x30\x07\x18\x01"s,                    // an unknown field 6
      "\x0a\x01w\x15\x01\x00\x00\x00\x18\x01"s,      // position as fixed32: unknown
      // num_tokens -1 as a 10-byte varint (int32: the low 32 bits).
      "\x0a\x01n\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"s,
      ""s,                                              // an empty spec
  };
  for (const std::string& spec : accepted) {
    const std::string bytes = request(spec);
    SCOPED_TRACE(absl::CEscape(bytes));
    gdn::v1::ForwardRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    absl::StatusOr<ForwardRequestFields> f = ScanForwardRequest(WireMessage::FromString(bytes));
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectFields(WireMessage::FromString(bytes), *f, parsed);
  }
  const std::string refused[] = {
      "\x0a\x02\xff\xfe\x10\x01"s,  // an id that is not UTF-8
      "\x0a\x05" "ab"s,              // an id longer than the spec (split: "\x05ab" is one escape)
      "\x10"s,                          // a varint cut short
  };
  for (const std::string& spec : refused) {
    const std::string bytes = request(spec);
    SCOPED_TRACE(absl::CEscape(bytes));
    gdn::v1::ForwardRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(bytes));
    EXPECT_EQ(ScanForwardRequest(WireMessage::FromString(bytes)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// An unknown group that protobuf accepts (nested, closed by its own
// end-group) is skipped, in requests and responses alike.
TEST(ForwardWireTest, WellFormedUnknownGroupsAreSkipped) {
  using namespace std::string_literals;
  // field 100 { 1: 1, 10 { 2: 2 } }
  const std::string group = "\xa3\x06\x08\x01\x53\x10\x02\x54\xa4\x06"s;
  gdn::v1::ForwardRequest request;
  ASSERT_TRUE(request.ParseFromString(group + "\x08\x03"s));  // layer 3 after it
  absl::StatusOr<ForwardRequestFields> f =
      ScanForwardRequest(WireMessage::FromString(group + "\x08\x03"s));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->layer, 3);
  gdn::v1::ForwardResponse response;
  ASSERT_TRUE(response.ParseFromString(group + "\x18\x07"s));  // request_id 7 after it
  absl::StatusOr<ForwardResponseFields> g =
      ScanForwardResponse(WireMessage::FromString(group + "\x18\x07"s));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->request_id, 7u);
}

TEST(ForwardWireTest, TruncatedAndCorruptedBytesNeverCrashAndSpansStayInside) {
  const uint64_t seed = testing::FreshSeed();
  SCOPED_TRACE(absl::StrCat("GDN_TEST_SEED=", seed));
  std::mt19937_64 rng(seed);
  gdn::v1::ForwardRequest r = RandomRequest(rng);
  r.mutable_v()->set_data(std::string(4000, 'V'));  // easy to find below
  const std::string bytes = r.SerializeAsString();
  // Cut inside v's data: always an error naming it (v's own length already
  // claims more bytes than are left).
  const size_t v_end = bytes.find(r.v().data()) + r.v().data().size();
  absl::StatusOr<ForwardRequestFields> cut =
      ScanForwardRequest(WireMessage::FromString(bytes.substr(0, v_end - 1)));
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("v: truncated"));
  for (int trial = 0; trial < 500; ++trial) {
    std::string damaged = bytes.substr(0, rng() % (bytes.size() + 1));
    for (int flips = static_cast<int>(rng() % 4); flips > 0 && !damaged.empty(); --flips) {
      damaged[rng() % damaged.size()] = static_cast<char>(rng());
    }
    const WireMessage m = Message(Sliced(damaged, 3, rng));
    absl::StatusOr<ForwardRequestFields> f = ScanForwardRequest(m);
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    for (const TensorField* t : {&f->q, &f->k, &f->v, &f->g, &f->beta, &f->a, &f->b,
                                 &f->a_log, &f->dt_bias}) {
      EXPECT_LE(t->data.offset + t->data.size, m.size());
    }
  }
}

// The same request through EncodeForwardRequest, payloads in several runs.
ForwardRequestParts PartsOf(const gdn::v1::ForwardRequest& r, std::mt19937_64& rng) {
  ForwardRequestParts p;
  p.layer = r.layer();
  for (const gdn::v1::SequenceSpec& s : r.sequences()) {
    p.sequences.push_back(
        {s.session_id(), s.position(), s.num_tokens(), s.draft(), s.checkpoint_interval()});
  }
  auto tensor = [&rng](const gdn::v1::Tensor& t, bool has) {
    TensorParts out;
    if (!has) return out;
    out.dtype = t.dtype();
    out.shape.assign(t.shape().begin(), t.shape().end());
    const std::string& d = t.data();
    const size_t cut = d.empty() ? 0 : rng() % d.size();
    out.data.push_back({d.data(), cut, nullptr});
    out.data.push_back({d.data() + cut, d.size() - cut, nullptr});
    return out;
  };
  p.q = tensor(r.q(), r.has_q());
  p.k = tensor(r.k(), r.has_k());
  p.v = tensor(r.v(), r.has_v());
  p.g = tensor(r.g(), r.has_g());
  p.beta = tensor(r.beta(), r.has_beta());
  p.a_log = tensor(r.a_log(), r.has_a_log());
  p.request_id = r.request_id();
  return p;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(ForwardWireTest, EncodedRequestIsByteEqualToProtobufs) {
  const uint64_t seed = testing::FreshSeed();
  SCOPED_TRACE(absl::StrCat("GDN_TEST_SEED=", seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 20; ++trial) {
    const gdn::v1::ForwardRequest r = RandomRequest(rng);
    EXPECT_EQ(Flatten(EncodeForwardRequest(PartsOf(r, rng))), r.SerializeAsString());
  }
}

TEST(ForwardWireTest, ResponseEncodesLikeProtobufAndScansBack) {
  std::mt19937_64 rng(5);
  gdn::v1::ForwardResponse r;
  FillTensor(r.mutable_o(), rng);
  for (int64_t p : {0, 17, 100000, -3}) r.add_positions(p);
  r.set_request_id(42);
  auto block = std::make_shared<std::string>(r.o().data());
  bool released = false;
  {
    ForwardResponseParts parts;
    parts.o.dtype = r.o().dtype();
    parts.o.shape.assign(r.o().shape().begin(), r.o().shape().end());
    // The payload references `block`, which gRPC keeps alive while needed.
    std::shared_ptr<const void> owner(block.get(), [block, &released](const void*) {
      released = true;
    });
    parts.o.data.push_back({block->data(), block->size(), owner});
    parts.positions.assign(r.positions().begin(), r.positions().end());
    parts.request_id = r.request_id();
    const grpc::ByteBuffer encoded = EncodeForwardResponse(parts);
    owner.reset();
    parts.o.data.clear();
    EXPECT_FALSE(released);  // the buffer still holds it
    EXPECT_EQ(Flatten(encoded), r.SerializeAsString());
    const WireMessage m = Message(encoded);
    absl::StatusOr<ForwardResponseFields> f = ScanForwardResponse(m);
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectTensor(m, f->o, r.o(), true);
    EXPECT_EQ(f->positions, std::vector<int64_t>(r.positions().begin(), r.positions().end()));
    EXPECT_EQ(f->request_id, 42u);
  }
  EXPECT_TRUE(released);  // gone with the last slice

  gdn::v1::ForwardResponse error;
  error.set_error_code(9);
  error.set_error_message("expected position 12");
  ForwardResponseParts error_parts;
  error_parts.error_code = 9;
  error_parts.error_message = "expected position 12";
  EXPECT_EQ(Flatten(EncodeForwardResponse(error_parts)), error.SerializeAsString());
  absl::StatusOr<ForwardResponseFields> f =
      ScanForwardResponse(WireMessage::FromString(error.SerializeAsString()));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->error_code, 9);
  EXPECT_EQ(f->error_message, "expected position 12");
  EXPECT_FALSE(f->o.present);
}

}  // namespace
}  // namespace gdn::wire
