#include "client/forward_parts_split.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/forward_split.h"

namespace gdn::client {
namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

int64_t DataBytes(const wire::TensorParts& t) {
  int64_t n = 0;
  for (const wire::BytesRef& r : t.data) n += static_cast<int64_t>(r.size);
  return n;
}

// A length-delimited field of `length` bytes (field numbers < 16: one tag byte).
int64_t Delimited(int64_t length) {
  return 1 + CodedOutputStream::VarintSize64(static_cast<uint64_t>(length)) + length;
}

int64_t TensorWireSize(const wire::TensorParts& t) {
  if (!t.present()) return 0;
  int64_t body = 0;
  if (t.dtype != v1::DTYPE_UNSPECIFIED) body += 1 + WireFormatLite::EnumSize(t.dtype);
  if (!t.shape.empty()) {
    int64_t packed = 0;
    for (int64_t d : t.shape) packed += CodedOutputStream::VarintSize64(static_cast<uint64_t>(d));
    body += Delimited(packed);
  }
  if (const int64_t data = DataBytes(t); data > 0) body += Delimited(data);
  return Delimited(body);
}

// The token-packed tensors ([T, ...] row-major).
struct PackedField {
  const char* name;
  wire::TensorParts wire::ForwardRequestParts::*member;
};
constexpr PackedField kPackedFields[] = {
    {"q", &wire::ForwardRequestParts::q},       {"k", &wire::ForwardRequestParts::k},
    {"v", &wire::ForwardRequestParts::v},       {"g", &wire::ForwardRequestParts::g},
    {"beta", &wire::ForwardRequestParts::beta}, {"a", &wire::ForwardRequestParts::a},
    {"b", &wire::ForwardRequestParts::b},
};

// Bytes [begin, end) of the runs of `t`, as sub-ranges of the same runs.
std::vector<wire::BytesRef> ByteRange(const wire::TensorParts& t, int64_t begin, int64_t end) {
  std::vector<wire::BytesRef> out;
  int64_t run_start = 0;
  for (const wire::BytesRef& r : t.data) {
    const int64_t run_end = run_start + static_cast<int64_t>(r.size);
    const int64_t lo = std::max(begin, run_start), hi = std::min(end, run_end);
    if (lo < hi) {
      out.push_back({static_cast<const char*>(r.data) + (lo - run_start),
                     static_cast<size_t>(hi - lo), r.owner});
    }
    run_start = run_end;
    if (run_start >= end) break;
  }
  return out;
}

// Rows [begin, end) of a tensor packed over `total_rows` rows.
wire::TensorParts SliceRows(const wire::TensorParts& t, int64_t total_rows, int64_t begin,
                            int64_t end) {
  wire::TensorParts out;
  out.dtype = t.dtype;
  out.shape = t.shape;
  if (!out.shape.empty()) out.shape[0] = end - begin;
  const int64_t row_bytes = DataBytes(t) / total_rows;
  out.data = ByteRange(t, begin * row_bytes, end * row_bytes);
  return out;
}

}  // namespace

int64_t ForwardRequestWireSize(const wire::ForwardRequestParts& p) {
  int64_t n = 0;
  if (p.layer != 0) n += 1 + WireFormatLite::Int32Size(p.layer);
  for (const wire::SequenceField& s : p.sequences) {
    int64_t spec = 0;
    if (!s.session_id.empty()) spec += 1 + WireFormatLite::StringSize(s.session_id);
    if (s.position != 0) spec += 1 + WireFormatLite::Int64Size(s.position);
    if (s.num_tokens != 0) spec += 1 + WireFormatLite::Int32Size(s.num_tokens);
    if (s.draft) spec += 2;
    if (s.checkpoint_interval != 0) spec += 1 + WireFormatLite::Int32Size(s.checkpoint_interval);
    n += Delimited(spec);
  }
  for (const wire::TensorParts* t : {&p.q, &p.k, &p.v, &p.g, &p.beta, &p.a, &p.b, &p.a_log,
                                     &p.dt_bias}) {
    n += TensorWireSize(*t);
  }
  if (p.request_id != 0) n += 1 + WireFormatLite::UInt64Size(p.request_id);
  return n;
}

absl::StatusOr<std::vector<ForwardPartRefs>> SplitForwardRequestParts(
    wire::ForwardRequestParts request, int64_t max_message_bytes) {
  int64_t total_tokens = 0;
  for (const wire::SequenceField& s : request.sequences) {
    if (s.num_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence '", s.session_id, "' has num_tokens ", s.num_tokens));
    }
    total_tokens += s.num_tokens;
  }
  const int64_t request_bytes = ForwardRequestWireSize(request);
  const int64_t response_bytes = DataBytes(request.v) + kForwardMessageSlackBytes;
  if (total_tokens == 0 ||
      (request_bytes <= max_message_bytes && response_bytes <= max_message_bytes)) {
    ForwardPartRefs whole;
    for (size_t i = 0; i < request.sequences.size(); ++i) {
      whole.original_sequence.push_back(static_cast<int>(i));
    }
    whole.request = std::move(request);
    std::vector<ForwardPartRefs> parts(1);
    parts[0] = std::move(whole);
    return parts;
  }

  // Bytes per token row of the request, and of the response (o is like v).
  int64_t request_row_bytes = 0;
  int64_t packed_bytes = 0;
  for (const PackedField& f : kPackedFields) {
    const int64_t bytes = DataBytes(request.*f.member);
    if (bytes == 0) continue;
    if (bytes % total_tokens != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", f.name, " has ", bytes,
                                                     " bytes, not a whole number of rows for T = ",
                                                     total_tokens));
    }
    request_row_bytes += bytes / total_tokens;
    packed_bytes += bytes;
  }
  const int64_t response_row_bytes = DataBytes(request.v) / total_tokens;
  const int64_t fixed_bytes = request_bytes - packed_bytes + kForwardMessageSlackBytes;
  const int64_t row_bytes = std::max(request_row_bytes, response_row_bytes);
  const int64_t rows_per_part =
      row_bytes == 0 ? total_tokens : (max_message_bytes - fixed_bytes) / row_bytes;
  if (rows_per_part < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one token (", row_bytes, " bytes + ", fixed_bytes,
        " bytes of other fields) does not fit in a message of ", max_message_bytes, " bytes"));
  }

  std::vector<ForwardPartRefs> parts;
  parts.reserve(static_cast<size_t>((total_tokens + rows_per_part - 1) / rows_per_part));
  size_t seq = 0;
  int64_t taken_of_seq = 0;  // tokens of sequence `seq` already in parts
  for (int64_t begin = 0; begin < total_tokens; begin += rows_per_part) {
    const int64_t end = std::min(total_tokens, begin + rows_per_part);
    ForwardPartRefs part;
    part.request.layer = request.layer;
    part.request.request_id = request.request_id;
    for (int64_t row = begin; row < end;) {
      const wire::SequenceField& s = request.sequences[seq];
      const int64_t take = std::min<int64_t>(s.num_tokens - taken_of_seq, end - row);
      if ((s.draft || s.checkpoint_interval != 0) && take != s.num_tokens) {
        // Per-token and kept states are positioned within one call.
        return absl::InvalidArgumentError(absl::StrCat(
            s.draft ? "draft" : "state-keeping", " sequence '", s.session_id,
            "' would be split across messages"));
      }
      part.request.sequences.push_back({s.session_id, s.position + taken_of_seq,
                                        static_cast<int32_t>(take), s.draft,
                                        s.checkpoint_interval});
      part.original_sequence.push_back(static_cast<int>(seq));
      row += take;
      taken_of_seq += take;
      if (taken_of_seq == s.num_tokens) {
        ++seq;
        taken_of_seq = 0;
      }
    }
    for (const PackedField& f : kPackedFields) {
      const wire::TensorParts& t = request.*f.member;
      if (DataBytes(t) == 0 && t.shape.empty()) continue;
      part.request.*f.member = SliceRows(t, total_tokens, begin, end);
    }
    if (request.a_log.present()) part.request.a_log = request.a_log;
    if (request.dt_bias.present()) part.request.dt_bias = request.dt_bias;
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace gdn::client
