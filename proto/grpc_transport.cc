#include "proto/grpc_transport.h"

#include <grpc/grpc.h>
#include <malloc.h>

#include <algorithm>
#include <climits>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"

namespace gdn::wire {
namespace {

int ClampToInt(int64_t v) { return static_cast<int>(std::min<int64_t>(v, INT_MAX)); }

// The settings as (key, value) pairs, shared by clients and servers.
template <typename SetInt>
void ForEachSetting(const TransportOptions& o, SetInt&& set) {
  if (o.stream_window_bytes > 0) set(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, o.stream_window_bytes);
  if (o.max_frame_bytes > 0) set(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, o.max_frame_bytes);
  if (o.max_read_chunk_bytes > 0) {
    set(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, o.max_read_chunk_bytes);
  }
}

}  // namespace

grpc::ChannelArguments ClientChannelArguments(const TransportOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(ClampToInt(options.max_message_bytes));
  args.SetMaxSendMessageSize(ClampToInt(options.max_message_bytes));
  ForEachSetting(options, [&args](const char* key, int value) { args.SetInt(key, value); });
  return args;
}

void ApplyServerTransport(const TransportOptions& options, grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(ClampToInt(options.max_message_bytes));
  builder->SetMaxSendMessageSize(ClampToInt(options.max_message_bytes));
  ForEachSetting(options, [builder](const char* key, int value) {
    builder->AddChannelArgument(key, value);
  });
}

void KeepFreedMemoryForLargeMessages() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void SkipMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

bool IsUnixAddress(absl::string_view address) { return absl::StartsWith(address, "unix:"); }

std::string UnixSocketPath(absl::string_view address) {
  if (!IsUnixAddress(address)) return "";
  absl::string_view path = address.substr(5);
  if (absl::StartsWith(path, "//")) path.remove_prefix(2);
  return std::string(path);
}

}  // namespace gdn::wire
