// Runs the real gdn-server binary for end-to-end tests: CPU backend, free
// ports (port 0), small shapes by default. Start() waits for the one start-up
// line `gdn-server listening grpc=HOST:PORT metrics=HOST:PORT`; the rest of
// its stdout is drained by a thread (so the server never blocks on a full
// pipe), its stderr goes to the test's stderr.
#ifndef GDN_TESTS_CLIENT_E2E_SERVER_PROCESS_H_
#define GDN_TESTS_CLIENT_E2E_SERVER_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gdn::e2e {

// Flags of a small CPU server: 3 layers, Hqk 2, Hv 4, K = V = 64, fp32
// activations, 2 CPU threads. Tests override entries (e.g. activation_dtype).
std::map<std::string, std::string> SmallServerFlags();

class ServerProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::map<std::string, std::string>& flags,
      absl::Duration startup_timeout = absl::Seconds(30));
  ~ServerProcess();  // SIGKILL when still running

  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  pid_t pid() const { return pid_; }

  // Sends SIGTERM and waits; the exit code, or -signal when killed by one.
  // DeadlineExceeded (and SIGKILL) when it does not exit within `timeout`.
  absl::StatusOr<int> Terminate(absl::Duration timeout = absl::Seconds(20));

 private:
  ServerProcess() = default;
  absl::StatusOr<int> WaitExit(absl::Duration timeout);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool exited_ = false;
  std::thread drain_;
  std::string grpc_address_;
  std::string metrics_address_;
};

}  // namespace gdn::e2e

#endif  // GDN_TESTS_CLIENT_E2E_SERVER_PROCESS_H_
