// The fixture of the end-to-end tests: a real gdn-server process (CPU
// backend, small shapes), a GdnClient on it, and an OracleModel of what the
// server should hold, with helpers that send a Forward and check o, and that
// export a session and check its states, against the float64 oracle.
#ifndef GDN_TESTS_CLIENT_E2E_E2E_FIXTURE_H_
#define GDN_TESTS_CLIENT_E2E_E2E_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/gdn_client.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "tests/client/e2e/oracle_model.h"
#include "tests/client/e2e/server_process.h"

namespace gdn::e2e {

class E2eTest : public ::testing::Test {
 protected:
  // Starts the server with SmallServerFlags() updated by `overrides`, then
  // connects and reads its config (use ASSERT_NO_FATAL_FAILURE).
  void StartServer(const std::map<std::string, std::string>& overrides = {});

  // One Forward at `layer` for `sessions` with `tokens[i]` new tokens each
  // (fresh inputs from `seed`): o must match the model within tolerance.
  void ForwardChecked(int layer, const std::vector<client::Session*>& sessions,
                      const std::vector<int>& tokens, uint64_t seed);
  // Exports `id` and compares every layer's position and state with the model.
  void ExpectStatesMatch(const std::string& id);

  // max|o - ref| / max|ref| allowed: fp32 activations 1e-3 (shared/GDN.md's
  // bar), 16-bit activations add one rounding of o.
  double OutputTolerance() const;
  // The metrics page now.
  std::string ScrapeMetrics();

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<client::GdnClient> client_;
  v1::ServerInfoResponse info_;
  GdnOptions options_;
  std::unique_ptr<OracleModel> model_;
};

}  // namespace gdn::e2e

#endif  // GDN_TESTS_CLIENT_E2E_E2E_FIXTURE_H_
