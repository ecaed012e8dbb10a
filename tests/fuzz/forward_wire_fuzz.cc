// Fuzz target: the byte-level Forward codec (proto/forward_wire.h) over
// arbitrary bytes, both directions' scanners on the same input.
//
// Properties, beyond "no crash, no sanitizer finding":
//   - every data span a scan returns lies inside the message (and is read);
//   - what the scanner accepts, protobuf's own parser accepts, with the same
//     fields (the scanner claims to read the plain gdn.v1 wire format; it
//     may refuse more: a tensor field twice, data and ref together);
//   - the encoder writes back what was scanned: Encode(Scan(x)) scans to
//     the same fields.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gdn/v1/gdn.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "proto/forward_wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace gdn::wire {
namespace {

std::string Bytes(const WireMessage& m, WireSpan span) {
  std::string out(span.size, '\0');
  if (span.size > 0) m.CopyTo(span, out.data());
  return out;
}

// The buffer's bytes as one string (a ByteBuffer from the encoder).
WireMessage Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (buffer.Valid() && buffer.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return WireMessage::FromString(std::move(bytes));
}

bool SameRef(const RegionRefField& a, const gdn::v1::RegionRef& b) {
  return a.region == b.region() && a.offset == b.offset() && a.byte_size == b.byte_size();
}

bool SameRef(const RegionRefField& a, const RegionRefField& b) {
  return a.region == b.region && a.offset == b.offset && a.byte_size == b.byte_size;
}

// Something to encode (the encoder omits a default Tensor).
bool HasContent(const TensorField& t) {
  return t.dtype != gdn::v1::DTYPE_UNSPECIFIED || !t.shape.empty() || t.data.size > 0 ||
         t.has_ref;
}

// A scanned tensor against protobuf's parse of the same bytes.
void CheckTensor(const WireMessage& m, const TensorField& t, bool has, const gdn::v1::Tensor& p) {
  FUZZ_CHECK(t.data.offset <= m.size() && t.data.size <= m.size() - t.data.offset);
  const std::string data = Bytes(m, t.data);  // every byte of the span is readable
  FUZZ_CHECK(t.present == has);
  if (!t.present) return;
  FUZZ_CHECK(t.dtype == p.dtype());
  FUZZ_CHECK(t.shape == std::vector<int64_t>(p.shape().begin(), p.shape().end()));
  FUZZ_CHECK(t.has_ref == p.has_ref());
  if (t.has_ref) {
    FUZZ_CHECK(SameRef(t.ref, p.ref()));
  } else {
    FUZZ_CHECK(data == p.data());
  }
}

TensorParts PartsOf(const WireMessage& m, const TensorField& t, std::vector<std::string>* keep) {
  TensorParts p;
  p.dtype = t.dtype;
  p.shape = t.shape;
  if (t.data.size > 0) {
    keep->push_back(Bytes(m, t.data));
    p.data.push_back({keep->back().data(), keep->back().size(), nullptr});
  }
  p.has_ref = t.has_ref;
  p.ref = t.ref;
  return p;
}

void CheckSameTensor(const WireMessage& a, const TensorField& x, const WireMessage& b,
                     const TensorField& y) {
  FUZZ_CHECK(HasContent(x) == y.present);
  if (!y.present) return;
  FUZZ_CHECK(x.dtype == y.dtype && x.shape == y.shape && x.has_ref == y.has_ref);
  FUZZ_CHECK(SameRef(x.ref, y.ref) || !x.has_ref);
  FUZZ_CHECK(Bytes(a, x.data) == Bytes(b, y.data));
}

void FuzzRequest(const std::string& bytes) {
  const WireMessage m = WireMessage::FromString(bytes);
  absl::StatusOr<ForwardRequestFields> f = ScanForwardRequest(m);
  if (!f.ok()) {
    FUZZ_CHECK(f.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  gdn::v1::ForwardRequest p;
  FUZZ_CHECK(p.ParseFromString(bytes));
  FUZZ_CHECK(f->layer == p.layer() && f->request_id == p.request_id());
  FUZZ_CHECK(static_cast<int>(f->sequences.size()) == p.sequences_size());
  for (size_t i = 0; i < f->sequences.size(); ++i) {
    const SequenceField& s = f->sequences[i];
    const gdn::v1::SequenceSpec& q = p.sequences(static_cast<int>(i));
    FUZZ_CHECK(s.session_id == q.session_id() && s.position == q.position() &&
               s.num_tokens == q.num_tokens() && s.draft == q.draft() &&
               s.checkpoint_interval == q.checkpoint_interval());
  }
  const TensorField* mine[] = {&f->q, &f->k, &f->v, &f->g, &f->beta,
                               &f->a, &f->b, &f->a_log, &f->dt_bias};
  const bool has[] = {p.has_q(), p.has_k(),    p.has_v(), p.has_g(),    p.has_beta(),
                      p.has_a(), p.has_b(), p.has_a_log(), p.has_dt_bias()};
  const gdn::v1::Tensor* theirs[] = {&p.q(), &p.k(), &p.v(), &p.g(), &p.beta(),
                                     &p.a(), &p.b(), &p.a_log(), &p.dt_bias()};
  for (int i = 0; i < 9; ++i) CheckTensor(m, *mine[i], has[i], *theirs[i]);
  FUZZ_CHECK(f->has_o_region == p.has_o_region());
  if (f->has_o_region) FUZZ_CHECK(SameRef(f->o_region, p.o_region()));

  // Round trip through the encoder.
  std::vector<std::string> keep;
  keep.reserve(9);  // BytesRefs point into these strings
  ForwardRequestParts parts;
  parts.layer = f->layer;
  parts.sequences = f->sequences;
  parts.request_id = f->request_id;
  parts.has_o_region = f->has_o_region;
  parts.o_region = f->o_region;
  TensorParts* out[] = {&parts.q, &parts.k, &parts.v, &parts.g, &parts.beta,
                        &parts.a, &parts.b, &parts.a_log, &parts.dt_bias};
  for (int i = 0; i < 9; ++i) *out[i] = PartsOf(m, *mine[i], &keep);
  const WireMessage again = Flatten(EncodeForwardRequest(parts));
  absl::StatusOr<ForwardRequestFields> g = ScanForwardRequest(again);
  FUZZ_CHECK(g.ok());
  FUZZ_CHECK(g->layer == f->layer && g->request_id == f->request_id);
  FUZZ_CHECK(g->sequences.size() == f->sequences.size());
  FUZZ_CHECK(g->has_o_region == f->has_o_region);
  if (f->has_o_region) FUZZ_CHECK(SameRef(g->o_region, f->o_region));
  const TensorField* back[] = {&g->q, &g->k, &g->v, &g->g, &g->beta,
                               &g->a, &g->b, &g->a_log, &g->dt_bias};
  for (int i = 0; i < 9; ++i) CheckSameTensor(m, *mine[i], again, *back[i]);
}

void FuzzResponse(const std::string& bytes) {
  const WireMessage m = WireMessage::FromString(bytes);
  absl::StatusOr<ForwardResponseFields> f = ScanForwardResponse(m);
  if (!f.ok()) {
    FUZZ_CHECK(f.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  gdn::v1::ForwardResponse p;
  if (!p.ParseFromString(bytes)) {
    // protobuf also refuses an error_message (any of them: the last wins)
    // that is not UTF-8; the scanner takes its bytes as they are (the client
    // only shows them). Anything else protobuf refuses, the scanner must too.
    google::protobuf::UnknownFieldSet fields;
    FUZZ_CHECK(fields.ParseFromString(bytes));  // the wire format itself is sound
    bool has_error_message = false;
    for (int i = 0; i < fields.field_count(); ++i) {
      const google::protobuf::UnknownField& field = fields.field(i);
      has_error_message |= field.number() == 5 &&
                           field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED;
    }
    FUZZ_CHECK(has_error_message);
    return;
  }
  CheckTensor(m, f->o, p.has_o(), p.o());
  FUZZ_CHECK(f->positions == std::vector<int64_t>(p.positions().begin(), p.positions().end()));
  FUZZ_CHECK(f->request_id == p.request_id() && f->error_code == p.error_code());
  FUZZ_CHECK(f->error_message == p.error_message());

  std::vector<std::string> keep;
  keep.reserve(1);
  ForwardResponseParts parts;
  parts.o = PartsOf(m, f->o, &keep);
  parts.positions = f->positions;
  parts.request_id = f->request_id;
  parts.error_code = f->error_code;
  parts.error_message = f->error_message;
  const WireMessage again = Flatten(EncodeForwardResponse(parts));
  absl::StatusOr<ForwardResponseFields> g = ScanForwardResponse(again);
  FUZZ_CHECK(g.ok());
  CheckSameTensor(m, f->o, again, g->o);
  FUZZ_CHECK(g->positions == f->positions && g->request_id == f->request_id &&
             g->error_code == f->error_code && g->error_message == f->error_message);
}

}  // namespace
}  // namespace gdn::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  gdn::wire::FuzzRequest(bytes);
  gdn::wire::FuzzResponse(bytes);
  return 0;
}
