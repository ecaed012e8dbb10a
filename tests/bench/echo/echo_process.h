// The gdn-echo binary as a child process for tests: started with the given
// flags (listen defaults to 127.0.0.1:0), its one start-up line
// `gdn-echo listening grpc=ADDR` read for the address; SIGTERM on Stop or
// destruction.
#ifndef GDN_TESTS_BENCH_ECHO_ECHO_PROCESS_H_
#define GDN_TESTS_BENCH_ECHO_ECHO_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gdn::echo::testing {

class EchoProcess {
 public:
  // `binary`: the gdn-echo path; `flags`: "--name=value" each.
  static absl::StatusOr<std::unique_ptr<EchoProcess>> Start(const std::string& binary,
                                                            std::vector<std::string> flags);
  ~EchoProcess();

  const std::string& address() const { return address_; }
  // SIGTERM and wait: the exit code (-signal when killed by one).
  int Stop();

 private:
  EchoProcess() = default;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string address_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};
// Runs a shell command to its end.
CommandResult RunCommand(const std::string& command);

}  // namespace gdn::echo::testing

#endif  // GDN_TESTS_BENCH_ECHO_ECHO_PROCESS_H_
