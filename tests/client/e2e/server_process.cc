#include "tests/client/e2e/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#ifndef GDN_SERVER_BINARY
#error "GDN_SERVER_BINARY (the path of gdn-server) must be defined by the build"
#endif

namespace gdn::e2e {

std::map<std::string, std::string> SmallServerFlags() {
  return {{"listen", "127.0.0.1:0"},      {"metrics_listen", "127.0.0.1:0"},
          {"backend", "cpu"},             {"layers", "3"},
          {"qk_heads", "2"},              {"v_heads", "4"},
          {"head_dim_k", "64"},           {"head_dim_v", "64"},
          {"activation_dtype", "fp32"},   {"state_dtype", "fp32"},
          {"cpu_threads", "2"},           {"max_queue_delay_us", "100"}};
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::map<std::string, std::string>& flags, absl::Duration startup_timeout) {
  std::vector<std::string> args = {GDN_SERVER_BINARY};
  for (const auto& [name, value] : flags) args.push_back(absl::StrCat("--", name, "=", value));
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->pid_ = pid;
  server->stdout_fd_ = pipe_fds[0];

  // Read up to the start-up line.
  std::string buffer;
  const absl::Time deadline = absl::Now() + startup_timeout;
  while (buffer.find('\n') == std::string::npos) {
    const int wait_ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (wait_ms <= 0) {
      return absl::DeadlineExceededError(absl::StrCat("gdn-server printed no start-up line; got '",
                                                      buffer, "'"));
    }
    pollfd p = {server->stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) continue;
    char chunk[512];
    const ssize_t n = read(server->stdout_fd_, chunk, sizeof(chunk));
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat("gdn-server exited before listening: '", buffer,
                                                 "' (args: ", absl::StrJoin(args, " "), ")"));
    }
    buffer.append(chunk, n);
  }
  const std::string line = buffer.substr(0, buffer.find('\n'));
  for (absl::string_view word : absl::StrSplit(line, ' ')) {
    if (absl::ConsumePrefix(&word, "grpc=")) server->grpc_address_ = std::string(word);
    if (absl::ConsumePrefix(&word, "metrics=")) server->metrics_address_ = std::string(word);
  }
  if (!absl::StartsWith(line, "gdn-server listening ") || server->grpc_address_.empty() ||
      server->metrics_address_.empty()) {
    return absl::InternalError(absl::StrCat("unexpected start-up line '", line, "'"));
  }
  // Everything after the start-up line is drained until the server exits.
  const int fd = server->stdout_fd_;
  server->drain_ = std::thread([fd] {
    char chunk[4096];
    while (read(fd, chunk, sizeof(chunk)) > 0) {
    }
  });
  return server;
}

absl::StatusOr<int> ServerProcess::WaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return -WTERMSIG(status);
      return -1;
    }
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("gdn-server did not exit");
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::StatusOr<int> ServerProcess::Terminate(absl::Duration timeout) {
  if (exited_) return absl::FailedPreconditionError("already exited");
  kill(pid_, SIGTERM);
  absl::StatusOr<int> code = WaitExit(timeout);
  if (!code.ok()) {
    kill(pid_, SIGKILL);
    WaitExit(absl::Seconds(10)).IgnoreError();
  }
  return code;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    WaitExit(absl::Seconds(10)).IgnoreError();
  }
  if (drain_.joinable()) drain_.join();  // the pipe closes when the server exits
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

}  // namespace gdn::e2e
