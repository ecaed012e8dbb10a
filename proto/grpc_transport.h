// gRPC transport settings for the Forward path's multi-MiB messages, applied
// the same way on every end (gdn-server, the echo server, the C++ client and
// gdn-bench), so that a benchmark compares like with like.
//
// Why: at gRPC's defaults a 32 MiB prefill request crawls through HTTP/2 in
// 16 KiB frames behind a 64 KiB stream window that BDP probing only slowly
// widens, and the socket is read 8 KiB at a time; loopback then moves ~1 GB/s
// (measured 2026-12-01, issue 16). A window as large as the largest message
// lets a sender write a whole request without waiting for WINDOW_UPDATEs.
//
// Addresses: "HOST:PORT" for TCP, "unix:/path" (or "unix:///path") for a Unix
// domain socket, the control channel of same-host clients.
#ifndef GDN_PROTO_GRPC_TRANSPORT_H_
#define GDN_PROTO_GRPC_TRANSPORT_H_

#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gdn::wire {

struct TransportOptions {
  // Largest message sent or received.
  int64_t max_message_bytes = 64 << 20;
  // Per-stream flow-control window the receiver offers up front
  // (grpc.http2.lookahead_bytes); 0 keeps gRPC's default.
  int32_t stream_window_bytes = 64 << 20;
  // Largest HTTP/2 DATA frame the receiver accepts (<= 16 MiB - 1).
  int32_t max_frame_bytes = 1 << 20;
  // Bytes per socket read, at most (grpc.experimental.tcp_max_read_chunk_size).
  int32_t max_read_chunk_bytes = 4 << 20;
};

// Channel arguments of a client (and of the echo server's clients).
grpc::ChannelArguments ClientChannelArguments(const TransportOptions& options);
// The same settings on a server being built.
void ApplyServerTransport(const TransportOptions& options, grpc::ServerBuilder* builder);

// Keeps freed heap memory in the process (glibc mallopt: no mmap for blocks
// under 32 MiB, no trimming of free memory under 1 GiB): gRPC reads a multi-MiB message into
// fresh heap slices and frees them after the call, and at glibc's defaults
// every call then maps, zero-fills and unmaps those pages again (perf on the
// request path: ~15% of a 32 MiB prefill call in page faults). Call once, at
// the start of a process that moves such messages.
void KeepFreedMemoryForLargeMessages();

// Turns off absl::Mutex's deadlock detection for the whole process (gRPC's
// own locks are absl::Mutex too). Debian's absl leaves it on: every lock
// acquisition then updates a global lock-order graph (perf of a decode
// 32 x 1 call on the no-compute server: GraphCycles::GetId / InsertEdge /
// RemoveNode ~1.5% of the server's CPU time, plus its global spinlock).
// A debugging aid; the sanitizer builds (TSan) find lock-order problems in
// the tests, which do not call this. Call once at the start of a binary.
void SkipMutexDeadlockDetection();

// Whether `address` names a Unix domain socket ("unix:...").
bool IsUnixAddress(absl::string_view address);
// The socket file of a Unix address ("unix:/tmp/s" and "unix:///tmp/s" ->
// "/tmp/s"); empty for other addresses.
std::string UnixSocketPath(absl::string_view address);

}  // namespace gdn::wire

#endif  // GDN_PROTO_GRPC_TRANSPORT_H_
