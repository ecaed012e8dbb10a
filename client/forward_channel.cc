#include "client/forward_channel.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/grpc_status.h"
#include "gdn/v1/gdn.grpc.pb.h"

namespace gdn::client {
namespace {

std::string UniqueKey(const std::string& name) {
  static std::atomic<int> counter{0};
  return absl::StrCat("/gdn-", name, "-", getpid(), "-", counter++);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ForwardChannel>> ForwardChannel::Open(
    std::shared_ptr<grpc::Channel> channel, const std::string& name,
    const ForwardChannelOptions& options) {
  if (options.slots < 1 || options.slots > channel::kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("slots must be in [1, ", channel::kMaxSlots, "], got ", options.slots));
  }
  std::unique_ptr<ForwardChannel> c(new ForwardChannel());
  c->channel_ = std::move(channel);
  c->name_ = name;
  c->spin_ = options.spin;
  absl::StatusOr<std::unique_ptr<SharedMemoryObject>> shm = SharedMemoryObject::Create(
      UniqueKey(name),
      channel::ChannelBytes(options.slots, options.request_capacity, options.response_capacity));
  if (!shm.ok()) return shm.status();
  c->shm_ = std::move(*shm);
  c->view_ = channel::ChannelView::Initialize(c->shm_->data(), options.slots,
                                              options.request_capacity,
                                              options.response_capacity, getpid());
  v1::OpenChannelRequest request;
  request.set_name(name);
  request.set_shm_key(c->shm_->key());
  request.set_byte_size(c->shm_->size());
  v1::OpenChannelResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = v1::GdnService::NewStub(c->channel_)->OpenChannel(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  c->opened_ = true;
  return c;
}

ForwardChannel::~ForwardChannel() {
  if (opened_) {
    v1::CloseChannelRequest request;
    request.set_name(name_);
    v1::CloseChannelResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    (void)v1::GdnService::NewStub(channel_)->CloseChannel(&context, request, &response);
  }
}

absl::StatusOr<RawForwardResponse> ForwardChannel::Forward(uint32_t slot,
                                                           const grpc::ByteBuffer& request,
                                                           absl::Duration timeout) {
  std::vector<grpc::Slice> slices;
  (void)request.Dump(&slices);
  absl::StatusOr<channel::Reply> reply = channel::Call(
      view_, slot, request.Length(),
      [&slices](char* out) {
        for (const grpc::Slice& s : slices) {
          std::memcpy(out, s.begin(), s.size());
          out += s.size();
        }
      },
      timeout, spin_);
  if (!reply.ok()) return reply.status();
  if (reply->code != 0) return FromGrpcCode(reply->code, reply->bytes);
  RawForwardResponse out;
  out.message = wire::WireMessage::FromString(std::move(reply->bytes));
  absl::StatusOr<wire::ForwardResponseFields> fields = wire::ScanForwardResponse(out.message);
  if (!fields.ok()) {
    return absl::InternalError(absl::StrCat("malformed response: ", fields.status().message()));
  }
  if (fields->error_code != 0) return FromGrpcCode(fields->error_code, fields->error_message);
  out.fields = *std::move(fields);
  return out;
}

}  // namespace gdn::client
