// Reads one Forward request off the wire: checks everything that needs no
// state and packs the inputs for the engine, in one pass over the tensor
// bytes. Runs on the request threads, never under a lock of the engine.
//
//   1. ScanForwardRequest (proto/forward_wire.h): small fields parsed, the
//      tensors located in gRPC's slices, nothing copied.
//   2. layer range, sequences (non-empty distinct ids, position >= 0,
//      num_tokens >= 1), every tensor's dtype / shape / size against the
//      layer configuration and gating mode (the other mode's tensors absent).
//   3. One block from the engine's I/O arena; each payload copied into it
//      once, in cache-sized steps, each step checked right after its copy
//      while it is hot (all values finite; g <= 0, beta in [0, 1]); fused
//      gating (a, b, A_log, dt_bias) folded into g and beta there too.
//   A tensor may instead name bytes of a registered region (Tensor.ref,
//   server/regions/): SYSTEM region bytes are checked where they lie, with
//   no copy, and the engine stages them from there; CUDA region bytes are
//   checked on the device (Backend::CheckValues) and gathered device to
//   device. o_region points o there. The call holds its regions, and fails
//   before it commits if one is unregistered meanwhile.
// A request that fails any check is InvalidArgument naming the field and
// what was expected, e.g. "sequences[1].num_tokens: must be >= 1, got 0",
// "v: expected shape [5, 4, 64] (bf16), got [5, 4, 32]",
// "q: element 17 is nan; every value must be finite"; bytes that do not
// parse are InvalidArgument too. Its block goes back to the arena: nothing
// was handed to the engine, no state was touched.
//
// Pure apart from the arena (thread-safe): safe from any thread.
#ifndef GDN_SERVER_RPC_FORWARD_REQUEST_READER_H_
#define GDN_SERVER_RPC_FORWARD_REQUEST_READER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/gdn_types.h"
#include "proto/forward_wire.h"
#include "server/engine/forward_call.h"
#include "server/engine/io_arena.h"
#include "server/regions/region_registry.h"

namespace gdn {

// What resolves RegionRefs: the registry, the caller's identity in it, and
// the backend that checks values in device regions. Without one (null),
// a request naming a region is InvalidArgument.
struct RegionAccess {
  const RegionRegistry* registry = nullptr;
  Backend* backend = nullptr;
  std::string owner;
};

// Returns the call with layer, sequences (row offsets filled), total_tokens
// and inputs; the caller adds the deadline, cancellation, method and `done`.
// `options` are the server's (activation dtype, shape, gating mode):
//   q, k: [T, Hqk, K]; v: [T, Hv, V] (activation dtype)
//   direct: g [T, Hv] fp32 (<= 0), beta [T, Hv] fp32 (in [0, 1])
//   fused:  a, b [T, Hv] fp32; a_log, dt_bias [Hv] fp32
// *request_id gets the request's id as soon as the bytes parse (0 before),
// so that a stream can answer a refused request under its id.
absl::StatusOr<std::unique_ptr<ForwardCall>> ReadForwardRequest(
    const wire::WireMessage& message, int num_layers, const GdnOptions& options, IoArena& arena,
    uint64_t* request_id, const RegionAccess* regions = nullptr);
// The same from the bytes gRPC received (its slices referenced, not copied).
absl::StatusOr<std::unique_ptr<ForwardCall>> ReadForwardRequest(
    const grpc::ByteBuffer& request, int num_layers, const GdnOptions& options, IoArena& arena,
    uint64_t* request_id, const RegionAccess* regions = nullptr);

}  // namespace gdn

#endif  // GDN_SERVER_RPC_FORWARD_REQUEST_READER_H_
