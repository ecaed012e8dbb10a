#include "client/bench/server_metrics.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gdn::client::bench {
namespace {

using Samples = std::vector<MetricSample>;

bool HasLabels(const MetricSample& s, const std::map<std::string, std::string>& want) {
  for (const auto& [k, v] : want) {
    auto it = s.labels.find(k);
    if (it == s.labels.end() || it->second != v) return false;
  }
  return true;
}

double Sum(const Samples& samples, const std::string& name,
           const std::map<std::string, std::string>& labels = {}) {
  double total = 0;
  for (const MetricSample& s : samples) {
    if (s.name == name && HasLabels(s, labels)) total += s.value;
  }
  return total;
}

// Values of label `key` that samples of `name` carry.
std::vector<std::string> LabelValues(const Samples& samples, const std::string& name,
                                     const std::string& key) {
  std::vector<std::string> out;
  for (const MetricSample& s : samples) {
    if (s.name != name) continue;
    auto it = s.labels.find(key);
    if (it != s.labels.end() && std::find(out.begin(), out.end(), it->second) == out.end()) {
      out.push_back(it->second);
    }
  }
  return out;
}

HistogramDelta DiffHistogram(const Samples& before, const Samples& after, const std::string& name,
                             const std::map<std::string, std::string>& labels) {
  HistogramDelta h;
  h.count = Sum(after, name + "_count", labels) - Sum(before, name + "_count", labels);
  h.sum = Sum(after, name + "_sum", labels) - Sum(before, name + "_sum", labels);
  if (h.count <= 0) return h;
  // Cumulative bucket deltas by upper bound.
  std::vector<std::pair<double, double>> buckets;
  for (const MetricSample& s : after) {
    if (s.name != name + "_bucket" || !HasLabels(s, labels)) continue;
    auto le = s.labels.find("le");
    if (le == s.labels.end()) continue;
    double bound = le->second == "+Inf" ? INFINITY : std::strtod(le->second.c_str(), nullptr);
    std::map<std::string, std::string> with_le = labels;
    with_le["le"] = le->second;
    buckets.emplace_back(bound, s.value - Sum(before, name + "_bucket", with_le));
  }
  std::sort(buckets.begin(), buckets.end());
  auto quantile = [&](double q) {
    const double rank = q * h.count;
    double lower = 0, below = 0;
    for (const auto& [bound, cumulative] : buckets) {
      if (cumulative >= rank) {
        if (std::isinf(bound)) return lower;  // past the last finite bound
        const double in_bucket = cumulative - below;
        return in_bucket > 0 ? lower + (bound - lower) * (rank - below) / in_bucket : bound;
      }
      lower = bound;
      below = cumulative;
    }
    return lower;
  };
  h.p50 = quantile(0.5);
  h.p99 = quantile(0.99);
  return h;
}

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    double timeout_s) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", host_port, "' is not HOST:PORT"));
  }
  std::string host = host_port.substr(0, colon);
  const std::string port = host_port.substr(colon + 1);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host_port));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{static_cast<time_t>(timeout_s), static_cast<suseconds_t>(std::fmod(timeout_s, 1) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port));
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port, "\r\n\r\n");
  if (send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot send to ", host_port));
  }
  std::string response;
  char buffer[16384];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos || !absl::StartsWith(response, "HTTP/")) {
    return absl::UnavailableError(absl::StrCat("no HTTP response from ", host_port, path));
  }
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (status_line.find(" 200") == std::string::npos) {
    return absl::UnavailableError(absl::StrCat(host_port, path, ": ", status_line));
  }
  return response.substr(body + 4);
}

std::vector<MetricSample> ParsePrometheusText(const std::string& text) {
  std::vector<MetricSample> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line[0] == '#') continue;
    MetricSample s;
    size_t value_at;
    const size_t brace = line.find('{');
    const size_t space = line.find(' ');
    if (brace != absl::string_view::npos && brace < space) {
      s.name = std::string(line.substr(0, brace));
      const size_t close_brace = line.find('}', brace);
      if (close_brace == absl::string_view::npos) continue;
      // name="value" pairs; values here never hold '"' or ','.
      for (absl::string_view pair :
           absl::StrSplit(line.substr(brace + 1, close_brace - brace - 1), ',', absl::SkipEmpty())) {
        const size_t eq = pair.find('=');
        if (eq == absl::string_view::npos) continue;
        absl::string_view v = pair.substr(eq + 1);
        if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
        s.labels[std::string(pair.substr(0, eq))] = std::string(v);
      }
      value_at = close_brace + 1;
    } else {
      if (space == absl::string_view::npos) continue;
      s.name = std::string(line.substr(0, space));
      value_at = space;
    }
    std::vector<absl::string_view> rest =
        absl::StrSplit(line.substr(value_at), ' ', absl::SkipEmpty());
    if (rest.empty()) continue;
    const std::string v(rest[0]);
    if (v == "+Inf") {
      s.value = INFINITY;
    } else if (!absl::SimpleAtod(v, &s.value)) {
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

double ServerMetricsDelta::Requests(const std::string& method, const std::string& code) const {
  auto it = requests.find(method);
  if (it == requests.end()) return 0;
  double n = 0;
  for (const auto& [c, v] : it->second) {
    if (code.empty() || c == code) n += v;
  }
  return n;
}

ServerMetricsDelta DiffServerMetrics(const std::string& before_text, const std::string& after_text) {
  const Samples before = ParsePrometheusText(before_text);
  const Samples after = ParsePrometheusText(after_text);
  ServerMetricsDelta d;
  for (const MetricSample& s : after) {
    if (s.name != "gdn_requests_total") continue;
    const double delta = s.value - Sum(before, s.name, s.labels);
    if (delta != 0) d.requests[s.labels.at("method")][s.labels.at("code")] += delta;
  }
  for (const std::string& method : LabelValues(after, "gdn_queue_duration_seconds_count", "method")) {
    HistogramDelta h = DiffHistogram(before, after, "gdn_queue_duration_seconds", {{"method", method}});
    if (h.count > 0) d.queue_s[method] = h;
  }
  for (const std::string& phase : {std::string("decode"), std::string("prefill")}) {
    const std::map<std::string, std::string> l = {{"phase", phase}};
    d.batch_size[phase] = DiffHistogram(before, after, "gdn_batch_size", l);
    d.batch_tokens[phase] = DiffHistogram(before, after, "gdn_batch_tokens", l);
    d.kernel_s[phase] = DiffHistogram(before, after, "gdn_kernel_duration_seconds", l);
    d.staging_s[phase] = DiffHistogram(before, after, "gdn_batch_staging_seconds", l);
    d.tokens[phase] = Sum(after, "gdn_tokens_total", l) - Sum(before, "gdn_tokens_total", l);
  }
  for (const MetricSample& s : after) {
    if (s.name == "gdn_state_cache_bytes" && s.labels.count("tier") && s.labels.count("state")) {
      d.cache_bytes_after[s.labels.at("tier") + "/" + s.labels.at("state")] = s.value;
    }
  }
  for (const auto& [key, name] :
       {std::pair<std::string, std::string>{"spills", "gdn_state_spills_total"},
        {"restores", "gdn_state_restores_total"},
        {"evictions", "gdn_state_evictions_total"},
        {"expired", "gdn_sessions_expired_total"},
        {"cow_copies", "gdn_cow_copies_total"}}) {
    d.counters[key] = Sum(after, name) - Sum(before, name);
  }
  d.sessions_after = Sum(after, "gdn_sessions");
  return d;
}

}  // namespace gdn::client::bench
