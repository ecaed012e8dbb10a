// gdn-cli: a command line for a gdn-server.
//
//   gdn-cli --server=HOST:PORT <command> [flags]
//
// Commands: info, create [--id], fork --parent [--id], close --id,
// describe --id, list, forward --id --layer --q --k --v (--g --beta | --a --b
// --a_log --dt_bias) --out [--position] [--out_dtype=fp32], export --id --out
// DIR_OR_FILE, import --file [--id]. Tensors are .npy files (client/npy.h;
// bf16 as uint16 bit patterns).
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli/cli_commands.h"
#include "client/gdn_client.h"
#include "client/security_flags.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "gdn-server address HOST:PORT");
ABSL_FLAG(double, deadline_s, 120, "per-call deadline in seconds");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "largest gRPC message sent or received");
ABSL_FLAG(std::string, id, "", "session id (create / fork: the new id, empty = server picks)");
ABSL_FLAG(std::string, parent, "", "fork: the parent session id");
ABSL_FLAG(int32_t, layer, -1, "forward: layer index");
ABSL_FLAG(int64_t, position, -1, "forward: the session's position (default: read from the server)");
ABSL_FLAG(std::string, q, "", "forward: q.npy [T, Hqk, K]");
ABSL_FLAG(std::string, k, "", "forward: k.npy [T, Hqk, K]");
ABSL_FLAG(std::string, v, "", "forward: v.npy [T, Hv, V]");
ABSL_FLAG(std::string, g, "", "forward (direct gating): g.npy [T, Hv]");
ABSL_FLAG(std::string, beta, "", "forward (direct gating): beta.npy [T, Hv]");
ABSL_FLAG(std::string, a, "", "forward (fused gating): a.npy [T, Hv]");
ABSL_FLAG(std::string, b, "", "forward (fused gating): b.npy [T, Hv]");
ABSL_FLAG(std::string, a_log, "", "forward (fused gating): A_log.npy [Hv]");
ABSL_FLAG(std::string, dt_bias, "", "forward (fused gating): dt_bias.npy [Hv]");
ABSL_FLAG(std::string, out, "", "forward: o.npy to write; export: a file or a directory");
ABSL_FLAG(std::string, out_dtype, "", "forward: 'fp32' converts o to fp32 (default: the activation dtype)");
ABSL_FLAG(std::string, file, "", "import: the snapshot file written by export");

namespace {

using gdn::client::cli::CliFlags;
using gdn::client::cli::kExitUsage;

// Flags each command needs (beyond --server).
const std::map<std::string, std::vector<std::string>>& RequiredFlags() {
  static const auto* required = new std::map<std::string, std::vector<std::string>>{
      {"info", {}},
      {"create", {}},
      {"fork", {"parent"}},
      {"close", {"id"}},
      {"describe", {"id"}},
      {"list", {}},
      {"forward", {"id", "layer", "q", "k", "v", "out"}},
      {"export", {"id", "out"}},
      {"import", {"file"}},
  };
  return *required;
}

bool IsSet(const CliFlags& f, const std::string& name) {
  if (name == "id") return !f.id.empty();
  if (name == "parent") return !f.parent.empty();
  if (name == "layer") return f.layer >= 0;
  if (name == "q") return !f.q.empty();
  if (name == "k") return !f.k.empty();
  if (name == "v") return !f.v.empty();
  if (name == "out") return !f.out.empty();
  if (name == "file") return !f.file.empty();
  return false;
}

std::string Commands() {
  std::vector<std::string> names;
  for (const auto& [name, flags] : RequiredFlags()) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gdn-cli --server=HOST:PORT <command> [flags]\n"
      "commands: info, create [--id], fork --parent [--id], close --id, describe --id, list,\n"
      "  forward --id --layer --q --k --v (--g --beta | --a --b --a_log --dt_bias) --out,\n"
      "  export --id --out DIR_OR_FILE, import --file [--id]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::cerr << "gdn-cli: expected exactly one command (" << Commands() << "), got "
              << args.size() - 1 << "\n";
    return kExitUsage;
  }
  const std::string command = args[1];
  auto required = RequiredFlags().find(command);
  if (required == RequiredFlags().end()) {
    std::cerr << "gdn-cli: unknown command '" << command << "' (commands: " << Commands()
              << ")\n";
    return kExitUsage;
  }

  CliFlags flags;
  flags.id = absl::GetFlag(FLAGS_id);
  flags.parent = absl::GetFlag(FLAGS_parent);
  flags.layer = absl::GetFlag(FLAGS_layer);
  flags.position = absl::GetFlag(FLAGS_position);
  flags.q = absl::GetFlag(FLAGS_q);
  flags.k = absl::GetFlag(FLAGS_k);
  flags.v = absl::GetFlag(FLAGS_v);
  flags.g = absl::GetFlag(FLAGS_g);
  flags.beta = absl::GetFlag(FLAGS_beta);
  flags.a = absl::GetFlag(FLAGS_a);
  flags.b = absl::GetFlag(FLAGS_b);
  flags.a_log = absl::GetFlag(FLAGS_a_log);
  flags.dt_bias = absl::GetFlag(FLAGS_dt_bias);
  flags.out = absl::GetFlag(FLAGS_out);
  flags.out_dtype = absl::GetFlag(FLAGS_out_dtype);
  flags.file = absl::GetFlag(FLAGS_file);
  for (const std::string& name : required->second) {
    if (!IsSet(flags, name)) {
      std::cerr << "gdn-cli " << command << ": --" << name << " is required\n";
      return kExitUsage;
    }
  }
  if (!flags.out_dtype.empty() && flags.out_dtype != "fp32") {
    std::cerr << "gdn-cli: --out_dtype must be empty or 'fp32', got '" << flags.out_dtype
              << "'\n";
    return kExitUsage;
  }
  const double deadline_s = absl::GetFlag(FLAGS_deadline_s);
  if (deadline_s <= 0) {
    std::cerr << "gdn-cli: --deadline_s must be positive\n";
    return kExitUsage;
  }

  gdn::client::GdnClientOptions options;
  options.deadline = absl::Seconds(deadline_s);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  absl::StatusOr<gdn::client::ChannelSecurity> security =
      gdn::client::ChannelSecurityFromFlags();
  if (!security.ok()) {
    std::cerr << "gdn-cli: " << security.status().message() << "\n";
    return kExitUsage;
  }
  options.security = std::move(*security);
  gdn::client::GdnClient client(absl::GetFlag(FLAGS_server), options);

  namespace cli = gdn::client::cli;
  if (command == "info") return cli::RunInfo(client);
  if (command == "create") return cli::RunCreate(client, flags);
  if (command == "fork") return cli::RunFork(client, flags);
  if (command == "close") return cli::RunClose(client, flags);
  if (command == "describe") return cli::RunDescribe(client, flags);
  if (command == "list") return cli::RunList(client);
  if (command == "forward") return cli::RunForward(client, flags);
  if (command == "export") return cli::RunExport(client, flags);
  return cli::RunImport(client, flags);
}
