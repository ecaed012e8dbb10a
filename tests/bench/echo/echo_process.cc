#include "tests/bench/echo/echo_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gdn::echo::testing {

absl::StatusOr<std::unique_ptr<EchoProcess>> EchoProcess::Start(const std::string& binary,
                                                                std::vector<std::string> flags) {
  bool has_listen = false;
  for (const std::string& f : flags) has_listen = has_listen || absl::StartsWith(f, "--listen=");
  if (!has_listen) flags.push_back("--listen=127.0.0.1:0");
  std::vector<std::string> args = {binary};
  args.insert(args.end(), flags.begin(), flags.end());
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::unique_ptr<EchoProcess> p(new EchoProcess());
  p->pid_ = pid;
  p->stdout_fd_ = fds[0];
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (line.find('\n') == std::string::npos) {
    pollfd pfd{fds[0], POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline || poll(&pfd, 1, 200) < 0) {
      return absl::DeadlineExceededError("gdn-echo printed no start-up line");
    }
    if (!(pfd.revents & (POLLIN | POLLHUP))) continue;
    char buf[256];
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) return absl::UnavailableError(absl::StrCat("gdn-echo exited: ", line));
    line.append(buf, n);
  }
  const std::string prefix = "gdn-echo listening grpc=";
  if (!absl::StartsWith(line, prefix)) {
    return absl::InternalError(absl::StrCat("unexpected start-up line: ", line));
  }
  p->address_ = line.substr(prefix.size(), line.find('\n') - prefix.size());
  return p;
}

int EchoProcess::Stop() {
  if (pid_ < 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  close(stdout_fd_);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

EchoProcess::~EchoProcess() { Stop(); }

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace gdn::echo::testing
