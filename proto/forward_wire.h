// gdn.v1 Forward messages read and written at the byte level, with tensor
// bytes left where they are: the request path's transport without protobuf
// message objects in between.
//
// Receiving (server: ForwardRequest; client: ForwardResponse): a message
// arrives as a grpc::ByteBuffer, a list of slices. WireMessage keeps those
// slices (references, no copy); Scan* reads the small fields with protobuf's
// CodedInputStream and records where each tensor's payload lies (a WireSpan)
// without touching its bytes, so the caller reads each payload exactly once,
// straight into the memory it is going to use (WireMessage::ForEachPiece).
//
// Sending (server: ForwardResponse; client: ForwardRequest): Encode* writes
// the small fields into a few header bytes and appends every tensor payload
// as a slice that references the caller's memory (BytesRef), so no byte of a
// tensor is copied to serialize it; gRPC drops its reference once the bytes
// are on the socket.
//
// Both directions are the plain protobuf wire format of gdn.v1 (fields in
// field-number order, defaults omitted, packed shapes: exactly what
// SerializeToString produces), so any gdn.v1 peer interoperates. Scanning
// accepts any valid encoding (any field order, unpacked shapes, unknown
// fields) and refuses a tensor field that appears twice.
//
// Pure functions and immutable objects: safe from any thread.
#ifndef GDN_PROTO_FORWARD_WIRE_H_
#define GDN_PROTO_FORWARD_WIRE_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"

namespace gdn::wire {

// A byte range of a message: [offset, offset + size).
struct WireSpan {
  size_t offset = 0;
  size_t size = 0;
};

// The bytes of one received message, as the slices gRPC handed over.
class WireMessage {
 public:
  WireMessage() = default;
  // Takes references to `buffer`'s slices (InvalidArgument if it cannot be
  // read, which gRPC only reports for a corrupt buffer).
  static absl::StatusOr<WireMessage> FromByteBuffer(const grpc::ByteBuffer& buffer);
  // One contiguous copy of `bytes` (tests, and callers holding a flat array).
  static WireMessage FromString(std::string bytes);

  size_t size() const { return ends_.empty() ? 0 : ends_.back(); }
  size_t num_slices() const { return slices_.size(); }
  const grpc::Slice& slice(size_t i) const { return slices_[i]; }

  // Calls fn(const char* piece, size_t piece_size) for each contiguous piece
  // of `span`, in order (one call when the span lies in one slice). The span
  // must lie inside the message (Scan* spans always do).
  template <typename Fn>
  void ForEachPiece(WireSpan span, Fn&& fn) const {
    size_t i = SliceAt(span.offset);
    size_t at = span.offset;
    size_t left = span.size;
    while (left > 0) {
      const size_t begin = i == 0 ? 0 : ends_[i - 1];
      const size_t in_slice = at - begin;
      const size_t n = std::min(left, ends_[i] - at);
      fn(reinterpret_cast<const char*>(slices_[i].begin()) + in_slice, n);
      at += n;
      left -= n;
      ++i;
    }
  }
  // Copies `span` to dst.
  void CopyTo(WireSpan span, void* dst) const;

 private:
  // The slice holding byte `offset` (offset < size()).
  size_t SliceAt(size_t offset) const;

  std::vector<grpc::Slice> slices_;
  std::vector<size_t> ends_;  // [slices]: offset one past each slice's end
};

// A RegionRef: bytes [offset, offset + byte_size) of a registered region.
struct RegionRefField {
  std::string region;
  int64_t offset = 0;
  int64_t byte_size = 0;
};

// A Tensor field as scanned: its header and where its data bytes are, in
// the message (`data`) or in a registered region (`ref`, when has_ref).
struct TensorField {
  bool present = false;  // the field appeared (possibly empty)
  gdn::v1::DType dtype = gdn::v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  WireSpan data;
  bool has_ref = false;
  RegionRefField ref;
  // Payload bytes: the ref's byte_size or the inline data's size.
  int64_t payload_bytes() const {
    return has_ref ? ref.byte_size : static_cast<int64_t>(data.size);
  }
};

struct SequenceField {
  std::string session_id;
  int64_t position = 0;
  int32_t num_tokens = 0;
  bool draft = false;  // SequenceSpec.draft
  int32_t checkpoint_interval = 0;  // SequenceSpec.checkpoint_interval
};

// Every field of a ForwardRequest; tensors by location.
struct ForwardRequestFields {
  int32_t layer = 0;
  std::vector<SequenceField> sequences;
  TensorField q, k, v, g, beta, a, b, a_log, dt_bias;
  uint64_t request_id = 0;
  bool has_o_region = false;
  RegionRefField o_region;  // where o goes instead of the response
};

// InvalidArgument "request is not a gdn.v1.ForwardRequest: ..." when the
// bytes do not parse (truncated, wrong wire type, a tensor field twice).
absl::StatusOr<ForwardRequestFields> ScanForwardRequest(const WireMessage& message);

struct ForwardResponseFields {
  TensorField o;
  std::vector<int64_t> positions;
  uint64_t request_id = 0;
  int32_t error_code = 0;
  std::string error_message;
};

absl::StatusOr<ForwardResponseFields> ScanForwardResponse(const WireMessage& message);

// Bytes to send in place: `data` stays valid while `owner` is held (gRPC
// holds it until the bytes are written). A null owner means the memory
// outlives every call (static data).
struct BytesRef {
  const void* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

// A Tensor to encode: its header and its data as one or more runs, sent in
// order (their sizes add up to the data's size), or a reference to a
// registered region (then `data` is empty).
struct TensorParts {
  gdn::v1::DType dtype = gdn::v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  std::vector<BytesRef> data;
  bool has_ref = false;
  RegionRefField ref;
  bool present() const;  // anything to encode (a default Tensor is omitted)
};

struct ForwardRequestParts {
  int32_t layer = 0;
  std::vector<SequenceField> sequences;
  TensorParts q, k, v, g, beta, a, b, a_log, dt_bias;
  uint64_t request_id = 0;
  bool has_o_region = false;
  RegionRefField o_region;
};

struct ForwardResponseParts {
  TensorParts o;
  std::vector<int64_t> positions;
  uint64_t request_id = 0;
  int32_t error_code = 0;
  std::string error_message;
};

grpc::ByteBuffer EncodeForwardRequest(const ForwardRequestParts& parts);
grpc::ByteBuffer EncodeForwardResponse(const ForwardResponseParts& parts);

// A slice of `ref`'s bytes without copying them (holding ref.owner).
grpc::Slice SliceOf(const BytesRef& ref);

}  // namespace gdn::wire

#endif  // GDN_PROTO_FORWARD_WIRE_H_
