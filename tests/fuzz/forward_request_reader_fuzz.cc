// Fuzz target: the server's Forward request reader
// (server/rpc/forward_request_reader.h): parsing, every field's validation,
// packing into the I/O arena, fused gating, and RegionRefs into a registered
// SYSTEM region, on the CPU backend. Input format and configuration:
// reader_fuzz_config.h.
//
// Properties, beyond "no crash, no sanitizer finding":
//   - a refusal is InvalidArgument (NotFound for an unknown region) and
//     leaves no arena block and no region hold behind;
//   - an accepted call is what the engine relies on: sequences non-empty with
//     row offsets adding up to total_tokens, every input finite, g in
//     [kMinFusedDecay, 0], beta in [0, 1], inline direct inputs byte for byte
//     the request's, o_region T rows inside the region; and dropping the call
//     returns its block and its hold.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/dtype_convert.h"
#include "kernels/gating.h"
#include "server/rpc/forward_request_reader.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/reader_fuzz_config.h"

namespace gdn::fuzz {
namespace {

// Process-wide: the backend, the arena and the registered region outlive
// every input (as in the server).
struct World {
  std::unique_ptr<Backend> backend = CreateCpuBackend(1);
  IoArena arena{backend.get(), 16 << 20};
  RegionRegistry registry{backend.get()};
  char* region = nullptr;  // the server's mapping of the region (not ours)
  RegionAccess access;
};

World* MakeWorld() {
  auto* w = new World;
  const std::string key = absl::StrCat("/gdn-fuzz-", getpid());
  shm_unlink(key.c_str());  // one a crashed run with the same pid left
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(ftruncate(fd, kRegionBytes) == 0);
  void* p = mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  FUZZ_CHECK(p != MAP_FAILED);
  std::memset(static_cast<char*>(p) + kRegionBytes / 2, 0xff, kRegionBytes / 2);
  gdn::v1::RegisterRegionRequest r;
  r.set_name(kRegionName);
  r.set_kind(gdn::v1::REGION_SYSTEM);
  r.set_key(key);
  r.set_byte_size(kRegionBytes);
  const absl::Status registered = w->registry.Register("", r);
  shm_unlink(key.c_str());  // the mappings stay; nothing is left in /dev/shm
  FUZZ_CHECK(registered.ok());
  // Where the server mapped it: what the reader's pointers must lie in.
  absl::StatusOr<ResolvedRef> whole = w->registry.Resolve("", {kRegionName, 0, 1}, 1, "x");
  FUZZ_CHECK(whole.ok());
  w->region = whole->host;
  w->access.registry = &w->registry;
  w->access.backend = w->backend.get();
  return w;
}

World& TheWorld() {
  static World* world = MakeWorld();
  return *world;
}

wire::WireMessage Message(const uint8_t* data, size_t size, int slice_bytes) {
  if (slice_bytes == 0) {
    return wire::WireMessage::FromString(std::string(reinterpret_cast<const char*>(data), size));
  }
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < size; at += slice_bytes) {
    slices.emplace_back(data + at, std::min<size_t>(slice_bytes, size - at));
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  absl::StatusOr<wire::WireMessage> m = wire::WireMessage::FromByteBuffer(buffer);
  FUZZ_CHECK(m.ok());
  return *m;
}

bool InRegion(const World& w, const char* p, size_t bytes) {
  return p >= w.region && p <= w.region + kRegionBytes &&
         bytes <= static_cast<size_t>(w.region + kRegionBytes - p);
}

int64_t RegionCallsInFlight(const World& w) {
  const std::vector<gdn::v1::RegionInfo> regions = w.registry.List("");
  FUZZ_CHECK(regions.size() == 1);
  return regions[0].calls_in_flight();
}

void CheckCall(const World& w, const wire::WireMessage& m, const GdnOptions& o,
               const ForwardCall& call) {
  FUZZ_CHECK(!call.sequences.empty());
  int64_t rows = 0;
  for (const ForwardSequence& s : call.sequences) {
    FUZZ_CHECK(s.row_offset == rows && s.num_tokens >= 1 && s.position >= 0);
    rows += s.num_tokens;
  }
  FUZZ_CHECK(rows == call.total_tokens);
  FUZZ_CHECK(call.layer >= 0 && call.layer < kReaderLayers);

  const size_t T = static_cast<size_t>(call.total_tokens);
  const PackedInputs& in = call.inputs;
  const wire::ForwardRequestFields f = *wire::ScanForwardRequest(m);
  const wire::TensorField* fields[] = {&f.q, &f.k, &f.v, &f.g, &f.beta};
  for (int i = 0; i < PackedInputs::kCount; ++i) {
    const DType dtype = i < PackedInputs::kG ? o.input_dtype : DType::kF32;
    const size_t n = T * in.row_bytes(i) / DTypeSize(dtype);
    const char* src = in.source[i];
    FUZZ_CHECK(!in.on_device[i]);  // no CUDA regions on the cpu backend
    const bool in_block = in.block != nullptr && src >= in.block->data &&
                          src < in.block->data + in.block->capacity;
    FUZZ_CHECK(in_block ? n * DTypeSize(dtype) <=
                              static_cast<size_t>(in.block->data + in.block->capacity - src)
                        : InRegion(w, src, n * DTypeSize(dtype)));
    for (size_t e = 0; e < n; ++e) {
      const float x = LoadAsFloat(src, dtype, e);
      FUZZ_CHECK(std::isfinite(x));
      if (i == PackedInputs::kG) FUZZ_CHECK(x <= 0.0f && x >= kMinFusedDecay);
      if (i == PackedInputs::kBeta) FUZZ_CHECK(x >= 0.0f && x <= 1.0f);
    }
    const bool computed = o.gating == GatingMode::kFused && i >= PackedInputs::kG;
    if (!computed && !fields[i]->has_ref) {
      FUZZ_CHECK(fields[i]->data.size == n * DTypeSize(dtype));
      std::string sent(fields[i]->data.size, '\0');
      m.CopyTo(fields[i]->data, sent.data());
      FUZZ_CHECK(std::memcmp(sent.data(), src, sent.size()) == 0);
    }
  }
  FUZZ_CHECK(f.has_o_region == (call.o_region != nullptr));
  if (call.o_region != nullptr) {
    FUZZ_CHECK(InRegion(w, call.o_region, T * in.layout.v_row));
    FUZZ_CHECK(!call.o_region_on_device);
  }
}

}  // namespace
}  // namespace gdn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gdn;
  using namespace gdn::fuzz;
  if (size < 1) return 0;
  World& w = TheWorld();
  const GdnOptions options = ReaderOptions(data[0]);
  const wire::WireMessage m = Message(data + 1, size - 1, SliceBytes(data[0]));
  uint64_t request_id = 1;
  absl::StatusOr<std::unique_ptr<ForwardCall>> call =
      ReadForwardRequest(m, kReaderLayers, options, w.arena, &request_id, &w.access);
  absl::StatusOr<wire::ForwardRequestFields> scanned = wire::ScanForwardRequest(m);
  FUZZ_CHECK(request_id == (scanned.ok() ? scanned->request_id : 0));
  // GDN_FUZZ_VERBOSE=1: what became of each input (to check the seeds).
  static const bool verbose = std::getenv("GDN_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "reader: %s\n",
                 call.ok() ? "accepted" : std::string(call.status().message()).c_str());
  }
  if (call.ok()) {
    FUZZ_CHECK(scanned.ok());
    CheckCall(w, m, options, **call);
    call->reset();  // the engine is done with it
  } else {
    const absl::StatusCode code = call.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound);
  }
  FUZZ_CHECK(w.arena.Stats().blocks_in_use == 0);
  FUZZ_CHECK(RegionCallsInFlight(w) == 0);
  return 0;
}
