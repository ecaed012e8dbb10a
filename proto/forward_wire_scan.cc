// The scanners of proto/forward_wire.h: a gdn.v1 ForwardRequest or
// ForwardResponse read field by field from its gRPC slices, tensor bytes
// recorded as spans (never copied), refusing whatever protobuf's own parser
// refuses (tests/fuzz/forward_wire_fuzz.cc holds them to that).
#include "proto/forward_wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gdn::wire {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

constexpr WireFormatLite::WireType kVarint = WireFormatLite::WIRETYPE_VARINT;
constexpr WireFormatLite::WireType kLength = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

// A protobuf input stream over the message's slices, in order.
class SliceInputStream final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit SliceInputStream(const WireMessage& message) : message_(message) {}

  bool Next(const void** data, int* size) override {
    if (backed_up_ > 0) {  // hand back the tail that BackUp returned
      const grpc::Slice& s = message_.slice(next_ - 1);
      *data = s.begin() + (s.size() - backed_up_);
      *size = static_cast<int>(backed_up_);
      position_ += backed_up_;
      backed_up_ = 0;
      return true;
    }
    while (next_ < message_.num_slices()) {
      const grpc::Slice& s = message_.slice(next_++);
      if (s.size() == 0) continue;
      *data = s.begin();
      *size = static_cast<int>(s.size());
      position_ += s.size();
      return true;
    }
    return false;
  }
  void BackUp(int count) override {
    backed_up_ = static_cast<size_t>(count);
    position_ -= backed_up_;
  }
  bool Skip(int count) override {
    const void* data;
    int size;
    while (count > 0) {
      if (!Next(&data, &size)) return false;
      if (size > count) {
        BackUp(size - count);
        return true;
      }
      count -= size;
    }
    return true;
  }
  int64_t ByteCount() const override { return static_cast<int64_t>(position_); }

 private:
  const WireMessage& message_;
  size_t next_ = 0;        // next slice to hand out
  size_t backed_up_ = 0;   // bytes at the end of slice next_ - 1 given back
  size_t position_ = 0;
};

absl::Status NotA(absl::string_view what, absl::string_view detail) {
  return absl::InvalidArgumentError(
      absl::StrCat("request is not a gdn.v1.", what, ": ", detail));
}

bool ExpectWireType(uint32_t tag, WireFormatLite::WireType type) {
  return WireFormatLite::GetTagWireType(tag) == type;
}

// The next tag (0 at the end of the message or limit) as protobuf's parser
// reads it. CodedInputStream takes a tag varint of up to 10 bytes and keeps
// its low 32 bits, and field number 0; the parser refuses both, and so do
// the scanners: such a tag comes back as kMalformedTag, whose wire type (7)
// no field accepts and SkipUnknownField refuses.
constexpr uint32_t kMalformedTag = 0xffffffff;
uint32_t ReadTag(CodedInputStream& in) {
  const int before = in.CurrentPosition();
  const uint32_t tag = in.ReadTag();
  if (tag == 0) return 0;
  if (in.CurrentPosition() - before > 5 || WireFormatLite::GetTagFieldNumber(tag) == 0) {
    return kMalformedTag;
  }
  return tag;
}

// Reads a length (of a string, bytes or submessage) as protobuf's parser
// does: at most 5 bytes, below INT_MAX - 16 (its ReadSize; the slop keeps
// its PushLimit from overflowing). CodedInputStream::ReadVarint32 takes up
// to 10 bytes and keeps the low 32 bits, so 80 80 80 80 80 80 80 80 10
// (2^60) would read as 0 there: accepted here, refused by the parser.
bool ReadLength(CodedInputStream& in, uint32_t* length) {
  const int before = in.CurrentPosition();
  uint64_t value = 0;
  if (!in.ReadVarint64(&value)) return false;
  if (in.CurrentPosition() - before > 5 ||
      value > static_cast<uint64_t>(std::numeric_limits<int>::max() - 16)) {
    return false;
  }
  *length = static_cast<uint32_t>(value);
  return true;
}

// Skips an unknown field as protobuf's parser would accept it. A group's
// fields are read with ReadTag too (WireFormatLite::SkipField reads them
// with CodedInputStream's lenient tags, which the parser refuses), nested at
// most as deep as protobuf's default recursion limit; an end-group tag must
// close the group it is in.
bool SkipUnknownField(CodedInputStream& in, uint32_t tag, int depth = 0) {
  if (WireFormatLite::GetTagWireType(tag) == kLength) {
    uint32_t length = 0;  // SkipField would read it leniently
    return ReadLength(in, &length) && in.Skip(static_cast<int>(length));
  }
  if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_START_GROUP) {
    return WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_END_GROUP &&
           WireFormatLite::SkipField(&in, tag);
  }
  if (depth >= 100) return false;
  while (const uint32_t inner = ReadTag(in)) {
    if (WireFormatLite::GetTagWireType(inner) == WireFormatLite::WIRETYPE_END_GROUP) {
      return WireFormatLite::GetTagFieldNumber(inner) == WireFormatLite::GetTagFieldNumber(tag);
    }
    if (!SkipUnknownField(in, inner, depth + 1)) return false;
  }
  return false;  // the message ended inside the group
}

// Reads a length and limits the stream to that many bytes: false when the
// length is missing or claims more bytes than are left (PushLimit alone
// would silently stop at the enclosing limit and so accept a truncated
// message, which protobuf's own parser refuses). The scanners push the
// message's size first, so a limit is always in force. `length`, when
// given, gets the length read.
bool PushLength(CodedInputStream& in, CodedInputStream::Limit* limit,
                uint32_t* length = nullptr) {
  uint32_t read = 0;
  if (!ReadLength(in, &read)) return false;
  if (read > static_cast<uint32_t>(std::max(in.BytesUntilLimit(), 0))) return false;
  *limit = in.PushLimit(static_cast<int>(read));
  if (length != nullptr) *length = read;
  return true;
}

// Reads a length-delimited RegionRef.
bool ReadRegionRef(CodedInputStream& in, RegionRefField* out) {
  CodedInputStream::Limit limit;
  if (!PushLength(in, &limit)) return false;
  gdn::v1::RegionRef ref;
  if (!ref.MergeFromCodedStream(&in) || !in.ConsumedEntireMessage()) return false;
  in.PopLimit(limit);
  out->region = std::move(*ref.mutable_region());
  out->offset = ref.offset();
  out->byte_size = ref.byte_size();
  return true;
}

// Reads a Tensor submessage of `length` bytes; the data payload is skipped
// and recorded as a span at the stream's current position.
absl::Status ReadTensor(CodedInputStream& in, absl::string_view message,
                        absl::string_view name, TensorField* t) {
  if (t->present) return NotA(message, absl::StrCat(name, " appears twice"));
  t->present = true;
  CodedInputStream::Limit limit;
  if (!PushLength(in, &limit)) return NotA(message, absl::StrCat(name, ": truncated"));
  bool has_data = false;  // a data field came (even an empty one)
  while (const uint32_t tag = ReadTag(in)) {
    switch (WireFormatLite::GetTagFieldNumber(tag)) {
      case 1: {  // dtype
        uint32_t dtype = 0;
        if (!ExpectWireType(tag, kVarint) || !in.ReadVarint32(&dtype)) {
          return NotA(message, absl::StrCat(name, ".dtype: malformed"));
        }
        t->dtype = static_cast<gdn::v1::DType>(dtype);
        break;
      }
      case 2: {  // shape: packed, or one element per tag
        uint64_t dim = 0;
        if (ExpectWireType(tag, kVarint)) {
          if (!in.ReadVarint64(&dim)) return NotA(message, absl::StrCat(name, ".shape: malformed"));
          t->shape.push_back(static_cast<int64_t>(dim));
          break;
        }
        CodedInputStream::Limit dims;
        if (!ExpectWireType(tag, kLength) || !PushLength(in, &dims)) {
          return NotA(message, absl::StrCat(name, ".shape: malformed"));
        }
        while (in.BytesUntilLimit() > 0) {
          if (!in.ReadVarint64(&dim)) return NotA(message, absl::StrCat(name, ".shape: malformed"));
          t->shape.push_back(static_cast<int64_t>(dim));
        }
        in.PopLimit(dims);
        break;
      }
      case 3: {  // data: recorded, not read
        uint32_t size = 0;
        if (!ExpectWireType(tag, kLength) || !ReadLength(in, &size)) {
          return NotA(message, absl::StrCat(name, ".data: malformed"));
        }
        t->data.offset = static_cast<size_t>(in.CurrentPosition());
        t->data.size = size;
        has_data = true;
        if (!in.Skip(static_cast<int>(size))) {
          return NotA(message, absl::StrCat(name, ".data: truncated"));
        }
        break;
      }
      case 4: {  // ref: a RegionRef instead of data
        // A second ref would merge into the first in protobuf's parser;
        // refused like a tensor field twice.
        if (t->has_ref) return NotA(message, absl::StrCat(name, ".ref appears twice"));
        if (!ExpectWireType(tag, kLength) || !ReadRegionRef(in, &t->ref)) {
          return NotA(message, absl::StrCat(name, ".ref: malformed"));
        }
        t->has_ref = true;
        break;
      }
      default:
        if (!SkipUnknownField(in, tag)) {
          return NotA(message, absl::StrCat(name, ": malformed field"));
        }
    }
  }
  if (!in.ConsumedEntireMessage()) return NotA(message, absl::StrCat(name, ": malformed"));
  // Either order and even empty data: protobuf keeps whichever came last
  // (a oneof), so a tensor with both is ambiguous.
  if (t->has_ref && has_data) {
    return NotA(message, absl::StrCat(name, ": both data and ref; send one"));
  }
  in.PopLimit(limit);
  return absl::OkStatus();
}

// A SequenceSpec in its usual form (known fields only, each with its own
// wire type, an ASCII session id), read from the `size` bytes at `data`;
// false for anything else, which protobuf's parser then reads with all its
// rules (UTF-8, unknown fields, a known number with another wire type).
// Protobuf's parse of the message costs ~0.2 us a sequence (a message and
// its string built and freed), 50 us for a decode call of 256 sessions.
bool ReadPlainSequence(const void* data, uint32_t size, SequenceField* out) {
  CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(size));
  while (const uint32_t tag = ReadTag(in)) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if (field == 1 && ExpectWireType(tag, kLength)) {  // session_id
      uint32_t length = 0;
      if (!ReadLength(in, &length) || !in.ReadString(&out->session_id, static_cast<int>(length))) {
        return false;
      }
      for (const char c : out->session_id) {
        if (static_cast<unsigned char>(c) >= 0x80) return false;  // UTF-8: protobuf checks it
      }
      continue;
    }
    uint64_t value = 0;
    if (field < 2 || field > 5 || !ExpectWireType(tag, kVarint) || !in.ReadVarint64(&value)) {
      return false;
    }
    switch (field) {
      case 2: out->position = static_cast<int64_t>(value); break;
      case 3: out->num_tokens = static_cast<int32_t>(value); break;  // int32: low 32 bits
      case 4: out->draft = value != 0; break;
      case 5: out->checkpoint_interval = static_cast<int32_t>(value); break;
    }
  }
  return in.ConsumedEntireMessage();
}

absl::Status ReadSequence(CodedInputStream& in, std::vector<SequenceField>* out) {
  CodedInputStream::Limit limit;
  uint32_t length = 0;
  if (!PushLength(in, &limit, &length)) return NotA("ForwardRequest", "sequences: truncated");
  SequenceField field;
  const void* data = nullptr;
  int contiguous = 0;  // within the limit
  if (in.GetDirectBufferPointer(&data, &contiguous) && contiguous >= static_cast<int>(length) &&
      ReadPlainSequence(data, length, &field)) {
    in.Skip(static_cast<int>(length));
  } else {
    gdn::v1::SequenceSpec spec;
    if (!spec.MergeFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
      return NotA("ForwardRequest", absl::StrCat("sequences[", out->size(), "]: malformed"));
    }
    field = SequenceField{};
    field.session_id = std::move(*spec.mutable_session_id());
    field.position = spec.position();
    field.num_tokens = spec.num_tokens();
    field.draft = spec.draft();
    field.checkpoint_interval = spec.checkpoint_interval();
  }
  in.PopLimit(limit);
  out->push_back(std::move(field));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WireMessage> WireMessage::FromByteBuffer(const grpc::ByteBuffer& buffer) {
  WireMessage m;
  if (!buffer.Valid()) return m;  // an empty message
  if (!buffer.Dump(&m.slices_).ok()) {
    return absl::InvalidArgumentError("request bytes could not be read");
  }
  size_t end = 0;
  for (const grpc::Slice& s : m.slices_) m.ends_.push_back(end += s.size());
  return m;
}

WireMessage WireMessage::FromString(std::string bytes) {
  WireMessage m;
  const size_t n = bytes.size();
  m.slices_.emplace_back(bytes);
  m.ends_.push_back(n);
  return m;
}

size_t WireMessage::SliceAt(size_t offset) const {
  return static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), offset) -
                             ends_.begin());
}

void WireMessage::CopyTo(WireSpan span, void* dst) const {
  char* out = static_cast<char*>(dst);
  ForEachPiece(span, [&out](const char* piece, size_t n) {
    std::memcpy(out, piece, n);
    out += n;
  });
}

absl::StatusOr<ForwardRequestFields> ScanForwardRequest(const WireMessage& message) {
  if (message.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return NotA("ForwardRequest", "larger than 2 GiB");
  }
  SliceInputStream stream(message);
  CodedInputStream in(&stream);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  in.PushLimit(static_cast<int>(message.size()));  // what PushLength checks against
  ForwardRequestFields f;
  TensorField* tensors[] = {&f.q, &f.k, &f.v, &f.g, &f.beta, &f.a, &f.b, &f.a_log, &f.dt_bias};
  static constexpr const char* kNames[] = {"q", "k", "v", "g", "beta", "a", "b", "a_log", "dt_bias"};
  while (const uint32_t tag = ReadTag(in)) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if (field == 1 || field == 12) {  // layer, request_id
      uint64_t value = 0;
      if (!ExpectWireType(tag, kVarint) || !in.ReadVarint64(&value)) {
        return NotA("ForwardRequest", field == 1 ? "layer: malformed" : "request_id: malformed");
      }
      if (field == 1) f.layer = static_cast<int32_t>(value);
      else f.request_id = value;
    } else if (field == 2) {
      if (!ExpectWireType(tag, kLength)) return NotA("ForwardRequest", "sequences: malformed");
      if (absl::Status s = ReadSequence(in, &f.sequences); !s.ok()) return s;
    } else if (field >= 3 && field <= 11) {
      if (!ExpectWireType(tag, kLength)) {
        return NotA("ForwardRequest", absl::StrCat(kNames[field - 3], ": malformed"));
      }
      if (absl::Status s = ReadTensor(in, "ForwardRequest", kNames[field - 3], tensors[field - 3]);
          !s.ok()) {
        return s;
      }
    } else if (field == 13) {
      if (f.has_o_region) return NotA("ForwardRequest", "o_region appears twice");
      if (!ExpectWireType(tag, kLength) || !ReadRegionRef(in, &f.o_region)) {
        return NotA("ForwardRequest", "o_region: malformed");
      }
      f.has_o_region = true;
    } else if (!SkipUnknownField(in, tag)) {
      return NotA("ForwardRequest", absl::StrCat("field ", field, ": malformed"));
    }
  }
  if (!in.ConsumedEntireMessage()) return NotA("ForwardRequest", "malformed or truncated");
  return f;
}

absl::StatusOr<ForwardResponseFields> ScanForwardResponse(const WireMessage& message) {
  if (message.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return NotA("ForwardResponse", "larger than 2 GiB");
  }
  SliceInputStream stream(message);
  CodedInputStream in(&stream);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  in.PushLimit(static_cast<int>(message.size()));  // what PushLength checks against
  ForwardResponseFields f;
  while (const uint32_t tag = ReadTag(in)) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    bool ok = true;
    if (field == 1 && ExpectWireType(tag, kLength)) {
      if (absl::Status s = ReadTensor(in, "ForwardResponse", "o", &f.o); !s.ok()) return s;
    } else if (field == 2 && ExpectWireType(tag, kLength)) {
      CodedInputStream::Limit limit;
      ok = PushLength(in, &limit);
      uint64_t v = 0;
      while (ok && in.BytesUntilLimit() > 0) {
        ok = in.ReadVarint64(&v);
        f.positions.push_back(static_cast<int64_t>(v));
      }
      if (ok) in.PopLimit(limit);
    } else if (field == 2 && ExpectWireType(tag, kVarint)) {
      uint64_t v = 0;
      ok = in.ReadVarint64(&v);
      f.positions.push_back(static_cast<int64_t>(v));
    } else if ((field == 3 || field == 4) && ExpectWireType(tag, kVarint)) {
      uint64_t v = 0;
      ok = in.ReadVarint64(&v);
      if (field == 3) f.request_id = v;
      else f.error_code = static_cast<int32_t>(v);
    } else if (field == 5 && ExpectWireType(tag, kLength)) {
      uint32_t length = 0;
      ok = ReadLength(in, &length) && in.ReadString(&f.error_message, static_cast<int>(length));
    } else {
      ok = SkipUnknownField(in, tag);
    }
    if (!ok) return NotA("ForwardResponse", absl::StrCat("field ", field, ": malformed"));
  }
  if (!in.ConsumedEntireMessage()) return NotA("ForwardResponse", "malformed or truncated");
  return f;
}

}  // namespace gdn::wire
