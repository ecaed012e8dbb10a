#include "server/drain_listener.h"

#include <grpcpp/server_posix.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gdn {

absl::StatusOr<std::unique_ptr<DrainListener>> DrainListener::Bind(std::string host, int port) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<DrainListener> listener(new DrainListener());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", host, ": ", gai_strerror(rc)));
  }
  std::string errors;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (listener->port_ != 0) {  // port 0: every address takes the first's
      reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_port =
          htons(static_cast<uint16_t>(listener->port_));  // same offset in v6
    }
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      absl::StrAppend(&errors, " ", std::strerror(errno));
      close(fd);
      continue;
    }
    listener->port_ = LocalPort(fd);
    listener->fds_.push_back(fd);
  }
  freeaddrinfo(found);
  if (listener->fds_.empty()) {
    return absl::UnavailableError(absl::StrCat("could not listen on ", host, ":", port, errors));
  }
  return listener;
}

void DrainListener::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void DrainListener::Close() {
  closing_ = true;
  if (thread_.joinable()) thread_.join();
  for (int fd : fds_) close(fd);
  fds_.clear();
}

int DrainListener::EndConnections() {
  int ended = 0;
  for (const auto& [fd, peer] : connections_) {
    if (IsOurs(fd, peer) && shutdown(fd, SHUT_WR) == 0) ++ended;
  }
  connections_.clear();
  return ended;
}

int DrainListener::LocalPort(int fd) {
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return -1;
  return ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);  // v6 alike
}

bool DrainListener::IsOurs(int fd, const Peer& peer) const {
  Peer now;
  now.length = sizeof(now.address);
  return LocalPort(fd) == port_ &&
         getpeername(fd, reinterpret_cast<sockaddr*>(&now.address), &now.length) == 0 &&
         now.length == peer.length && std::memcmp(&now.address, &peer.address, peer.length) == 0;
}

void DrainListener::AcceptLoop(grpc::Server* server) {
  std::vector<pollfd> polled;
  for (int fd : fds_) polled.push_back({fd, POLLIN, 0});
  absl::Time next_prune = absl::Now() + absl::Seconds(1);
  while (!closing_) {
    // A short timeout: Close() needs no wake-up of its own.
    if (poll(polled.data(), polled.size(), 50) > 0) {
      for (const pollfd& p : polled) {
        if ((p.revents & POLLIN) == 0) continue;
        Peer peer;
        peer.length = sizeof(peer.address);
        const int conn = accept4(p.fd, reinterpret_cast<sockaddr*>(&peer.address), &peer.length,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (conn < 0) continue;
        const int one = 1;
        setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        connections_[conn] = peer;
        grpc::AddInsecureChannelFromFd(server, conn);  // gRPC owns the fd now
      }
    }
    if (absl::Now() >= next_prune) {  // forget the connections gRPC closed
      for (auto it = connections_.begin(); it != connections_.end();) {
        it = IsOurs(it->first, it->second) ? std::next(it) : connections_.erase(it);
      }
      next_prune = absl::Now() + absl::Seconds(1);
    }
  }
}

}  // namespace gdn
