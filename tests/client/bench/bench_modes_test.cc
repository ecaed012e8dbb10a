// Every gdn-bench mode, briefly, against an in-process CPU server with tiny
// shapes: the report's numbers must agree with what the server counted in
// its /metrics (calls by method, tokens), and with the workload's arithmetic.
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/bench/report.h"
#include "client/bench/sweep.h"
#include "client/bench/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/bench/bench_server.h"

namespace gdn::client::bench {
namespace {

using ::testing::HasSubstr;

class BenchModesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::StartTinyServer();
    ASSERT_NE(server_, nullptr);
    seed_ = std::random_device{}();
  }

  BenchConfig Base() {
    BenchConfig c;
    c.server = server_->grpc_address();
    c.metrics = server_->metrics_address();
    c.progress = false;
    c.seed = seed_;
    return c;
  }

  // Client and server agree on every method's count, and on token-layers.
  void ExpectServerAgrees(const BenchResult& r) {
    ASSERT_TRUE(r.have_server_metrics);
    for (const auto& [method, codes] : r.rpcs.by_method) {
      EXPECT_EQ(r.server_metrics.Requests(method), r.rpcs.Total(method)) << method;
    }
    const double server_tokens =
        r.server_metrics.tokens.at("decode") + r.server_metrics.tokens.at("prefill");
    EXPECT_EQ(server_tokens, r.measured.token_layers() + r.warmup.token_layers());
    EXPECT_EQ(r.server_metrics.sessions_after, 0);  // everything closed
  }

  void ExpectOrderedLatencies(const LatencyHistogram& h, const std::string& what) {
    ASSERT_GT(h.count(), 0) << what;
    EXPECT_GT(h.Percentile(50), 0) << what;
    EXPECT_LE(h.Percentile(50), h.Percentile(90)) << what;
    EXPECT_LE(h.Percentile(90), h.Percentile(99)) << what;
    EXPECT_LE(h.Percentile(99), h.Percentile(99.9)) << what;
    EXPECT_LE(h.Percentile(99.9), h.max()) << what;
  }

  std::unique_ptr<GdnServer> server_;
  uint64_t seed_ = 0;
};

TEST_F(BenchModesTest, ClosedLoopRoundsCountExactly) {
  std::mt19937_64 rng(seed_);
  BenchConfig c = Base();
  const int per_call = std::uniform_int_distribution<int>(1, 3)(rng);
  const int workers = std::uniform_int_distribution<int>(1, 3)(rng);
  const int prefill = std::uniform_int_distribution<int>(1, 40)(rng);
  const int decode = std::uniform_int_distribution<int>(1, 6)(rng);
  c.sessions = per_call * workers;
  c.sessions_per_call = per_call;
  c.prefill_tokens = LengthSpec::Fixed(prefill);
  c.decode_steps = LengthSpec::Fixed(decode);
  c.rounds = 2;
  absl::StatusOr<BenchResult> r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  const int layers = 2;
  const int units = workers * 2;
  EXPECT_EQ(r->measured.prefill().calls, units * layers);
  EXPECT_EQ(r->measured.decode().calls, units * layers * decode);
  EXPECT_EQ(r->measured.of(CallType::kCreate).calls, units * per_call);
  EXPECT_EQ(r->measured.of(CallType::kClose).calls, units * per_call);
  EXPECT_EQ(r->measured.sessions_completed, units * per_call);
  EXPECT_EQ(r->measured.token_layers(), int64_t{units} * per_call * layers * (prefill + decode));
  EXPECT_EQ(r->measured.ttfo.count(), units * per_call);
  EXPECT_EQ(r->measured.decode_step.count(), units * decode);
  EXPECT_EQ(r->measured.failed_calls(), 0);
  for (CallType t : {CallType::kCreate, CallType::kPrefill, CallType::kDecode, CallType::kClose}) {
    ExpectOrderedLatencies(r->measured.of(t).latency, CallTypeName(t));
  }
  // The first output comes after the prefill's layers.
  EXPECT_GE(r->measured.ttfo.max(), r->measured.prefill().latency.min() * layers);
  ExpectServerAgrees(*r);
  EXPECT_EQ(r->server_metrics.Requests("Forward", "OK"), units * layers * (1 + decode));
  EXPECT_GT(r->server_metrics.batch_size.at("decode").count, 0);
  EXPECT_GE(r->server_metrics.batch_size.at("decode").mean(), 1);
  EXPECT_GT(r->server_metrics.queue_s.at("Forward").count, 0);
  const std::string json = FormatJsonReport(*r);
  for (const char* field : {"\"p99_9\"", "\"ttfo\"", "\"decode_step\"", "\"token_layers_per_s\"",
                            "\"server_metrics\"", "\"agreement\"", "\"stability\"", "\"client\""}) {
    EXPECT_THAT(json, HasSubstr(field));
  }
  EXPECT_THAT(FormatTextReport(*r), HasSubstr("requests client/server"));
}

// --draft_tokens: every decode step is a draft, accepted by the next step's
// position (the server refuses any other, so no failure means the positions
// were right); rate 1 accepts every token, rate 0 only the first.
TEST_F(BenchModesTest, SpeculativeDecodeAcceptsByTheRate) {
  int64_t draft_token_layers = 0;
  for (double rate : {1.0, 0.0}) {
    BenchConfig c = Base();
    c.sessions = 2;
    c.prefill_tokens = LengthSpec::Fixed(5);
    c.decode_steps = LengthSpec::Fixed(4);
    c.rounds = 1;
    c.draft_tokens = 3;
    c.acceptance_rate = rate;
    absl::StatusOr<BenchResult> r = RunBench(c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->measured.failed_calls(), 0) << rate;
    EXPECT_EQ(r->draft_tokens, 2 * 4 * 3) << rate;
    EXPECT_EQ(r->accepted_tokens, rate == 1.0 ? 2 * 4 * 3 : 2 * 4) << rate;
    EXPECT_THAT(FormatTextReport(*r), HasSubstr("speculative decode: drafts of 3 tokens"));
    if (rate == 1.0) draft_token_layers = r->measured.token_layers();
  }
  // The plain baseline of a draft of 3 sends as many tokens.
  BenchConfig plain = Base();
  plain.sessions = 2;
  plain.prefill_tokens = LengthSpec::Fixed(5);
  plain.decode_steps = LengthSpec::Fixed(4);
  plain.rounds = 1;
  plain.decode_tokens = 3;
  absl::StatusOr<BenchResult> r = RunBench(plain);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measured.failed_calls(), 0);
  EXPECT_EQ(r->measured.token_layers(), draft_token_layers);
  EXPECT_EQ(r->measured.token_layers(), 2 * 2 * (5 + 4 * 3));  // sessions, layers, tokens
  for (auto [draft, tokens] : {std::make_pair(9, 1), std::make_pair(0, 9), std::make_pair(3, 3)}) {
    BenchConfig bad = Base();
    bad.draft_tokens = draft;
    bad.decode_tokens = tokens;
    EXPECT_EQ(RunBench(bad).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// --fork_at_checkpoint: parents keep states every 64 tokens and go past the
// prefix; children fork at the last kept state in it (100 -> 64) and prefill
// the other 36 themselves (the server refuses any other position, so no
// failure means the positions were right); the report estimates the saving.
TEST_F(BenchModesTest, ForksAtTheCheckpointOfASharedPrefix) {
  BenchConfig c = Base();
  c.sessions = 2;
  c.fork_fanout = 2;
  c.shared_prefix_tokens = 100;
  c.fork_at_checkpoint = 64;
  c.prefill_tokens = LengthSpec::Fixed(3);
  c.decode_steps = LengthSpec::Fixed(2);
  c.rounds = 1;
  absl::StatusOr<BenchResult> r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measured.failed_calls(), 0);
  EXPECT_EQ(r->shared_prefills, 1);
  EXPECT_EQ(r->shared_prefill_tokens, 164);
  EXPECT_EQ(r->measured.of(CallType::kFork).calls, 2);
  EXPECT_THAT(FormatTextReport(*r), HasSubstr("children fork at 64"));
  BenchConfig bad = Base();
  bad.fork_fanout = 2;
  bad.shared_prefix_tokens = 100;
  bad.fork_at_checkpoint = 96;
  EXPECT_EQ(RunBench(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// --warm_prefix: one client thread prefills its parent once and forks it in
// every round (at the checkpoint, and at the parent's end without one); the
// parent is closed when the run ends, so the server holds no session after.
TEST_F(BenchModesTest, WarmPrefixPrefillsTheParentOnce) {
  for (int checkpoint : {64, 0}) {
    BenchConfig c = Base();
    c.sessions = 2;
    c.fork_fanout = 2;
    c.shared_prefix_tokens = 100;
    c.fork_at_checkpoint = checkpoint;
    c.warm_prefix = true;
    c.prefill_tokens = LengthSpec::Fixed(3);
    c.decode_steps = LengthSpec::Fixed(1);
    c.rounds = 3;
    absl::StatusOr<BenchResult> r = RunBench(c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->measured.failed_calls(), 0) << checkpoint;
    EXPECT_EQ(r->measured.of(CallType::kFork).calls, 6) << checkpoint;
    if (checkpoint > 0) {
      EXPECT_EQ(r->shared_prefills, 1);
    }
    // parent + children creations: one parent for the whole run
    EXPECT_EQ(r->measured.of(CallType::kCreate).calls, 1) << checkpoint;
    EXPECT_EQ(r->measured.of(CallType::kClose).calls, 6 + 1) << checkpoint;
  }
  BenchConfig bad = Base();
  bad.warm_prefix = true;
  EXPECT_EQ(RunBench(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BenchModesTest, OpenLoopWithDistributionsRunsEverySession) {
  std::mt19937_64 rng(seed_);
  BenchConfig c = Base();
  c.mode = LoopMode::kOpen;
  c.rate = 40;
  c.arrival = "gamma";
  c.burstiness = 0.5;
  c.num_sessions = std::uniform_int_distribution<int>(10, 20)(rng);
  c.client_threads = 8;
  c.prefill_tokens = *LengthSpec::Parse("lognormal:16:0.5", "p", 1);
  c.decode_steps = *LengthSpec::Parse("2:5", "d");
  c.think_ms = 1;
  absl::StatusOr<BenchResult> r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measured.sessions_started, c.num_sessions);
  EXPECT_EQ(r->measured.sessions_completed, c.num_sessions);
  EXPECT_EQ(r->measured.prefill().calls, c.num_sessions * 2);
  EXPECT_GE(r->measured.decode().calls, c.num_sessions * 2 * 2);
  EXPECT_LE(r->measured.decode().calls, c.num_sessions * 2 * 5);
  EXPECT_EQ(r->schedule_lag.count(), c.num_sessions);
  ExpectOrderedLatencies(r->measured.ttfo, "ttfo");
  ExpectServerAgrees(*r);
}

TEST_F(BenchModesTest, SharedPrefixForksAndStreamingTransport) {
  BenchConfig c = Base();
  c.fork_fanout = 3;
  c.shared_prefix_tokens = 24;
  c.sessions = 3;
  c.sessions_per_call = 1;
  c.prefill_tokens = LengthSpec::Fixed(5);
  c.decode_steps = LengthSpec::Fixed(3);
  c.stream = true;
  c.rounds = 2;
  absl::StatusOr<BenchResult> r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  // Per unit: 1 parent + 3 forks; parent prefill 2 layers; each child
  // 2 prefill + 3 x 2 decode calls.
  EXPECT_EQ(r->measured.of(CallType::kFork).calls, 2 * 3);
  EXPECT_EQ(r->measured.of(CallType::kCreate).calls, 2);
  EXPECT_EQ(r->measured.of(CallType::kClose).calls, 2 * 4);
  EXPECT_EQ(r->measured.prefill().calls, 2 * (2 + 3 * 2));
  EXPECT_EQ(r->measured.decode().calls, 2 * 3 * 6);
  EXPECT_EQ(r->measured.token_layers(), 2 * (24 * 2 + 3 * 2 * (5 + 3)));
  EXPECT_EQ(r->rpcs.Total("Forward"), 0);
  EXPECT_EQ(r->rpcs.Total("ForwardStream"), 2 * (2 + 3 * 2) + 2 * 3 * 6);
  ExpectServerAgrees(*r);
  EXPECT_EQ(r->server_metrics.Requests("ForkSession", "OK"), 6);
}

// --connections: the parts of each call spread over three connections, a
// session's prefill cut in pieces by the split; every call succeeds and the
// server counts every part.
TEST_F(BenchModesTest, PartsOverSeveralConnections) {
  BenchConfig c = Base();
  c.sessions = c.sessions_per_call = 3;
  // ~1 KiB per token: a prefill call in ~20 parts of ~35 tokens (the part
  // limit less 64 KiB for the fixed fields), a decode call in one.
  c.prefill_tokens = LengthSpec::Fixed(240);
  c.decode_steps = LengthSpec::Fixed(4);
  c.stream = true;
  c.part_bytes = 100000;
  c.connections = 3;
  c.rounds = 2;
  absl::StatusOr<BenchResult> r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measured.failed_calls(), 0);
  EXPECT_EQ(r->measured.prefill().calls, 2 * 2);
  EXPECT_EQ(r->measured.decode().calls, 2 * 4 * 2);
  EXPECT_GT(r->rpcs.Total("ForwardStream"), 2 * 2 * 10 + 2 * 4 * 2);
  EXPECT_EQ(r->measured.token_layers(), 2 * 3 * (240 + 4) * 2);
  ExpectServerAgrees(*r);
}

TEST_F(BenchModesTest, DurationWithWarmupHasWindowsAndAStabilityVerdict) {
  BenchConfig c = Base();
  c.sessions = 2;
  c.prefill_tokens = LengthSpec::Fixed(8);
  c.decode_steps = LengthSpec::Fixed(4);
  c.warmup_s = 0.3;
  c.duration_s = 1.2;
  c.window_s = 0.3;
  absl::StatusOr<BenchResult> r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->warmup.forward_calls(), 0);
  EXPECT_GT(r->measured.forward_calls(), 0);
  EXPECT_GE(r->measured_s, 1.2);
  // elapsed = warm-up + measurement, computed in floating point.
  EXPECT_GE(r->elapsed_s - r->measured_s, 0.3 - 1e-9);
  EXPECT_TRUE(r->stability.checked);
  EXPECT_GE(r->stability.windows.size(), 3u);
  int64_t in_windows = 0;
  for (const WindowStats& w : r->windows) in_windows += w.forward_calls;
  EXPECT_EQ(in_windows, r->measured.forward_calls());
  EXPECT_GT(r->client_load.cpu_s, 0);
  ExpectServerAgrees(*r);
}

TEST_F(BenchModesTest, CeilingAgainstADiagnosticServer) {
  std::unique_ptr<GdnServer> diagnostic = testing::StartTinyServer(/*diagnostic_no_compute=*/true);
  ASSERT_NE(diagnostic, nullptr);
  BenchConfig c = Base();
  c.sessions = 2;
  c.prefill_tokens = LengthSpec::Fixed(32);
  c.decode_steps = LengthSpec::Fixed(4);
  c.rounds = 3;
  absl::StatusOr<BenchResult> real = RunBench(c);
  ASSERT_TRUE(real.ok()) << real.status();
  c.server = diagnostic->grpc_address();
  c.metrics = diagnostic->metrics_address();
  absl::StatusOr<BenchResult> ceiling = RunBench(c);
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  EXPECT_THAT(ceiling->server.device(), HasSubstr("DIAGNOSTIC no-compute"));
  EXPECT_EQ(ceiling->measured.forward_calls(), real->measured.forward_calls());
  EXPECT_EQ(ceiling->measured.failed_calls(), 0);
  ExpectServerAgrees(*ceiling);
  EXPECT_THAT(FormatJsonReport(*real, &*ceiling), HasSubstr("\"fraction_of_ceiling\""));
  EXPECT_THAT(FormatTextReport(*real, &*ceiling), HasSubstr("of the ceiling"));
}

TEST_F(BenchModesTest, SweepAndSloSearchRunEveryPoint) {
  BenchConfig c = Base();
  c.prefill_tokens = LengthSpec::Fixed(4);
  c.decode_steps = LengthSpec::Fixed(2);
  c.rounds = 1;
  absl::StatusOr<SweepResult> s = RunSweep(c, *ParseSweep("concurrency:1,3"));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->points.size(), 2u);
  EXPECT_EQ(s->points[1].config.sessions, 3);
  EXPECT_EQ(s->points[1].measured.sessions_completed, 3);
  const std::string json = FormatSweepJson(*s);
  EXPECT_THAT(json, HasSubstr("\"kind\": \"concurrency\""));
  const std::string csv = FormatSweepCsv(*s);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  // An objective nothing can miss: the search climbs to the range's top.
  absl::StatusOr<SweepResult> slo = RunSloSearch(c, *ParseLoadRange("concurrency:1:4"), 1e6, "decode", 5);
  ASSERT_TRUE(slo.ok()) << slo.status();
  EXPECT_EQ(slo->search.best_load, 4);
  EXPECT_THAT(FormatSweepJson(*slo), HasSubstr("\"goodput\""));
}

}  // namespace
}  // namespace gdn::client::bench
