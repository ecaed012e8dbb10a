#include "server/ops/status_page.h"

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/gdn_server.h"
#include "server/ops/http_endpoint.h"
#include "server/ops/metrics.h"
#include "tests/server/ops/http_get.h"
#include "tests/server/server_harness.h"

namespace gdn {
namespace {

using ::gdn::testing::HttpRequest;
using ::testing::HasSubstr;

std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(GDN_SOURCE_DIR) + "/" + relative,
                   std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

class StatusPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_ = std::make_unique<ServerMetrics>("1.2.3", "cpu");
    absl::StatusOr<std::unique_ptr<HttpEndpoint>> endpoint =
        HttpEndpoint::Start("127.0.0.1:0",
                            MetricsPortRoutes(metrics_->registry()));
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = std::move(*endpoint);
  }

  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<HttpEndpoint> endpoint_;
};

TEST_F(StatusPageTest, EmbeddedPageIsTheSourceFileByteForByte) {
  const std::string source = ReadSourceFile("server/ops/status_page.html");
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(std::string(StatusPageHtml()), source);
  for (const StatusPageScriptFile& script : StatusPageScripts()) {
    const std::string script_source =
        ReadSourceFile(std::string("server/ops/") + script.name);
    ASSERT_FALSE(script_source.empty()) << script.name;
    EXPECT_EQ(std::string(script.bytes()), script_source) << script.name;
  }
}

TEST_F(StatusPageTest, RootAndStatusServeThePage) {
  for (const char* path : {"/", "/status"}) {
    const auto page = HttpRequest(endpoint_->port(), "GET", path);
    EXPECT_EQ(page.status, 200) << path;
    EXPECT_THAT(page.headers, HasSubstr("Content-Type: text/html; charset=utf-8"));
    EXPECT_EQ(page.body, std::string(StatusPageHtml())) << path;
  }
  // The ids the browser test and scripts read.
  const std::string html(StatusPageHtml());
  for (const char* id : {"sessions", "calls-per-second", "tokens-per-second",
                         "device-memory-used", "spills", "restores", "draft-pages",
                         "kept-states", "draft-tokens", "draft-accepted", "kept-dropped",
                         "scrape-error", "requests", "batching", "cache",
                         "scrape-interval", "chart-calls", "chart-tokens",
                         "chart-latency", "chart-queue", "chart-batches",
                         "chart-cache"}) {
    EXPECT_THAT(html, HasSubstr(std::string("id=\"") + id + "\"")) << id;
  }
  EXPECT_EQ(HttpRequest(endpoint_->port(), "GET", "/status.html").status, 404);
}

TEST_F(StatusPageTest, ServesEveryScriptThePageLoadsInItsOrder) {
  const std::string html(StatusPageHtml());
  size_t previous = 0;
  for (const StatusPageScriptFile& script : StatusPageScripts()) {
    const std::string tag =
        std::string("<script src=\"") + script.name + "\"></script>";
    const size_t at = html.find(tag);
    ASSERT_NE(at, std::string::npos) << tag;
    EXPECT_GT(at, previous) << script.name << " is loaded out of order";
    previous = at;
    const auto served =
        HttpRequest(endpoint_->port(), "GET", std::string("/") + script.name);
    EXPECT_EQ(served.status, 200) << script.name;
    EXPECT_THAT(served.headers,
                HasSubstr("Content-Type: text/javascript; charset=utf-8"));
    EXPECT_EQ(served.body, std::string(script.bytes())) << script.name;
  }
  // No script the table does not serve.
  size_t count = 0;
  for (size_t at = html.find("<script"); at != std::string::npos;
       at = html.find("<script", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, StatusPageScripts().size());
}

TEST_F(StatusPageTest, MetricsIsThePrometheusTextOfTheRegistry) {
  metrics_->RecordRequest("Forward", absl::StatusCode::kOk,
                          absl::Milliseconds(3));
  metrics_->RecordBatch("decode", 4, 4, absl::Microseconds(500));
  const auto scrape = HttpRequest(endpoint_->port(), "GET", "/metrics");
  EXPECT_EQ(scrape.status, 200);
  EXPECT_THAT(scrape.headers,
              HasSubstr("Content-Type: text/plain; version=0.0.4"));
  const std::string& body = scrape.body;
  EXPECT_THAT(body, HasSubstr("# TYPE gdn_request_duration_seconds histogram"));
  EXPECT_THAT(body, HasSubstr(
      "gdn_build_info{backend=\"cpu\",version=\"1.2.3\"} 1"));
  EXPECT_THAT(body, HasSubstr(
      "gdn_requests_total{code=\"OK\",method=\"Forward\"} 1"));
  EXPECT_THAT(body, HasSubstr(
      "gdn_request_duration_seconds_bucket{method=\"Forward\",le=\"+Inf\"} 1"));
  EXPECT_THAT(body, HasSubstr("gdn_tokens_total{phase=\"decode\"} 4"));
  EXPECT_THAT(body, HasSubstr("gdn_sessions 0"));
  EXPECT_THAT(body, HasSubstr("gdn_device_memory_total_bytes"));
  // Collected on every request.
  metrics_->RecordRequest("Forward", absl::StatusCode::kOk,
                          absl::Milliseconds(3));
  EXPECT_THAT(HttpRequest(endpoint_->port(), "GET", "/metrics").body,
              HasSubstr("gdn_requests_total{code=\"OK\",method=\"Forward\"} 2"));
}

// The whole server: same port for /metrics and the page, and a shutdown that
// no longer waits on civetweb's 2 s poll.
TEST(GdnServerMetricsPortTest, ServesMetricsAndPageAndShutsDownFast) {
  std::unique_ptr<GdnServer> server;
  {
    absl::StatusOr<std::unique_ptr<GdnServer>> started =
        GdnServer::Start(testing::SmallServerConfig());
    ASSERT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
  }
  const int port = server->metrics_port();
  ASSERT_GT(port, 0);
  EXPECT_THAT(server->metrics_address(), HasSubstr(":" + std::to_string(port)));
  EXPECT_THAT(HttpRequest(port, "GET", "/metrics").body,
              HasSubstr("gdn_build_info{backend=\"cpu\""));
  EXPECT_EQ(HttpRequest(port, "GET", "/status").status, 200);
  EXPECT_EQ(HttpRequest(port, "GET", "/nope").status, 404);
  const auto start = std::chrono::steady_clock::now();
  server->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(HttpRequest(port, "GET", "/metrics").status, 0);
}

TEST(GdnServerMetricsPortTest, MetricsPortInUseFailsStartWithUnavailable) {
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> squatter =
      HttpEndpoint::Start("127.0.0.1:0", HttpRoutes());
  ASSERT_TRUE(squatter.ok()) << squatter.status();
  ServerConfig config = testing::SmallServerConfig();
  config.metrics_listen = "127.0.0.1:" + std::to_string((*squatter)->port());
  absl::StatusOr<std::unique_ptr<GdnServer>> server = GdnServer::Start(config);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(server.status().message(), HasSubstr("metrics"));
}

}  // namespace
}  // namespace gdn
