// The real service in-process on free ports with the cpu backend, driven by
// the generated stub and compared with the float64 oracle (ForwardStream:
// gdn_service_stream_test.cc).
#include "server/rpc/gdn_service.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/rpc/gdn_service_fixture.h"
#include "tests/server/server_harness.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;
using gdn::testing::BuildForwardRequest;
using gdn::testing::MakeRandomInputs;
using gdn::testing::OracleModel;
using gdn::testing::SeqSpec;

class GdnServiceTest : public gdn::testing::GdnServiceFixture {};

TEST_F(GdnServiceTest, ForwardMatchesOracleAcrossSessionsAndLayers) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("a");
  harness_->CreateSession("b");
  // Prefill (100 > max_batch_tokens 64: chunked), decode, speculative decode,
  // prefill again; both layers driven from two client threads at once so
  // their work shares kernel calls.
  const std::vector<std::vector<int>> steps = {{37, 100}, {1, 1}, {3, 8}, {70, 9}};
  std::atomic<int> failures{0};
  auto drive = [&](int layer, std::vector<gdn::v1::ForwardRequest> requests,
                   std::vector<std::vector<double>> expected) {
    int64_t pa = 0, pb = 0;
    for (size_t s = 0; s < requests.size(); ++s) {
      gdn::v1::ForwardResponse response;
      const grpc::Status status = harness_->Forward(requests[s], &response);
      if (!status.ok()) {
        ADD_FAILURE() << "layer " << layer << " step " << s << ": "
                      << status.error_message();
        ++failures;
        return;
      }
      pa += steps[s][0];
      pb += steps[s][1];
      EXPECT_THAT(response.positions(), ::testing::ElementsAre(pa, pb));
      EXPECT_EQ(response.o().shape(0), steps[s][0] + steps[s][1]);
      ExpectMatches(response, expected[s]);
    }
  };
  std::vector<std::thread> threads;
  for (int layer = 0; layer < 2; ++layer) {
    std::vector<gdn::v1::ForwardRequest> requests;
    std::vector<std::vector<double>> expected(steps.size());
    int64_t pa = 0, pb = 0;
    for (size_t s = 0; s < steps.size(); ++s) {
      requests.push_back(MakeCall(layer, {"a", "b"}, {pa, pb}, steps[s],
                                  &expected[s]));
      pa += steps[s][0];
      pb += steps[s][1];
    }
    threads.emplace_back(drive, layer, std::move(requests), std::move(expected));
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);

  const gdn::v1::DescribeSessionResponse a = harness_->Describe("a");
  ASSERT_EQ(a.layers_size(), 2);
  for (const auto& layer : a.layers()) {
    EXPECT_EQ(layer.position(), 37 + 1 + 3 + 70);
    EXPECT_TRUE(layer.has_state());
  }
}

TEST_F(GdnServiceTest, BadInputsLeaveStateUnchanged) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("s");
  harness_->CreateSession("t");
  std::vector<double> expected;
  gdn::v1::ForwardResponse response;
  ASSERT_TRUE(harness_->Forward(MakeCall(1, {"s", "t"}, {0, 0}, {20, 5}, &expected),
                                &response).ok());
  ExpectMatches(response, expected);

  std::vector<double> unused;
  struct Bad {
    gdn::v1::ForwardRequest request;
    grpc::StatusCode code;
    std::string message;
  };
  std::vector<Bad> bad;
  {  // NaN in v
    gdn::v1::ForwardRequest r = MakeCall(1, {"s", "t"}, {20, 5}, {2, 2}, &unused, false);
    const float nan = std::nanf("");
    std::memcpy(r.mutable_v()->mutable_data()->data() + 4 * 77, &nan, 4);
    bad.push_back({r, grpc::StatusCode::INVALID_ARGUMENT, "v: element 77"});
  }
  {  // wrong shape of q
    gdn::v1::ForwardRequest r = MakeCall(1, {"s"}, {20}, {3}, &unused, false);
    r.mutable_q()->set_shape(2, 32);
    bad.push_back({r, grpc::StatusCode::INVALID_ARGUMENT, "q: expected shape"});
  }
  {  // t is behind: the whole call fails, s untouched
    gdn::v1::ForwardRequest r = MakeCall(1, {"s", "t"}, {20, 4}, {1, 1}, &unused, false);
    bad.push_back({r, grpc::StatusCode::FAILED_PRECONDITION, "expected position 5"});
  }
  {  // unknown session next to a good one
    gdn::v1::ForwardRequest r = MakeCall(1, {"s", "nope"}, {20, 0}, {1, 1}, &unused, false);
    bad.push_back({r, grpc::StatusCode::NOT_FOUND, "nope"});
  }
  {  // layer out of range
    gdn::v1::ForwardRequest r = MakeCall(1, {"s"}, {20}, {1}, &unused, false);
    r.set_layer(2);
    bad.push_back({r, grpc::StatusCode::INVALID_ARGUMENT, "layer"});
  }
  for (const Bad& b : bad) {
    gdn::v1::ForwardResponse r;
    const grpc::Status status = harness_->Forward(b.request, &r);
    EXPECT_EQ(status.error_code(), b.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(b.message));
  }

  const gdn::v1::DescribeSessionResponse s = harness_->Describe("s");
  EXPECT_EQ(s.layers(1).position(), 20);
  EXPECT_EQ(s.layers(0).position(), 0);
  EXPECT_FALSE(s.layers(0).has_state());
  EXPECT_EQ(harness_->Describe("t").layers(1).position(), 5);
  // The states are what the oracle says: a good call continues exactly.
  ASSERT_TRUE(harness_->Forward(MakeCall(1, {"t", "s"}, {5, 20}, {1, 12}, &expected),
                                &response).ok());
  ExpectMatches(response, expected);
  EXPECT_THAT(response.positions(), ::testing::ElementsAre(6, 32));
}

TEST_F(GdnServiceTest, ParkedCallPastItsDeadlineIsNotApplied) {
  harness_->CreateSession("p");
  std::vector<double> unused;
  gdn::v1::ForwardResponse response;
  const grpc::Status status = harness_->Forward(
      MakeCall(0, {"p"}, {10}, {1}, &unused, false), &response,
      absl::Milliseconds(300));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(harness_->Describe("p").layers(0).position(), 0);
}

TEST_F(GdnServiceTest, ForkExportImportCarryTheState) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("parent");
  std::vector<double> expected;
  gdn::v1::ForwardResponse response;
  ASSERT_TRUE(harness_->Forward(MakeCall(0, {"parent"}, {0}, {40}, &expected),
                                &response).ok());

  {  // Fork: the child continues from the parent's state.
    grpc::ClientContext context;
    gdn::v1::ForkSessionRequest request;
    request.set_parent_id("parent");
    gdn::v1::ForkSessionResponse forked;
    ASSERT_TRUE(harness_->stub().ForkSession(&context, request, &forked).ok());
    ASSERT_FALSE(forked.session_id().empty());
    oracle_->Fork("parent", forked.session_id());
    const auto child = harness_->Describe(forked.session_id());
    EXPECT_EQ(child.layers(0).position(), 40);
    EXPECT_GE(child.layers(0).shared_with(), 1);
    ASSERT_TRUE(harness_->Forward(
        MakeCall(0, {forked.session_id(), "parent"}, {40, 40}, {3, 2}, &expected),
        &response).ok());
    ExpectMatches(response, expected);
  }

  // Export the parent (layer 0 written, layer 1 zero).
  std::vector<gdn::v1::SessionChunk> chunks;
  {
    grpc::ClientContext context;
    gdn::v1::ExportSessionRequest request;
    request.set_session_id("parent");
    auto reader = harness_->stub().ExportSession(&context, request);
    gdn::v1::SessionChunk chunk;
    while (reader->Read(&chunk)) chunks.push_back(chunk);
    ASSERT_TRUE(reader->Finish().ok());
  }
  const int64_t page = harness_->server().engine_info().layout.page_bytes;
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_TRUE(chunks[0].has_config());
  for (const auto& c : chunks) {
    EXPECT_LE(static_cast<int64_t>(c.data().size()),
              harness_->config().max_message_bytes / 2);
  }
  EXPECT_EQ(chunks.front().layer_bytes(), page);
  EXPECT_EQ(chunks.back().layer(), 1);
  EXPECT_EQ(chunks.back().layer_bytes(), 0);

  // Close it, import it back under the same id, continue.
  {
    grpc::ClientContext context;
    gdn::v1::CloseSessionRequest request;
    request.set_session_id("parent");
    gdn::v1::CloseSessionResponse closed;
    ASSERT_TRUE(harness_->stub().CloseSession(&context, request, &closed).ok());
  }
  {
    grpc::ClientContext context;
    gdn::v1::ImportSessionResponse imported;
    auto writer = harness_->stub().ImportSession(&context, &imported);
    for (const auto& c : chunks) ASSERT_TRUE(writer->Write(c));
    ASSERT_TRUE(writer->WritesDone());
    const grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(imported.session_id(), "parent");
    EXPECT_EQ(imported.layers_imported(), 2);
  }
  EXPECT_EQ(harness_->Describe("parent").layers(0).position(), 42);
  ASSERT_TRUE(harness_->Forward(MakeCall(0, {"parent"}, {42}, {9}, &expected),
                                &response).ok());
  ExpectMatches(response, expected);

  // A mismatched import fails and leaves no session behind.
  for (auto& c : chunks) c.set_session_id("copy");
  chunks[0].mutable_config()->set_head_dim_k(128);
  grpc::ClientContext context;
  gdn::v1::ImportSessionResponse imported;
  auto writer = harness_->stub().ImportSession(&context, &imported);
  for (const auto& c : chunks) {
    if (!writer->Write(c)) break;
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("head_dim_k"));
  grpc::ClientContext list_context;
  gdn::v1::ListSessionsResponse list;
  ASSERT_TRUE(harness_->stub()
                  .ListSessions(&list_context, gdn::v1::ListSessionsRequest(), &list)
                  .ok());
  EXPECT_THAT(list.session_ids(), ::testing::Not(::testing::Contains("copy")));
  EXPECT_THAT(list.session_ids(), ::testing::Contains("parent"));
}

TEST_F(GdnServiceTest, SessionLifecycle) {
  const std::string generated = harness_->CreateSession("");
  EXPECT_FALSE(generated.empty());
  EXPECT_NE(harness_->CreateSession(""), generated);
  {
    grpc::ClientContext context;
    gdn::v1::CreateSessionRequest request;
    request.set_session_id(generated);
    gdn::v1::CreateSessionResponse response;
    EXPECT_EQ(harness_->stub().CreateSession(&context, request, &response).error_code(),
              grpc::StatusCode::ALREADY_EXISTS);
  }
  {
    grpc::ClientContext context;
    gdn::v1::CloseSessionRequest request;
    request.set_session_id(generated);
    gdn::v1::CloseSessionResponse response;
    EXPECT_TRUE(harness_->stub().CloseSession(&context, request, &response).ok());
  }
  grpc::ClientContext context;
  gdn::v1::DescribeSessionRequest request;
  request.set_session_id(generated);
  gdn::v1::DescribeSessionResponse response;
  EXPECT_EQ(harness_->stub().DescribeSession(&context, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(GdnServiceTest, ServerInfoHealthAndReflectionAnswer) {
  grpc::ClientContext context;
  gdn::v1::ServerInfoResponse info;
  ASSERT_TRUE(harness_->stub().GetServerInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_EQ(info.config().num_layers(), 2);
  EXPECT_EQ(info.config().num_v_heads(), 4);
  EXPECT_EQ(info.config().activation_dtype(), gdn::v1::DTYPE_FP32);
  EXPECT_EQ(info.limits().page_bytes(), 4 * 64 * 64 * 4);
  EXPECT_EQ(info.limits().device_pages(), (16 << 20) / (4 * 64 * 64 * 4));
  EXPECT_EQ(info.limits().max_decode_tokens(), kMaxDecodeTokens);

  EXPECT_EQ(gdn::testing::HealthCheck(*harness_->channel(), ""), 1);  // SERVING
  const std::string services =
      gdn::testing::ReflectionListServices(*harness_->channel());
  EXPECT_THAT(services, HasSubstr("gdn.v1.GdnService"));
  EXPECT_THAT(services, HasSubstr("grpc.health.v1.Health"));
}

TEST_F(GdnServiceTest, MetricsCountWhatWasSent) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("m1");
  harness_->CreateSession("m2");
  std::vector<double> expected, unused;
  gdn::v1::ForwardResponse response;
  std::mt19937_64 rng(seed_);
  const int ok_calls = 2 + rng() % 3;
  int64_t decode_tokens = 0, prefill_tokens = 0, p1 = 0, p2 = 0;
  for (int i = 0; i < ok_calls; ++i) {
    const int n1 = 1 + rng() % 8, n2 = 9 + rng() % 50;
    ASSERT_TRUE(harness_->Forward(MakeCall(0, {"m1", "m2"}, {p1, p2}, {n1, n2}, &expected),
                                  &response).ok());
    p1 += n1;
    p2 += n2;
    decode_tokens += n1;
    prefill_tokens += n2;
  }
  const int bad_calls = 1 + rng() % 3;
  for (int i = 0; i < bad_calls; ++i) {
    gdn::v1::ForwardRequest r = MakeCall(0, {"m1"}, {p1}, {1}, &unused, false);
    r.set_layer(-1);
    EXPECT_FALSE(harness_->Forward(r, &response).ok());
  }
  const int port = harness_->server().metrics_port();
  std::string body;
  // The cache gauges are refreshed on the engine's 1 s timer (and after
  // session commands), not per call: poll until they caught up.
  for (int attempt = 0; attempt < 250; ++attempt) {
    body = gdn::testing::ScrapeMetrics(port);
    if (gdn::testing::MetricValue(body, "gdn_sessions", {}) == 2 &&
        gdn::testing::MetricValue(body, "gdn_state_cache_pages",
                                  {"tier=\"device\"", "state=\"used\""}) == 2) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  using gdn::testing::MetricValue;
  EXPECT_EQ(MetricValue(body, "gdn_requests_total",
                        {"method=\"Forward\"", "code=\"OK\""}), ok_calls);
  EXPECT_EQ(MetricValue(body, "gdn_requests_total",
                        {"method=\"Forward\"", "code=\"INVALID_ARGUMENT\""}),
            bad_calls);
  EXPECT_EQ(MetricValue(body, "gdn_requests_total",
                        {"method=\"CreateSession\"", "code=\"OK\""}), 2);
  EXPECT_EQ(MetricValue(body, "gdn_tokens_total", {"phase=\"decode\""}),
            decode_tokens);
  EXPECT_EQ(MetricValue(body, "gdn_tokens_total", {"phase=\"prefill\""}),
            prefill_tokens);
  EXPECT_EQ(MetricValue(body, "gdn_request_duration_seconds_count",
                        {"method=\"Forward\""}), ok_calls + bad_calls);
  EXPECT_EQ(MetricValue(body, "gdn_queue_duration_seconds_count",
                        {"method=\"Forward\""}), ok_calls);
  EXPECT_GE(MetricValue(body, "gdn_batch_size_count", {"phase=\"decode\""}), 1);
  // Every batch's launch is timed once (its host staging), both phases.
  for (const char* phase : {"phase=\"decode\"", "phase=\"prefill\""}) {
    EXPECT_EQ(MetricValue(body, "gdn_batch_staging_seconds_count", {phase}),
              MetricValue(body, "gdn_batch_size_count", {phase}))
        << phase;
  }
  EXPECT_GE(MetricValue(body, "gdn_batch_staging_seconds_count", {"phase=\"prefill\""}), 1);
  EXPECT_EQ(MetricValue(body, "gdn_sessions", {}), 2);
  // m1 and m2 each hold one written page of layer 0.
  EXPECT_EQ(MetricValue(body, "gdn_state_cache_pages",
                        {"tier=\"device\"", "state=\"used\""}), 2);
  EXPECT_EQ(MetricValue(body, "gdn_build_info", {"backend=\"cpu\""}), 1);
  EXPECT_GE(MetricValue(body, "gdn_device_memory_total_bytes", {}), 0);
}

// bf16 activations and fused gating (computed on the host while staging).
TEST(GdnServiceBf16FusedTest, MatchesOracle) {
  const uint64_t seed = gdn::testing::FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  ServerConfig config = gdn::testing::SmallServerConfig();
  config.options.input_dtype = DType::kBF16;
  config.options.gating = GatingMode::kFused;
  gdn::testing::ServerHarness harness(config);
  ASSERT_NE(harness.channel(), nullptr);
  OracleModel oracle(config.options);
  harness.CreateSession("f");
  harness.CreateSession("g");
  int64_t pf = 0, pg = 0;
  for (const auto& lens : std::vector<std::vector<int>>{{50, 2}, {1, 90}, {4, 4}}) {
    const oracle::Inputs inputs =
        MakeRandomInputs(config.options, lens, seed + pf * 31 + pg, false);
    const std::vector<double> expected = oracle.Apply(1, {"f", "g"}, inputs);
    gdn::v1::ForwardResponse response;
    const grpc::Status status = harness.Forward(
        BuildForwardRequest(config.options, 1, {{"f", pf}, {"g", pg}}, inputs),
        &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.o().dtype(), gdn::v1::DTYPE_BF16);
    // o is rounded once to bf16 (relative step 2^-8).
    EXPECT_LT(gdn::testing::MaxRelError(response.o(), expected), 1e-2);
    pf += lens[0];
    pg += lens[1];
  }
}

// The same service on a Unix domain socket (--listen=unix:/path), the
// control channel of same-host clients: calls work and match the oracle,
// and the address is reported as given.
TEST(GdnServiceUnixSocketTest, ServesForwardOverAUnixSocket) {
  const uint64_t seed = gdn::testing::FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  ServerConfig config = gdn::testing::SmallServerConfig();
  const std::string path =
      absl::StrCat(::testing::TempDir(), "gdn-", getpid(), "-", seed % 100000, ".sock");
  config.listen = absl::StrCat("unix:", path);
  gdn::testing::ServerHarness harness(config);
  ASSERT_NE(harness.channel(), nullptr);
  EXPECT_EQ(harness.server().grpc_address(), config.listen);
  OracleModel oracle(config.options);
  harness.CreateSession("u");
  int64_t position = 0;
  for (int tokens : {70, 1, 5}) {
    const oracle::Inputs inputs = MakeRandomInputs(config.options, {tokens}, seed + tokens, false);
    const std::vector<double> expected = oracle.Apply(0, {"u"}, inputs);
    gdn::v1::ForwardResponse response;
    const grpc::Status status = harness.Forward(
        BuildForwardRequest(config.options, 0, {{"u", position}}, inputs), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_LT(gdn::testing::MaxRelError(response.o(), expected), 1e-4);
    position += tokens;
  }
}

TEST(GdnServiceUnixSocketTest, AnEmptySocketPathIsRefused) {
  ServerConfig config = gdn::testing::SmallServerConfig();
  config.listen = "unix:";
  absl::StatusOr<std::unique_ptr<GdnServer>> server = GdnServer::Start(config);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("unix:/path"));
}

}  // namespace
}  // namespace gdn
