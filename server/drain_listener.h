// The gRPC listening sockets of a server with --snapshot_dir (TCP): sockets
// of our own whose accepted connections are handed to gRPC
// (grpc::AddInsecureChannelFromFd), so that a drain can stop accepting and
// end its open connections before gRPC shuts down.
//
// Why (issue 21, defect 10): grpc::Server::Shutdown fails every call that
// arrives after it began but before the peer saw its GOAWAY, with CANCELLED
// and before any handler runs. Through a proxy that keeps connections open
// (nginx keepalive) such calls are frequent during a drain, since clients
// retry the "draining" answers through it, and a CANCELLED call is lost:
// clients retry only UNAVAILABLE. With sockets of its own the drain instead
// (1) stops accepting: a proxy's next connection is refused, it marks the
// server down and answers 502 (UNAVAILABLE to a gRPC client), whose retry
// goes to the next server; (2) ends the write side of every open connection
// (FIN after what was already written): the peer stops sending on it, and a
// call it sent meanwhile still reaches a handler, whose "draining" answer
// cannot go out (502 again, not applied); (3) only then shuts gRPC down,
// with no call left in flight for it to cancel. The calls the server
// applied had all finished (DrainGate) before the sessions were written, so
// their answers left long before the FIN.
//
// Threading: Start runs the accept loop on a thread of its own; Close and
// EndConnections are for the draining thread, in that order.
#ifndef GDN_SERVER_DRAIN_LISTENER_H_
#define GDN_SERVER_DRAIN_LISTENER_H_

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gdn {

// How long a drain waits, after ending its connections, for the calls their
// peers sent before they saw the end (in flight on the wire, in socket
// buffers) to reach a handler, before gRPC shuts down.
inline constexpr absl::Duration kConnectionEndMargin = absl::Milliseconds(200);

class DrainListener {
 public:
  // Binds every address of `host` (brackets allowed) at `port` (0: any
  // free port, the same for all).
  static absl::StatusOr<std::unique_ptr<DrainListener>> Bind(std::string host, int port);
  ~DrainListener() { Close(); }

  int port() const { return port_; }
  // Hands every accepted connection to `server` until Close().
  void Start(grpc::Server* server);
  // Stops accepting (new connections are refused) and closes the sockets.
  // Idempotent.
  void Close();
  // After Close(): ends the write side of every connection still open (gRPC
  // keeps reading it). Returns how many.
  int EndConnections();

 private:
  struct Peer {
    sockaddr_storage address{};
    socklen_t length = 0;
  };

  DrainListener() = default;
  static int LocalPort(int fd);
  // gRPC closes a connection's fd when it is done with it, and the number
  // may be reused: still ours only if it is a socket on our port to the same
  // peer (nothing else is accepted on our port, and no longer once Close()d).
  bool IsOurs(int fd, const Peer& peer) const;
  void AcceptLoop(grpc::Server* server);

  std::vector<int> fds_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> closing_{false};
  std::map<int, Peer> connections_;  // fd -> peer; the accept thread's until Close()
};

}  // namespace gdn

#endif  // GDN_SERVER_DRAIN_LISTENER_H_
