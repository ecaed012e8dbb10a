// The fixture of the in-process service tests (gdn_service_test.cc,
// gdn_service_stream_test.cc): a real GdnService with the cpu backend on a
// free port (ServerHarness), random calls built against the float64 oracle
// model, and the tolerance of the cpu backend's fp32 arithmetic.
#ifndef GDN_TESTS_SERVER_RPC_GDN_SERVICE_FIXTURE_H_
#define GDN_TESTS_SERVER_RPC_GDN_SERVICE_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/test_random.h"

namespace gdn::testing {

// fp32 activations and state: the cpu backend's fp32 arithmetic against
// float64.
inline constexpr double kServiceTolerance = 2e-4;

class GdnServiceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = gdn::testing::FreshSeed();
    harness_ = std::make_unique<gdn::testing::ServerHarness>(
        gdn::testing::SmallServerConfig());
    ASSERT_NE(harness_->channel(), nullptr);
    options_ = harness_->config().options;
    oracle_ = std::make_unique<OracleModel>(options_);
  }

  // A random call: sessions[i] at positions[i] with lens[i] tokens on
  // `layer`. Returns the request; *expected gets the oracle's o (and the
  // oracle's states advance) only when `apply` is true.
  gdn::v1::ForwardRequest MakeCall(int layer,
                                   const std::vector<std::string>& sessions,
                                   const std::vector<int64_t>& positions,
                                   const std::vector<int>& lens,
                                   std::vector<double>* expected,
                                   bool apply = true) {
    const oracle::Inputs inputs =
        MakeRandomInputs(options_, lens, seed_ + (++calls_) * 7919, false);
    std::vector<SeqSpec> specs;
    for (size_t i = 0; i < sessions.size(); ++i) {
      specs.push_back({sessions[i], positions[i]});
    }
    if (apply) *expected = oracle_->Apply(layer, sessions, inputs);
    return BuildForwardRequest(options_, layer, specs, inputs);
  }

  void ExpectMatches(const gdn::v1::ForwardResponse& response,
                     const std::vector<double>& expected) {
    EXPECT_LT(gdn::testing::MaxRelError(response.o(), expected), kServiceTolerance);
  }

  uint64_t seed_ = 0;
  int calls_ = 0;
  std::unique_ptr<gdn::testing::ServerHarness> harness_;
  GdnOptions options_;
  std::unique_ptr<OracleModel> oracle_;
};

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_RPC_GDN_SERVICE_FIXTURE_H_
