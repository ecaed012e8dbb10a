#include "tests/client/e2e/e2e_fixture.h"

#include "kernels/testing/error_stats.h"
#include "proto/tensor_codec.h"
#include "tests/client/e2e/metrics_scrape.h"

namespace gdn::e2e {

void E2eTest::StartServer(const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> flags = SmallServerFlags();
  for (const auto& [k, v] : overrides) flags[k] = v;
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(flags);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  client::GdnClientOptions options;
  options.deadline = absl::Seconds(60);
  client_ = std::make_unique<client::GdnClient>(server_->grpc_address(), options);
  absl::StatusOr<v1::ServerInfoResponse> info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  info_ = *info;
  const v1::LayerConfig& c = info_.config();
  options_.shape.num_qk_heads = c.num_qk_heads();
  options_.shape.num_v_heads = c.num_v_heads();
  options_.shape.head_dim_k = c.head_dim_k();
  options_.shape.head_dim_v = c.head_dim_v();
  ASSERT_TRUE(wire::FromProtoDType(c.activation_dtype(), &options_.input_dtype));
  ASSERT_TRUE(ParseStateDType(c.state_dtype(), &options_.state_dtype)) << c.state_dtype();
  ASSERT_TRUE(ParseGatingMode(c.gating_mode(), &options_.gating)) << c.gating_mode();
  options_.l2_norm_qk = c.l2_norm_qk();
  options_.scale = c.scale();
  model_ = std::make_unique<OracleModel>(options_, c.num_layers());
}

double E2eTest::OutputTolerance() const {
  return options_.input_dtype == DType::kF32 ? 1e-3 : 6e-3;
}

void E2eTest::ForwardChecked(int layer, const std::vector<client::Session*>& sessions,
                             const std::vector<int>& tokens, uint64_t seed) {
  const oracle::Inputs inputs = model_->MakeInputs(tokens, seed);
  std::vector<std::string> ids;
  for (client::Session* s : sessions) ids.push_back(s->id());
  std::vector<int32_t> counts(tokens.begin(), tokens.end());
  absl::StatusOr<std::vector<float>> o = client::ForwardSessions(
      client_.get(), layer, sessions, counts, OracleModel::ToClientInputs(inputs));
  ASSERT_TRUE(o.ok()) << o.status();
  const std::vector<double> ref = model_->Forward(layer, ids, inputs);
  ASSERT_EQ(o->size(), ref.size());
  const testing::ErrorStats err = testing::Compare(o->data(), ref.data(), ref.size());
  EXPECT_LT(err.max_abs_rel, OutputTolerance()) << "layer " << layer << ": " << testing::ToString(err);
  for (client::Session* s : sessions) {
    EXPECT_EQ(s->position(layer), model_->Position(s->id(), layer));
  }
}

void E2eTest::ExpectStatesMatch(const std::string& id) {
  absl::StatusOr<client::SessionSnapshot> snap = client_->ExportSession(id);
  ASSERT_TRUE(snap.ok()) << snap.status();
  const size_t elements = static_cast<size_t>(options_.shape.num_v_heads) *
                          options_.shape.head_dim_k * options_.shape.head_dim_v;
  std::map<int, const client::SessionSnapshot::Layer*> by_layer;
  for (const client::SessionSnapshot::Layer& l : snap->layers) by_layer[l.layer] = &l;
  for (int layer = 0; layer < info_.config().num_layers(); ++layer) {
    const std::vector<float>& want = model_->State(id, layer);
    auto it = by_layer.find(layer);
    const int64_t position = it == by_layer.end() ? 0 : it->second->position;
    EXPECT_EQ(position, model_->Position(id, layer)) << id << " layer " << layer;
    if (want.empty()) {
      // Never written: no bytes (zero state) or all zeros.
      if (it != by_layer.end() && !it->second->bytes.empty()) {
        const std::vector<float> got = StateFromBytes(it->second->bytes, options_.state_dtype, elements);
        for (float x : got) ASSERT_EQ(x, 0.0f) << id << " layer " << layer;
      }
      continue;
    }
    ASSERT_NE(it, by_layer.end()) << id << " layer " << layer << " missing from export";
    const std::vector<float> got = StateFromBytes(it->second->bytes, options_.state_dtype, elements);
    ASSERT_EQ(got.size(), elements) << "exported " << it->second->bytes.size() << " bytes";
    const std::vector<double> ref(want.begin(), want.end());
    const testing::ErrorStats err = testing::Compare(got.data(), ref.data(), elements);
    EXPECT_LT(err.max_abs_rel, options_.state_dtype == StateDType::kF32 ? 1e-3 : 8e-3)
        << id << " layer " << layer << " state: " << testing::ToString(err);
  }
}

std::string E2eTest::ScrapeMetrics() {
  absl::StatusOr<std::string> text = HttpGet(server_->metrics_address(), "/metrics");
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

}  // namespace gdn::e2e
