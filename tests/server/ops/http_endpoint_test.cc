#include "server/ops/http_endpoint.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/ops/http_get.h"

namespace gdn {
namespace {

using ::gdn::testing::HttpRequest;
using ::testing::HasSubstr;

HttpRoutes HelloRoutes() {
  HttpRoutes routes;
  routes["/hello"] = [] {
    return HttpResponse{200, "text/plain; charset=utf-8", "hello\n"};
  };
  routes["/teapot"] = [] { return HttpResponse{418, "text/plain", "short"}; };
  return routes;
}

std::unique_ptr<HttpEndpoint> StartOrDie(const std::string& listen,
                                         HttpRoutes routes) {
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> endpoint =
      HttpEndpoint::Start(listen, std::move(routes));
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? std::move(*endpoint) : nullptr;
}

TEST(HttpEndpointTest, ServesRoutesWithStatusTypeAndLength) {
  std::unique_ptr<HttpEndpoint> endpoint =
      StartOrDie("127.0.0.1:0", HelloRoutes());
  ASSERT_NE(endpoint, nullptr);
  ASSERT_GT(endpoint->port(), 0);

  const auto hello = HttpRequest(endpoint->port(), "GET", "/hello");
  EXPECT_EQ(hello.status, 200);
  EXPECT_EQ(hello.body, "hello\n");
  EXPECT_THAT(hello.headers, HasSubstr("Content-Type: text/plain; charset=utf-8"));
  EXPECT_THAT(hello.headers, HasSubstr("Content-Length: 6"));

  // A handler picks its own status; the query string is not part of the path.
  EXPECT_EQ(HttpRequest(endpoint->port(), "GET", "/teapot").status, 418);
  EXPECT_EQ(HttpRequest(endpoint->port(), "GET", "/hello?x=1").body, "hello\n");
}

TEST(HttpEndpointTest, UnknownPathIs404AndOtherMethods405) {
  std::unique_ptr<HttpEndpoint> endpoint =
      StartOrDie("127.0.0.1:0", HelloRoutes());
  ASSERT_NE(endpoint, nullptr);
  EXPECT_EQ(HttpRequest(endpoint->port(), "GET", "/").status, 404);
  EXPECT_EQ(HttpRequest(endpoint->port(), "GET", "/hello/more").status, 404);
  EXPECT_EQ(HttpRequest(endpoint->port(), "GET", "/../etc/passwd").status, 404);
  const auto post = HttpRequest(endpoint->port(), "POST", "/hello");
  EXPECT_EQ(post.status, 405);
  EXPECT_THAT(post.headers, HasSubstr("Allow: GET, HEAD"));
}

TEST(HttpEndpointTest, HeadSendsHeadersWithoutBody) {
  std::unique_ptr<HttpEndpoint> endpoint =
      StartOrDie("127.0.0.1:0", HelloRoutes());
  ASSERT_NE(endpoint, nullptr);
  const auto head = HttpRequest(endpoint->port(), "HEAD", "/hello");
  EXPECT_EQ(head.status, 200);
  EXPECT_THAT(head.headers, HasSubstr("Content-Length: 6"));
  EXPECT_EQ(head.body, "");
}

TEST(HttpEndpointTest, PortInUseIsUnavailable) {
  std::unique_ptr<HttpEndpoint> first = StartOrDie("127.0.0.1:0", HelloRoutes());
  ASSERT_NE(first, nullptr);
  const std::string taken = "127.0.0.1:" + std::to_string(first->port());
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> second =
      HttpEndpoint::Start(taken, HelloRoutes());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(taken));
  // The first one is unharmed.
  EXPECT_EQ(HttpRequest(first->port(), "GET", "/hello").status, 200);
}

TEST(HttpEndpointTest, MalformedAddressIsInvalidArgument) {
  for (const char* listen : {"9464", ":9464", "127.0.0.1:http", "127.0.0.1:70000"}) {
    absl::StatusOr<std::unique_ptr<HttpEndpoint>> endpoint =
        HttpEndpoint::Start(listen, HelloRoutes());
    ASSERT_FALSE(endpoint.ok()) << listen;
    EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument)
        << listen << ": " << endpoint.status();
  }
}

TEST(HttpEndpointTest, StopIsFastFreesThePortAndIsIdempotent) {
  std::unique_ptr<HttpEndpoint> endpoint =
      StartOrDie("127.0.0.1:0", HelloRoutes());
  ASSERT_NE(endpoint, nullptr);
  const int port = endpoint->port();
  ASSERT_EQ(HttpRequest(port, "GET", "/hello").status, 200);
  // civetweb alone takes up to 2 s (its accept loop polls with that timeout).
  const auto start = std::chrono::steady_clock::now();
  endpoint->Stop();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::milliseconds(500));
  endpoint->Stop();
  EXPECT_EQ(HttpRequest(port, "GET", "/hello").status, 0);
  // The port can be bound again at once.
  std::unique_ptr<HttpEndpoint> again =
      StartOrDie("127.0.0.1:" + std::to_string(port), HelloRoutes());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(HttpRequest(port, "GET", "/hello").status, 200);
}

TEST(HttpEndpointTest, WildcardAddressServesAndStopsFast) {
  std::unique_ptr<HttpEndpoint> endpoint = StartOrDie("0.0.0.0:0", HelloRoutes());
  ASSERT_NE(endpoint, nullptr);
  EXPECT_EQ(HttpRequest(endpoint->port(), "GET", "/hello").status, 200);
  const auto start = std::chrono::steady_clock::now();
  endpoint.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(500));
}

TEST(HttpEndpointTest, ConcurrentRequestsAllAnswered) {
  std::atomic<int> calls{0};
  HttpRoutes routes;
  routes["/count"] = [&calls] {
    calls.fetch_add(1);
    return HttpResponse{200, "text/plain", "ok"};
  };
  std::unique_ptr<HttpEndpoint> endpoint =
      StartOrDie("127.0.0.1:0", std::move(routes));
  ASSERT_NE(endpoint, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        if (HttpRequest(endpoint->port(), "GET", "/count").body == "ok") ok++;
      }
    });
  }
  for (std::thread& c : clients) c.join();
  EXPECT_EQ(ok.load(), 40);
  EXPECT_EQ(calls.load(), 40);
}

}  // namespace
}  // namespace gdn
