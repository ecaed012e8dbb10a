// The encoders of proto/forward_wire.h: a ForwardRequest or ForwardResponse
// written as header bytes and payload slices that point at the tensors'
// own memory (a gRPC ByteBuffer, no serialization copy).
#include "proto/forward_wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gdn::wire {
namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

constexpr WireFormatLite::WireType kLength = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

// Appends header bytes and payload slices in order.
class SliceWriter {
 public:
  // Header bytes go through a CodedOutputStream over `pending_`.
  template <typename Fn>
  void Header(Fn&& write) {
    google::protobuf::io::StringOutputStream stream(&pending_);
    CodedOutputStream out(&stream);
    write(out);
  }
  void Payload(const BytesRef& ref) {
    if (ref.size == 0) return;
    Flush();
    slices_.push_back(SliceOf(ref));
  }
  grpc::ByteBuffer Finish() {
    Flush();
    return grpc::ByteBuffer(slices_.data(), slices_.size());
  }

 private:
  void Flush() {
    if (pending_.empty()) return;
    slices_.emplace_back(pending_);  // a copy of a few header bytes
    pending_.clear();
  }
  std::string pending_;
  std::vector<grpc::Slice> slices_;
};

size_t DataSize(const TensorParts& t) {
  size_t n = 0;
  for (const BytesRef& r : t.data) n += r.size;
  return n;
}

size_t PackedShapeSize(const TensorParts& t) {
  size_t n = 0;
  for (int64_t d : t.shape) n += CodedOutputStream::VarintSize64(static_cast<uint64_t>(d));
  return n;
}

size_t RegionRefSize(const RegionRefField& r) {
  size_t n = 0;
  if (!r.region.empty()) n += 1 + WireFormatLite::StringSize(r.region);
  if (r.offset != 0) n += 1 + WireFormatLite::Int64Size(r.offset);
  if (r.byte_size != 0) n += 1 + WireFormatLite::Int64Size(r.byte_size);
  return n;
}

void WriteRegionRef(int field, const RegionRefField& r, CodedOutputStream& out) {
  WireFormatLite::WriteTag(field, kLength, &out);
  out.WriteVarint32(static_cast<uint32_t>(RegionRefSize(r)));
  if (!r.region.empty()) WireFormatLite::WriteString(1, r.region, &out);
  if (r.offset != 0) WireFormatLite::WriteInt64(2, r.offset, &out);
  if (r.byte_size != 0) WireFormatLite::WriteInt64(3, r.byte_size, &out);
}

// Bytes of the Tensor message (without its own tag and length).
size_t TensorSize(const TensorParts& t) {
  size_t n = 0;
  if (t.dtype != gdn::v1::DTYPE_UNSPECIFIED) n += 1 + WireFormatLite::EnumSize(t.dtype);
  if (!t.shape.empty()) {
    const size_t packed = PackedShapeSize(t);
    n += 1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(packed)) + packed;
  }
  const size_t data = DataSize(t);
  if (data > 0) n += 1 + CodedOutputStream::VarintSize64(data) + data;
  if (t.has_ref) {
    const size_t ref = RegionRefSize(t.ref);
    n += 1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(ref)) + ref;
  }
  return n;
}

void WriteTensor(int field, const TensorParts& t, SliceWriter& writer) {
  if (!t.present()) return;
  writer.Header([&](CodedOutputStream& out) {
    WireFormatLite::WriteTag(field, kLength, &out);
    out.WriteVarint64(TensorSize(t));
    if (t.dtype != gdn::v1::DTYPE_UNSPECIFIED) WireFormatLite::WriteEnum(1, t.dtype, &out);
    if (!t.shape.empty()) {
      WireFormatLite::WriteTag(2, kLength, &out);
      out.WriteVarint32(static_cast<uint32_t>(PackedShapeSize(t)));
      for (int64_t d : t.shape) out.WriteVarint64(static_cast<uint64_t>(d));
    }
    const size_t data = DataSize(t);
    if (data > 0) {
      WireFormatLite::WriteTag(3, kLength, &out);
      out.WriteVarint64(data);
    }
  });
  for (const BytesRef& r : t.data) writer.Payload(r);
  if (t.has_ref) writer.Header([&](CodedOutputStream& out) { WriteRegionRef(4, t.ref, out); });
}

void WritePackedInt64(int field, const std::vector<int64_t>& values, CodedOutputStream& out) {
  if (values.empty()) return;
  size_t packed = 0;
  for (int64_t v : values) packed += CodedOutputStream::VarintSize64(static_cast<uint64_t>(v));
  WireFormatLite::WriteTag(field, kLength, &out);
  out.WriteVarint32(static_cast<uint32_t>(packed));
  for (int64_t v : values) out.WriteVarint64(static_cast<uint64_t>(v));
}

}  // namespace

bool TensorParts::present() const {
  return dtype != gdn::v1::DTYPE_UNSPECIFIED || !shape.empty() || DataSize(*this) > 0 || has_ref;
}

grpc::Slice SliceOf(const BytesRef& ref) {
  void* data = const_cast<void*>(ref.data);
  if (ref.owner == nullptr) return grpc::Slice(data, ref.size, grpc::Slice::STATIC_SLICE);
  // gRPC calls the destroy function once the slice's last reference goes.
  auto* owner = new std::shared_ptr<const void>(ref.owner);
  return grpc::Slice(
      data, ref.size,
      [](void* held) { delete static_cast<std::shared_ptr<const void>*>(held); }, owner);
}

grpc::ByteBuffer EncodeForwardRequest(const ForwardRequestParts& parts) {
  SliceWriter writer;
  writer.Header([&](CodedOutputStream& out) {
    if (parts.layer != 0) WireFormatLite::WriteInt32(1, parts.layer, &out);
    for (const SequenceField& s : parts.sequences) {
      size_t size = 0;
      if (!s.session_id.empty()) size += 1 + WireFormatLite::StringSize(s.session_id);
      if (s.position != 0) size += 1 + WireFormatLite::Int64Size(s.position);
      if (s.num_tokens != 0) size += 1 + WireFormatLite::Int32Size(s.num_tokens);
      if (s.draft) size += 2;
      if (s.checkpoint_interval != 0) {
        size += 1 + WireFormatLite::Int32Size(s.checkpoint_interval);
      }
      WireFormatLite::WriteTag(2, kLength, &out);
      out.WriteVarint32(static_cast<uint32_t>(size));
      if (!s.session_id.empty()) WireFormatLite::WriteString(1, s.session_id, &out);
      if (s.position != 0) WireFormatLite::WriteInt64(2, s.position, &out);
      if (s.num_tokens != 0) WireFormatLite::WriteInt32(3, s.num_tokens, &out);
      if (s.draft) WireFormatLite::WriteBool(4, true, &out);
      if (s.checkpoint_interval != 0) WireFormatLite::WriteInt32(5, s.checkpoint_interval, &out);
    }
  });
  const TensorParts* tensors[] = {&parts.q,    &parts.k, &parts.v, &parts.g,     &parts.beta,
                                  &parts.a,    &parts.b, &parts.a_log, &parts.dt_bias};
  for (int i = 0; i < 9; ++i) WriteTensor(3 + i, *tensors[i], writer);
  writer.Header([&](CodedOutputStream& out) {
    if (parts.request_id != 0) WireFormatLite::WriteUInt64(12, parts.request_id, &out);
    if (parts.has_o_region) WriteRegionRef(13, parts.o_region, out);
  });
  return writer.Finish();
}

grpc::ByteBuffer EncodeForwardResponse(const ForwardResponseParts& parts) {
  SliceWriter writer;
  WriteTensor(1, parts.o, writer);
  writer.Header([&](CodedOutputStream& out) {
    WritePackedInt64(2, parts.positions, out);
    if (parts.request_id != 0) WireFormatLite::WriteUInt64(3, parts.request_id, &out);
    if (parts.error_code != 0) WireFormatLite::WriteInt32(4, parts.error_code, &out);
    if (!parts.error_message.empty()) WireFormatLite::WriteString(5, parts.error_message, &out);
  });
  return writer.Finish();
}

}  // namespace gdn::wire