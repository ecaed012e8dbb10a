// End to end, operations: /metrics counts what was sent, grpc.health.v1 and
// reflection answer, SIGTERM drains in-flight calls and exits 0, and a drain
// that cannot write its sessions to --snapshot_dir exits non-zero.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "client/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "tests/client/e2e/e2e_fixture.h"
#include "tests/client/e2e/grpc_probes.h"
#include "tests/client/e2e/metrics_scrape.h"
#include "tests/server/temp_dir.h"

namespace gdn::e2e {
namespace {

using client::Session;

class OpsE2eTest : public E2eTest {
 protected:
  double Requests(const std::string& text, const std::string& method, const std::string& code) {
    return SumSamples(text, "gdn_requests_total", {{"method", method}, {"code", code}});
  }
};

TEST_F(OpsE2eTest, MetricsCountWhatWasSent) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::string before = ScrapeMetrics();
  ASSERT_TRUE(HasMetric(before, "gdn_sessions")) << before;
  // 3 sessions; prefill 13 tokens on 2 layers each; 4 batched decode steps on
  // layer 0; 2 bad calls; one close.
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Session> s = Session::Create(client_.get());
    ASSERT_TRUE(s.ok());
    sessions.push_back(std::make_unique<Session>(*std::move(s)));
    model_->AddSession(sessions.back()->id());
  }
  int ok_calls = 0;
  int64_t tokens = 0;
  for (auto& s : sessions) {
    for (int layer : {0, 1}) {
      ASSERT_NO_FATAL_FAILURE(ForwardChecked(layer, {s.get()}, {13}, 5 * ok_calls + layer));
      ++ok_calls;
      tokens += 13;
    }
  }
  for (int step = 0; step < 4; ++step) {
    ASSERT_NO_FATAL_FAILURE(ForwardChecked(
        0, {sessions[0].get(), sessions[1].get(), sessions[2].get()}, {1, 1, 1}, 100 + step));
    ++ok_calls;
    tokens += 3;
  }
  for (int i = 0; i < 2; ++i) {
    v1::ForwardRequest bad;
    bad.set_layer(99);
    EXPECT_FALSE(client_->Forward(bad).ok());
  }
  ASSERT_TRUE(sessions[2]->Close().ok());

  const std::string after = ScrapeMetrics();
  EXPECT_EQ(Requests(after, "Forward", "OK") - Requests(before, "Forward", "OK"), ok_calls);
  EXPECT_EQ(Requests(after, "Forward", "INVALID_ARGUMENT") -
                Requests(before, "Forward", "INVALID_ARGUMENT"),
            2);
  EXPECT_EQ(Requests(after, "CreateSession", "OK") - Requests(before, "CreateSession", "OK"), 3);
  EXPECT_EQ(Requests(after, "CloseSession", "OK") - Requests(before, "CloseSession", "OK"), 1);
  EXPECT_EQ(SumSamples(after, "gdn_tokens_total") - SumSamples(before, "gdn_tokens_total"),
            tokens);
  // Every OK Forward was timed.
  EXPECT_EQ(SumSamples(after, "gdn_request_duration_seconds_count", {{"method", "Forward"}}) -
                SumSamples(before, "gdn_request_duration_seconds_count", {{"method", "Forward"}}),
            ok_calls + 2);
  // The cache gauges are refreshed by the engine after session commands and
  // on a 1 s timer, so they may lag the Close response by a moment: wait for
  // them (bounded). 6 layer states written (3 sessions x 2 layers), one
  // session closed: 2 sessions, 4 used pages.
  std::string gauges = after;
  for (int i = 0; i < 300 && (SumSamples(gauges, "gdn_sessions") != 2 ||
                              SumSamples(gauges, "gdn_state_cache_pages",
                                         {{"state", "used"}}) != 4);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    gauges = ScrapeMetrics();
  }
  EXPECT_EQ(SumSamples(gauges, "gdn_sessions"), 2);
  EXPECT_EQ(SumSamples(gauges, "gdn_state_cache_pages", {{"state", "used"}}), 4);
}

TEST_F(OpsE2eTest, HealthAndReflectionAnswer) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto channel = grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials());
  absl::StatusOr<int> overall = HealthCheck(channel, "");
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, 1);  // SERVING
  // Probes that name the service (Kubernetes grpc probes) get SERVING too.
  absl::StatusOr<int> named = HealthCheck(channel, "gdn.v1.GdnService");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(*named, 1);
  // An unregistered service name is NOT_FOUND (the health protocol's rule),
  // which shows the answer above came from a real health service.
  EXPECT_EQ(HealthCheck(channel, "no.such.Service").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<std::string>> services = ReflectionListServices(channel);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_NE(std::find(services->begin(), services->end(), "gdn.v1.GdnService"), services->end());
  EXPECT_NE(std::find(services->begin(), services->end(), "grpc.health.v1.Health"),
            services->end());
}

// Calls in flight when SIGTERM arrives finish (OK) or are refused cleanly
// (UNAVAILABLE / CANCELLED); none fails another way, and the process exits 0.
TEST_F(OpsE2eTest, SigtermDrainsAndExitsZero) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  constexpr int kThreads = 3;
  std::atomic<int> ok{0};
  std::atomic<bool> started[kThreads] = {};
  std::vector<std::string> unexpected(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      client::GdnClient mine(server_->grpc_address());
      absl::StatusOr<Session> s = Session::Create(&mine);
      if (!s.ok()) {
        unexpected[t] = s.status().ToString();
        return;
      }
      const client::ForwardInputs in = OracleModel::ToClientInputs(model_->MakeInputs({96}, t));
      for (int i = 0; i < 1000; ++i) {
        absl::StatusOr<std::vector<float>> o = s->Forward(i % 3, 96, in);
        if (!o.ok()) {
          const absl::StatusCode c = o.status().code();
          if (c != absl::StatusCode::kUnavailable && c != absl::StatusCode::kCancelled) {
            unexpected[t] = o.status().ToString();
          }
          return;
        }
        ++ok;
        started[t] = true;
      }
    });
  }
  // Once every thread has a call through, the next ones are in flight.
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  auto all_started = [&] {
    for (auto& s : started) if (!s) return false;
    return true;
  };
  while (!all_started() && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(all_started());
  absl::StatusOr<int> code = server_->Terminate(absl::Seconds(30));
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_GE(ok.load(), kThreads);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(unexpected[t], "") << "thread " << t;
}

// A drain that could not write every session to --snapshot_dir lost them:
// the exit status says so (issue 21, defect 5: it logged the failure and
// exited 0, which a supervisor reads as a clean hand-over).
TEST_F(OpsE2eTest, ADrainThatLosesSessionsExitsNonZero) {
  const gdn::testing::TempDir base_dir("gdn_ops_e2e_test");
  const std::string& base = base_dir.path();
  const std::string dir = base + "/snapshots";
  ASSERT_NO_FATAL_FAILURE(StartServer({{"snapshot_dir", dir}}));
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Session> s = Session::Create(client_.get());
    ASSERT_TRUE(s.ok()) << s.status();
  }
  // The directory becomes a plain file: every write in it fails (ENOTDIR,
  // for root too, where a read-only mode would not stop it).
  ASSERT_EQ(std::rename(dir.c_str(), (base + "/moved").c_str()), 0);
  { std::ofstream(dir) << "not a directory"; }
  absl::StatusOr<int> code = server_->Terminate(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);  // kExitSessionsLost (server/gdn_server.h)
}

}  // namespace
}  // namespace gdn::e2e
