// Test-only: one HTTP/1.1 request over a raw socket to 127.0.0.1, read to
// the end (the endpoint closes every connection).
#ifndef GDN_TESTS_SERVER_OPS_HTTP_GET_H_
#define GDN_TESTS_SERVER_OPS_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace gdn::testing {

struct RawHttpResponse {
  int status = 0;        // 0: no connection or no status line
  std::string headers;   // the header block, status line included
  std::string body;
};

inline RawHttpResponse HttpRequest(int port, const std::string& method,
                                   const std::string& path) {
  RawHttpResponse out;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return out;
  }
  const std::string request = method + " " + path +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Connection: close\r\n\r\n";
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return out;
  }
  std::string response;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  const size_t end = response.find("\r\n\r\n");
  if (end == std::string::npos || response.compare(0, 9, "HTTP/1.1 ") != 0) {
    return out;
  }
  out.status = std::atoi(response.c_str() + 9);
  out.headers = response.substr(0, end + 2);
  out.body = response.substr(end + 4);
  return out;
}

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_OPS_HTTP_GET_H_
