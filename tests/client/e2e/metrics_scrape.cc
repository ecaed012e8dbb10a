#include "tests/client/e2e/metrics_scrape.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gdn::e2e {

absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("no port in " + host_port);
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &addrs) != 0 || addrs == nullptr) {
    return absl::UnavailableError("cannot resolve " + host_port);
  }
  const int fd = socket(addrs->ai_family, addrs->ai_socktype, addrs->ai_protocol);
  const bool connected = fd >= 0 && connect(fd, addrs->ai_addr, addrs->ai_addrlen) == 0;
  freeaddrinfo(addrs);
  if (!connected) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError("cannot connect to " + host_port);
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port,
                                           "\r\nConnection: close\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short write");
  }
  std::string response;
  char chunk[8192];
  ssize_t n;
  while ((n = read(fd, chunk, sizeof(chunk))) > 0) response.append(chunk, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) return absl::DataLossError("no HTTP header end");
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (!absl::StrContains(status_line, " 200")) {
    return absl::UnavailableError("HTTP status: " + status_line);
  }
  return response.substr(body + 4);
}

namespace {

// Parses `name{a="x",b="y"} value` (or `name value`) into its parts.
bool ParseSample(absl::string_view line, std::string* name,
                 std::map<std::string, std::string>* labels, double* value) {
  labels->clear();
  const size_t brace = line.find('{');
  const size_t space = line.find(' ');
  if (space == absl::string_view::npos) return false;
  absl::string_view rest;
  if (brace != absl::string_view::npos && brace < space) {
    *name = std::string(line.substr(0, brace));
    const size_t close = line.find('}', brace);
    if (close == absl::string_view::npos) return false;
    for (absl::string_view pair :
         absl::StrSplit(line.substr(brace + 1, close - brace - 1), ',', absl::SkipEmpty())) {
      const size_t eq = pair.find('=');
      if (eq == absl::string_view::npos) continue;
      absl::string_view v = pair.substr(eq + 1);
      absl::ConsumePrefix(&v, "\"");
      absl::ConsumeSuffix(&v, "\"");
      (*labels)[std::string(pair.substr(0, eq))] = std::string(v);
    }
    rest = line.substr(close + 1);
  } else {
    *name = std::string(line.substr(0, space));
    rest = line.substr(space);
  }
  rest = absl::StripLeadingAsciiWhitespace(rest);
  rest = rest.substr(0, rest.find(' '));  // drop a timestamp
  return absl::SimpleAtod(rest, value);
}

}  // namespace

double SumSamples(const std::string& text, const std::string& name,
                  const std::map<std::string, std::string>& labels) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    std::string sample_name;
    std::map<std::string, std::string> sample_labels;
    double value = 0;
    if (!ParseSample(line, &sample_name, &sample_labels, &value) || sample_name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = sample_labels.find(k);
      if (it == sample_labels.end() || it->second != v) match = false;
    }
    if (match) sum += value;
  }
  return sum;
}

bool HasMetric(const std::string& text, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, name + "{") || absl::StartsWith(line, name + " ")) return true;
  }
  return false;
}

}  // namespace gdn::e2e
