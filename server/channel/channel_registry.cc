#include "server/channel/channel_registry.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/regions/shared_memory.h"

namespace gdn {
namespace {

constexpr size_t kMaxNameBytes = 256;

}  // namespace

absl::StatusOr<uint32_t> ChannelRegistry::Open(const std::string& owner,
                                               const gdn::v1::OpenChannelRequest& request,
                                               ChannelHandler handler) {
  if (request.name().empty() || request.name().size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("name: must be 1..", kMaxNameBytes,
                                                   " bytes, got ", request.name().size()));
  }
  if (request.byte_size() < channel::kHeaderBytes ||
      request.byte_size() > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte_size: must be in [", channel::kHeaderBytes, ", 2^40], got ",
                     request.byte_size()));
  }
  const auto key = std::make_pair(owner, request.name());
  {
    std::lock_guard<std::mutex> lock(mu_);
    DropFinished();
    if (channels_.count(key) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("channel '", request.name(), "' is already open"));
    }
    if (static_cast<int>(channels_.size()) >= max_channels_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this server serves at most ", max_channels_,
                       " channels at once (--max_channels); close one first"));
    }
  }
  const int64_t bytes = static_cast<int64_t>(request.byte_size());
  absl::StatusOr<SharedMemoryMapping> mapping = MapSharedMemory(request.shm_key(), 0, bytes);
  if (!mapping.ok()) return mapping.status();
  absl::StatusOr<std::unique_ptr<ChannelServer>> server = ChannelServer::Start(
      mapping->mapping, mapping->data, request.byte_size(), std::move(handler), options_);
  if (!server.ok()) return server.status();
  const uint32_t slots = (*server)->slot_count();
  std::lock_guard<std::mutex> lock(mu_);
  DropFinished();
  if (channels_.count(key) != 0) {  // a racing Open of the same name won
    return absl::AlreadyExistsError(
        absl::StrCat("channel '", request.name(), "' is already open"));
  }
  if (static_cast<int>(channels_.size()) >= max_channels_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this server serves at most ", max_channels_, " channels at once"));
  }
  channels_.emplace(key, std::move(*server));
  return slots;
}

absl::Status ChannelRegistry::Close(const std::string& owner, const std::string& name) {
  std::unique_ptr<ChannelServer> server;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = channels_.find(std::make_pair(owner, name));
    if (it == channels_.end()) {
      return absl::NotFoundError(absl::StrCat("no channel named '", name, "' is open"));
    }
    server = std::move(it->second);
    channels_.erase(it);
  }
  server->Stop();  // outside the lock: joins the thread
  return absl::OkStatus();
}

void ChannelRegistry::StopAll() {
  std::map<std::pair<std::string, std::string>, std::unique_ptr<ChannelServer>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(channels_);
  }
  for (auto& [key, server] : all) server->Stop();
}

int ChannelRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  int open = 0;
  for (const auto& [key, server] : channels_) open += server->finished() ? 0 : 1;
  return open;
}

void ChannelRegistry::DropFinished() {
  for (auto it = channels_.begin(); it != channels_.end();) {
    it = it->second->finished() ? channels_.erase(it) : std::next(it);
  }
}

}  // namespace gdn
