// gdn-server: the Gated DeltaNet state server.
//
// Logs its configuration to stderr, then prints exactly one line to stdout:
//   gdn-server listening grpc=HOST:PORT metrics=HOST:PORT
// with the ports actually bound, and serves until SIGTERM / SIGINT, when it
// drains (stops accepting, finishes in-flight calls, with --snapshot_dir
// writes every session there) and exits. SIGHUP re-reads --tokens_file
// (logging "gdn-server: tokens reloaded: N token(s), M tenant(s)" or why
// the old tokens stay).
//
// Exit status: 0 drained cleanly; 1 could not start; 2 bad flags;
// 3 (kExitSessionsLost) the drain could not write some sessions to
// --snapshot_dir, so they are lost (the log names each one).
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "proto/grpc_transport.h"
#include "server/gdn_server.h"
#include "server/ops/server_flags.h"

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "a gRPC server for Gated DeltaNet linear attention.\n"
      "Usage: gdn-server [--flags]; --help lists them with their defaults.");
  // --help lists the server's flags (defined in server_flags.cc).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "server_flags");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] {
    return std::string("gdn-server ") + gdn::GdnVersion() + "\n";
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  gdn::wire::KeepFreedMemoryForLargeMessages();
  gdn::wire::SkipMutexDeadlockDetection();
  absl::StatusOr<gdn::ServerConfig> config = gdn::ServerConfigFromFlags();
  if (!config.ok()) {
    std::cerr << "gdn-server: " << config.status().message() << std::endl;
    return 2;
  }

  // Every thread started from here on inherits the blocked signals; the main
  // thread takes them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::cerr << "gdn-server " << gdn::GdnVersion() << " configuration:\n"
            << gdn::DescribeServerConfig(*config) << std::flush;
  absl::StatusOr<std::unique_ptr<gdn::GdnServer>> server =
      gdn::GdnServer::Start(*config);
  if (!server.ok()) {
    std::cerr << "gdn-server: " << server.status() << std::endl;
    return 1;
  }
  const gdn::EngineInfo& info = (*server)->engine_info();
  std::cerr << "  backend: " << info.backend_name << " ("
            << info.device_description << ")\n"
            << "  state pages: " << info.layout.page_bytes << " bytes each, "
            << info.device_pages << " device, " << info.host_pages << " host\n"
            << std::flush;
  std::cout << "gdn-server listening grpc=" << (*server)->grpc_address()
            << " metrics=" << (*server)->metrics_address() << std::endl;

  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    absl::Status reloaded = (*server)->ReloadTokens();
    if (reloaded.ok()) {
      auto table = (*server)->authenticator()->table();
      std::cerr << "gdn-server: tokens reloaded: " << table->num_tokens() << " token(s), "
                << table->TenantNames().size() << " tenant(s)" << std::endl;
    } else {
      std::cerr << "gdn-server: SIGHUP: " << reloaded.message() << std::endl;
    }
  }
  std::cerr << "gdn-server: signal " << signal_number << ", draining"
            << std::endl;
  (*server)->Shutdown();
  if (const int lost = (*server)->sessions_lost(); lost > 0) {
    std::cerr << "gdn-server: stopped; " << lost
              << " session(s) could not be written to --snapshot_dir and are lost" << std::endl;
    return gdn::kExitSessionsLost;
  }
  std::cerr << "gdn-server: stopped" << std::endl;
  return 0;
}
