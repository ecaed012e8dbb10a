// Writes the fuzz targets' seed corpora: a handful of small valid inputs
// (so the fuzzers start past the parsers' front doors) and a few invalid
// ones, each a few hundred bytes. The files are committed under
// tests/fuzz/corpus/<target>/; rerun after a format change:
//   build-fuzz/tests/fuzz/gdn_fuzz_make_corpus tests/fuzz/corpus
// Deterministic: the same files every run.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "proto/channel.h"
#include "proto/session_file.h"
#include "proto/tensor_codec.h"
#include "tests/fuzz/reader_fuzz_config.h"

namespace gdn::fuzz {
namespace {

std::string g_root;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = g_root + "/" + target;
  mkdir(g_root.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

// n values cycling through small finite numbers in [lo, hi].
std::vector<float> Values(size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * static_cast<float>(i % 7) / 6.0f;
  return v;
}

gdn::v1::Tensor Tensor(DType dtype, std::vector<int64_t> shape, float lo, float hi) {
  const int64_t n = wire::NumElements(shape);
  return wire::MakeTensor(dtype, shape, Values(static_cast<size_t>(n), lo, hi).data());
}

// A valid request for ReaderOptions(selector): sequences of `tokens`, every
// tensor inline, or (refs) q, k, v, g / a by reference into the region's
// zero half, and o into it.
gdn::v1::ForwardRequest Request(uint8_t selector, const std::vector<int>& tokens, bool refs) {
  const GdnOptions o = ReaderOptions(selector);
  const LayerShape& s = o.shape;
  int64_t T = 0;
  gdn::v1::ForwardRequest r;
  r.set_layer(1);
  r.set_request_id(7);
  for (size_t i = 0; i < tokens.size(); ++i) {
    gdn::v1::SequenceSpec* spec = r.add_sequences();
    spec->set_session_id("s" + std::to_string(i));
    spec->set_position(static_cast<int64_t>(64 * i));
    spec->set_num_tokens(tokens[i]);
    T += tokens[i];
  }
  const DType act = o.input_dtype;
  int64_t offset = 0;  // next free byte of the region's zero half
  auto place = [&](gdn::v1::Tensor* t, DType dtype, std::vector<int64_t> shape, float lo,
                   float hi) {
    if (!refs) {
      *t = Tensor(dtype, shape, lo, hi);
      return;
    }
    gdn::v1::DType p;
    wire::ToProtoDType(dtype, &p);
    t->set_dtype(p);
    for (int64_t d : shape) t->add_shape(d);
    const int64_t bytes = wire::NumElements(shape) * static_cast<int64_t>(DTypeSize(dtype));
    t->mutable_ref()->set_region(kRegionName);
    t->mutable_ref()->set_offset(offset);
    t->mutable_ref()->set_byte_size(bytes);
    offset += (bytes + 255) / 256 * 256;
  };
  place(r.mutable_q(), act, {T, s.num_qk_heads, s.head_dim_k}, -1.0f, 1.0f);
  place(r.mutable_k(), act, {T, s.num_qk_heads, s.head_dim_k}, -1.0f, 1.0f);
  place(r.mutable_v(), act, {T, s.num_v_heads, s.head_dim_v}, -2.0f, 2.0f);
  if (o.gating == GatingMode::kDirect) {
    place(r.mutable_g(), DType::kF32, {T, s.num_v_heads}, -1.0f, 0.0f);
    *r.mutable_beta() = Tensor(DType::kF32, {T, s.num_v_heads}, 0.0f, 1.0f);
  } else {
    place(r.mutable_a(), DType::kF32, {T, s.num_v_heads}, -3.0f, 3.0f);
    *r.mutable_b() = Tensor(DType::kF32, {T, s.num_v_heads}, -3.0f, 3.0f);
    *r.mutable_a_log() = Tensor(DType::kF32, {s.num_v_heads}, -1.0f, 1.0f);
    *r.mutable_dt_bias() = Tensor(DType::kF32, {s.num_v_heads}, -1.0f, 1.0f);
  }
  if (refs) {
    r.mutable_o_region()->set_region(kRegionName);
    r.mutable_o_region()->set_offset(offset);
    r.mutable_o_region()->set_byte_size(T * s.num_v_heads * s.head_dim_v *
                                        static_cast<int64_t>(DTypeSize(act)));
  }
  return r;
}

void ReaderCorpus() {
  const char* t = "forward_request_reader";
  auto put = [&](const std::string& name, uint8_t selector, const gdn::v1::ForwardRequest& r) {
    Write(t, name, std::string(1, static_cast<char>(selector)) + r.SerializeAsString());
  };
  put("direct_bf16_decode", 0, Request(0, {1, 2}, false));
  put("fused_bf16_decode", 1, Request(1, {1}, false));
  put("direct_fp16_sliced", 2 | (5 << 3), Request(2, {3}, false));
  put("fused_fp32_sliced", 5 | (3 << 3), Request(5, {2}, false));
  put("direct_bf16_refs", 0, Request(0, {2, 1}, true));
  put("fused_fp16_refs", 3, Request(3, {2}, true));
  gdn::v1::ForwardRequest nan_ref = Request(0, {1}, true);
  nan_ref.mutable_v()->mutable_ref()->set_offset(kRegionBytes / 2);  // the 0xff half
  put("invalid_nan_ref", 0, nan_ref);
  gdn::v1::ForwardRequest far_ref = Request(1, {1}, true);
  far_ref.mutable_q()->mutable_ref()->set_offset(INT64_MAX - 8);  // offset + size overflows
  put("invalid_ref_far_offset", 1, far_ref);
  gdn::v1::ForwardRequest bad_beta = Request(0, {1}, false);
  const float big = 2.0f;
  std::memcpy(bad_beta.mutable_beta()->mutable_data()->data(), &big, sizeof(big));
  put("invalid_beta_range", 0, bad_beta);
  gdn::v1::ForwardRequest twice = Request(0, {1, 1}, false);
  twice.mutable_sequences(1)->set_session_id("s0");
  put("invalid_session_twice", 0, twice);
  gdn::v1::ForwardRequest checkpoint = Request(0, {2}, false);
  checkpoint.mutable_sequences(0)->set_checkpoint_interval(64);
  checkpoint.mutable_sequences(0)->set_draft(true);
  put("invalid_checkpoint_draft", 0, checkpoint);
}

void WireCorpus() {
  const char* t = "forward_wire";
  Write(t, "request_inline", Request(0, {1}, false).SerializeAsString());
  Write(t, "request_refs", Request(1, {1}, true).SerializeAsString());
  const std::string whole = Request(0, {2}, false).SerializeAsString();
  Write(t, "invalid_truncated", whole.substr(0, whole.size() - 9));
  gdn::v1::ForwardRequest twice = Request(0, {1}, false);
  Write(t, "invalid_tensor_twice",
        twice.SerializeAsString() + gdn::v1::ForwardRequest().SerializeAsString() +
            std::string("\x1a\x00", 2));  // q (field 3) again, empty
  gdn::v1::ForwardResponse response;
  *response.mutable_o() = Tensor(DType::kBF16, {2, 2, 8}, -1.0f, 1.0f);
  response.add_positions(3);
  response.add_positions(65);
  response.set_request_id(9);
  Write(t, "response_o", response.SerializeAsString());
  gdn::v1::ForwardResponse error;
  error.set_request_id(9);
  error.set_error_code(3);
  error.set_error_message("q: expected shape [1, 1, 8] (bf16), got [1, 1, 4]");
  Write(t, "response_error", error.SerializeAsString());
}

void TensorCorpus() {
  const char* t = "tensor_codec";
  Write(t, "fp32_2x3", Tensor(DType::kF32, {2, 3}, -1.0f, 1.0f).SerializeAsString());
  Write(t, "bf16_4x4", Tensor(DType::kBF16, {4, 4}, -8.0f, 8.0f).SerializeAsString());
  gdn::v1::Tensor nan = Tensor(DType::kF16, {3, 5}, 0.0f, 1.0f);
  (*nan.mutable_data())[9] = '\x7e';  // element 4: an fp16 NaN (exponent all ones)
  Write(t, "fp16_with_nan", nan.SerializeAsString());
  gdn::v1::Tensor short_data = Tensor(DType::kF32, {4}, 0.0f, 1.0f);
  short_data.mutable_data()->resize(10);
  Write(t, "invalid_short_data", short_data.SerializeAsString());
  std::string raw(1, '\x01');  // not a Tensor: dtype bf16, then raw elements
  for (int i = 0; i < 64; ++i) raw += std::string("\x80\x3f", 2);
  raw += std::string("\x80\x7f", 2);  // bf16 +inf at the end
  Write(t, "raw_bf16_inf", raw);
}

void SessionFileCorpus() {
  const char* t = "session_file";
  gdn::v1::SessionChunk first;
  first.set_session_id("s0");
  first.mutable_config()->set_num_layers(2);
  first.set_layer(0);
  first.set_position(5);
  first.set_layer_bytes(8);
  first.set_data(std::string("\x01\x02\x03\x04", 4));
  gdn::v1::SessionChunk second = first;
  second.clear_config();
  second.set_offset(4);
  second.set_data(std::string("\x05\x06\x07\x08", 4));
  const std::string file = wire::EncodeSessionFile({first, second});
  Write(t, "v2_two_chunks", file);
  // The records without any magic: the target reads them as version 1 too.
  std::string v1_body;
  for (const gdn::v1::SessionChunk& c : {first, second}) {
    const std::string bytes = c.SerializeAsString();
    v1_body += static_cast<char>(bytes.size());  // < 128: a one-byte varint
    v1_body += bytes;
  }
  Write(t, "v1_body", v1_body);
  Write(t, "invalid_truncated", file.substr(0, file.size() - 3));
  std::string damaged = file;
  damaged[12] ^= 0x10;
  Write(t, "invalid_checksum", damaged);
}

void ChannelCorpus() {
  const char* t = "channel_attach";
  // The size selector (4 bytes, little-endian) then the header's bytes.
  auto put = [&](const std::string& name, uint32_t slots, uint64_t request, uint64_t response,
                 uint32_t extra_bytes, uint32_t version) {
    const uint64_t bytes = channel::ChannelBytes(slots, request, response) + extra_bytes;
    std::vector<char> object(bytes);
    channel::ChannelView::Initialize(object.data(), slots, request, response, 0)
        .header()->version = version;
    const uint32_t selector = static_cast<uint32_t>(bytes - channel::kHeaderBytes);
    std::string input(reinterpret_cast<const char*>(&selector), 4);
    input.append(object.data(), 128);  // the header's fields; the rest is zero
    Write(t, name, input);
  };
  put("two_slots", 2, 64, 128, 0, channel::kVersion);
  put("one_slot_spare", 1, 256, 64, 100, channel::kVersion);
  put("invalid_version", 2, 64, 64, 0, 2);
  // A header that claims one more slot than the object holds.
  std::vector<char> object(channel::ChannelBytes(3, 64, 64));
  channel::ChannelView::Initialize(object.data(), 4, 64, 64, 0);
  const uint32_t selector = static_cast<uint32_t>(object.size() - channel::kHeaderBytes);
  std::string input(reinterpret_cast<const char*>(&selector), 4);
  input.append(object.data(), 128);
  Write(t, "invalid_too_small", input);
}

// import_chunks_fuzz: a dtype byte (0 fp32, 1 bf16), then version-1 records
// of SessionChunks for its tiny configuration (2 layers, Hv 1, K = V = 4).
void ImportChunksCorpus() {
  const char* t = "import_chunks";
  auto records = [](const std::vector<gdn::v1::SessionChunk>& chunks) {
    std::string body;
    for (const gdn::v1::SessionChunk& c : chunks) {
      const std::string bytes = c.SerializeAsString();
      std::string varint;
      for (uint64_t n = bytes.size(); ; n >>= 7) {
        varint += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
        if (n < 0x80) break;
      }
      body += varint + bytes;
    }
    return body;
  };
  for (const bool bf16 : {false, true}) {
    const size_t page = bf16 ? 32 : 64;
    gdn::v1::SessionChunk first;
    first.set_session_id("tenant7/chat-1");
    gdn::v1::LayerConfig* c = first.mutable_config();
    c->set_num_layers(2);
    c->set_num_qk_heads(1);
    c->set_num_v_heads(1);
    c->set_head_dim_k(4);
    c->set_head_dim_v(4);
    c->set_activation_dtype(gdn::v1::DTYPE_FP32);
    c->set_state_dtype(bf16 ? "bf16" : "fp32");
    c->set_gating_mode("direct");
    c->set_l2_norm_qk(true);
    c->set_scale(0.5f);
    first.set_layer(0);
    first.set_position(7);
    first.set_layer_bytes(static_cast<int64_t>(page));
    // 0.5 in fp32 (00 00 00 3f) or bf16 (00 3f), first half of the page.
    std::string values;
    for (size_t i = 0; i < page / 2; i += bf16 ? 2 : 4) {
      values += bf16 ? std::string("\x00\x3f", 2) : std::string("\x00\x00\x00\x3f", 4);
    }
    first.set_data(values);
    gdn::v1::SessionChunk second;
    second.set_session_id(first.session_id());
    second.set_layer(0);
    second.set_position(7);
    second.set_layer_bytes(static_cast<int64_t>(page));
    second.set_offset(static_cast<int64_t>(page / 2));
    second.set_data(values);
    gdn::v1::SessionChunk zero;  // layer 1: the zero state
    zero.set_session_id(first.session_id());
    zero.set_layer(1);
    const std::string dtype(1, bf16 ? '\x01' : '\x00');
    const std::string name = bf16 ? "bf16" : "fp32";
    Write(t, name + "_two_layers", dtype + records({first, second, zero}));
    gdn::v1::SessionChunk nan = second;  // a NaN where the state must be finite
    nan.set_data(std::string(page / 2, '\xff'));
    Write(t, name + "_invalid_nan", dtype + records({first, nan, zero}));
  }
}

}  // namespace
}  // namespace gdn::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  gdn::fuzz::g_root = argv[1];
  gdn::fuzz::ReaderCorpus();
  gdn::fuzz::WireCorpus();
  gdn::fuzz::TensorCorpus();
  gdn::fuzz::SessionFileCorpus();
  gdn::fuzz::ChannelCorpus();
  gdn::fuzz::ImportChunksCorpus();
  return 0;
}
