#include "tests/client/bench/bench_server.h"

#include "gtest/gtest.h"

namespace gdn::client::bench::testing {

ServerConfig TinyServerConfig(bool diagnostic_no_compute) {
  ServerConfig c;
  c.listen = "127.0.0.1:0";
  c.metrics_listen = "127.0.0.1:0";
  c.backend.kind = BackendKind::kCpu;
  c.backend.cpu_threads = 1;
  c.num_layers = 2;
  c.options.shape.num_qk_heads = 1;
  c.options.shape.num_v_heads = 2;
  c.options.shape.head_dim_k = 64;
  c.options.shape.head_dim_v = 64;
  c.options.input_dtype = DType::kF32;
  c.device_state_budget_bytes = 16 << 20;
  c.host_state_budget_bytes = 16 << 20;
  c.max_queue_delay = absl::Microseconds(50);
  c.drain_timeout = absl::Seconds(5);
  c.diagnostic_no_compute = diagnostic_no_compute;
  return c;
}

std::unique_ptr<GdnServer> StartTinyServer(bool diagnostic_no_compute) {
  absl::StatusOr<std::unique_ptr<GdnServer>> server =
      GdnServer::Start(TinyServerConfig(diagnostic_no_compute));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

}  // namespace gdn::client::bench::testing
