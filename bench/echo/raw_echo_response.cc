#include "bench/echo/raw_echo_response.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "kernels/gdn_types.h"
#include "proto/forward_wire.h"
#include "proto/tensor_codec.h"

namespace gdn::echo {
namespace {

struct ZeroBuffer {
  const char* data = nullptr;
  size_t size = 0;
};

std::once_flag zero_once;
ZeroBuffer zero_buffer;

const ZeroBuffer& Zeros(size_t bytes) {
  std::call_once(zero_once, [bytes] {
    constexpr size_t kPage = 4096;
    const size_t n = (std::max<size_t>(bytes, 1 << 20) + kPage - 1) / kPage * kPage;
    char* data = new char[n];  // lives as long as the process: slices point into it
    std::memset(data, 0, n);   // touched: real pages, not the shared zero page
    zero_buffer = {data, n};
  });
  return zero_buffer;
}

}  // namespace

void PrepareZeroBuffer(size_t bytes) { Zeros(bytes); }

absl::Status RawEchoResponse(const grpc::ByteBuffer& request, const v1::LayerConfig& config,
                             grpc::ByteBuffer* response) {
  absl::StatusOr<wire::WireMessage> message = wire::WireMessage::FromByteBuffer(request);
  if (!message.ok()) return message.status();
  absl::StatusOr<wire::ForwardRequestFields> fields = wire::ScanForwardRequest(*message);
  if (!fields.ok()) return fields.status();

  wire::ForwardResponseParts parts;
  int64_t tokens = 0;
  parts.positions.reserve(fields->sequences.size());
  for (const wire::SequenceField& s : fields->sequences) {
    tokens += s.num_tokens;
    parts.positions.push_back(s.position + s.num_tokens);
  }
  DType dtype = DType::kBF16;
  wire::FromProtoDType(config.activation_dtype(), &dtype);
  parts.o.dtype = config.activation_dtype();
  parts.o.shape = {tokens, config.num_v_heads(), config.head_dim_v()};
  // o's bytes as runs of the static buffer (more than one only when o is
  // larger than the buffer; static: no owner to hold).
  const ZeroBuffer& zeros = Zeros(0);
  size_t left = static_cast<size_t>(tokens) * config.num_v_heads() * config.head_dim_v() *
                DTypeSize(dtype);
  while (left > 0) {
    const size_t n = std::min(left, zeros.size);
    parts.o.data.push_back({zeros.data, n, nullptr});
    left -= n;
  }
  parts.request_id = fields->request_id;
  grpc::ByteBuffer encoded = wire::EncodeForwardResponse(parts);
  response->Swap(&encoded);
  return absl::OkStatus();
}

grpc::ByteBuffer RawErrorResponse(const absl::Status& status, uint64_t request_id) {
  wire::ForwardResponseParts parts;
  parts.request_id = request_id;
  parts.error_code = static_cast<int32_t>(status.code());
  parts.error_message = std::string(status.message());
  return wire::EncodeForwardResponse(parts);
}

}  // namespace gdn::echo
