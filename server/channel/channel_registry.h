// The same-host Forward channels clients opened, by (owner, name) like
// regions (server/regions/region_registry.h): each maps the client's shm
// object and serves it on a thread of its own (channel_server.h) until
// CloseChannel, until its client process exits, or until StopAll.
//
// Thread-safe: every method may run on any thread.
#ifndef GDN_SERVER_CHANNEL_CHANNEL_REGISTRY_H_
#define GDN_SERVER_CHANNEL_CHANNEL_REGISTRY_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"
#include "server/channel/channel_server.h"

namespace gdn {

class ChannelRegistry {
 public:
  // At most `max_channels` open at once (each holds a thread, spinning
  // while its client is busy).
  ChannelRegistry(int max_channels, ChannelServer::Options options)
      : max_channels_(max_channels), options_(options) {}
  ~ChannelRegistry() { StopAll(); }

  // Maps request.shm_key and serves it with `handler`; returns the slot
  // count. InvalidArgument for a bad name or layout; NotFound for a
  // missing object; AlreadyExists for a name the owner has open;
  // ResourceExhausted past max_channels. A channel whose client exited
  // frees its name and its place.
  absl::StatusOr<uint32_t> Open(const std::string& owner,
                                const gdn::v1::OpenChannelRequest& request,
                                ChannelHandler handler);
  // NotFound when the owner has no such channel.
  absl::Status Close(const std::string& owner, const std::string& name);
  // Stops every channel (server shutdown).
  void StopAll();
  int size() const;

 private:
  void DropFinished();  // mu_ held

  const int max_channels_;
  const ChannelServer::Options options_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<ChannelServer>> channels_;
};

}  // namespace gdn

#endif  // GDN_SERVER_CHANNEL_CHANNEL_REGISTRY_H_
