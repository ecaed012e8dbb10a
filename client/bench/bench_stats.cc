#include "client/bench/bench_stats.h"

#include "client/grpc_status.h"

namespace gdn::client::bench {

const char* CallTypeName(CallType type) {
  switch (type) {
    case CallType::kCreate: return "create";
    case CallType::kPrefill: return "prefill";
    case CallType::kDecode: return "decode";
    case CallType::kFork: return "fork";
    case CallType::kClose: return "close";
  }
  return "?";
}

const char* CallTypeMethod(CallType type) {
  switch (type) {
    case CallType::kCreate: return "CreateSession";
    case CallType::kPrefill:
    case CallType::kDecode: return "Forward";
    case CallType::kFork: return "ForkSession";
    case CallType::kClose: return "CloseSession";
  }
  return "?";
}

void PhaseStats::Merge(const PhaseStats& other) {
  latency.Merge(other.latency);
  calls += other.calls;
  failed += other.failed;
  token_layers += other.token_layers;
}

void BenchStats::RecordError(CallType type, const absl::Status& status) {
  ++errors[GrpcCodeName(status.code())];
  ++of(type).failed;
}

int64_t BenchStats::failed_calls() const {
  int64_t n = 0;
  for (const auto& [code, count] : errors) n += count;
  return n;
}

void BenchStats::Merge(const BenchStats& other) {
  for (int i = 0; i < kNumCallTypes; ++i) by_type[i].Merge(other.by_type[i]);
  ttfo.Merge(other.ttfo);
  decode_step.Merge(other.decode_step);
  for (const auto& [code, count] : other.errors) errors[code] += count;
  sessions_started += other.sessions_started;
  sessions_completed += other.sessions_completed;
  rounds_completed += other.rounds_completed;
}

void RpcCounts::Add(const std::string& method, const absl::Status& status, int64_t n) {
  by_method[method][GrpcCodeName(status.code())] += n;
}

int64_t RpcCounts::Total(const std::string& method) const {
  auto it = by_method.find(method);
  if (it == by_method.end()) return 0;
  int64_t n = 0;
  for (const auto& [code, count] : it->second) n += count;
  return n;
}

int64_t RpcCounts::Count(const std::string& method, const std::string& code) const {
  auto it = by_method.find(method);
  if (it == by_method.end()) return 0;
  auto c = it->second.find(code);
  return c == it->second.end() ? 0 : c->second;
}

void RpcCounts::Merge(const RpcCounts& other) {
  for (const auto& [method, codes] : other.by_method) {
    for (const auto& [code, count] : codes) by_method[method][code] += count;
  }
}

}  // namespace gdn::client::bench
