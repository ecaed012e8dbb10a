// gdn-cli's commands, one function each. Flags are parsed in main.cc and
// handed over as CliFlags so the commands stay plain functions of their
// inputs. Each returns the process exit code after printing its result to
// stdout (errors to stderr).
#ifndef GDN_CLIENT_CLI_CLI_COMMANDS_H_
#define GDN_CLIENT_CLI_CLI_COMMANDS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "client/gdn_client.h"

namespace gdn::client::cli {

// Exit codes: 0 success, 1 the server (or a file) said no, 2 bad usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

struct CliFlags {
  std::string id;
  std::string parent;
  int32_t layer = -1;
  int64_t position = -1;  // -1: the session's stored position (DescribeSession)
  std::string q, k, v, g, beta, a, b, a_log, dt_bias;  // .npy paths
  std::string out;
  std::string out_dtype;  // "" (the activation dtype) or "fp32"
  std::string file;
};

// Prints `status` as "error: CODE: message" and returns kExitError (or
// kExitUsage for InvalidArgument raised before any call).
int ReportError(const absl::Status& status);

int RunInfo(GdnClient& client);
int RunCreate(GdnClient& client, const CliFlags& flags);
int RunFork(GdnClient& client, const CliFlags& flags);
int RunClose(GdnClient& client, const CliFlags& flags);
int RunDescribe(GdnClient& client, const CliFlags& flags);
int RunList(GdnClient& client);
int RunForward(GdnClient& client, const CliFlags& flags);
int RunExport(GdnClient& client, const CliFlags& flags);
int RunImport(GdnClient& client, const CliFlags& flags);

}  // namespace gdn::client::cli

#endif  // GDN_CLIENT_CLI_CLI_COMMANDS_H_
