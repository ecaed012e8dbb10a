// The client side of tests/deploy/affinity_test.sh: sessions driven through
// an nginx proxy in front of several gdn-servers (session affinity by the
// `x-gdn-route` header), checked call by call against the float64 oracle,
// across the drain of one server.
//
//   1. Creates groups of two sessions (ids "<group>/s-...", one routing key
//      per group) through the proxy until every server holds at least two
//      groups (ListSessions on each server directly): the hash spreads them,
//      and the two sessions of a group always share a server.
//   2. Prefill and decode, one two-session Forward per group and layer; o is
//      compared with the oracle (tests/client/e2e/oracle_model.h) each call.
//   3. Writes --ready_file (the index of the server with the most sessions,
//      for the script to SIGTERM) and keeps decoding: calls the draining
//      server did not apply come back UNAVAILABLE and are retried by the
//      client, the proxy fails over once the server's listener closes, and
//      the next server restores each session from --snapshot_dir.
//   4. Goes on until the server is gone and a few rounds after, then checks:
//      every drained session is now held by another server, the restore
//      counters of the others add up, every session's exported states and
//      positions equal the oracle's. Exits 0 when all held, 1 otherwise.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/gdn_client.h"
#include "client/routing_key.h"
#include "client/session.h"
#include "kernels/testing/error_stats.h"
#include "proto/tensor_codec.h"
#include "tests/client/e2e/metrics_scrape.h"
#include "tests/client/e2e/oracle_model.h"

ABSL_FLAG(std::string, proxy, "", "HOST:PORT of the proxy");
ABSL_FLAG(std::string, servers, "", "HOST:PORT of each server's gRPC port, comma-separated");
ABSL_FLAG(std::string, metrics, "", "HOST:PORT of each server's /metrics, same order");
ABSL_FLAG(std::string, ready_file, "", "written with the index of the server to drain");
ABSL_FLAG(int, min_groups_per_server, 2, "create groups until each server holds this many");
ABSL_FLAG(int, max_groups, 40, "give up spreading after this many groups");
ABSL_FLAG(int, rounds_after_drain, 3, "decode rounds after the drained server is gone");
ABSL_FLAG(double, drain_wait_s, 90, "longest wait for the drained server to go away");

namespace gdn {
namespace {

using client::GdnClient;
using client::GdnClientOptions;
using client::Session;

int failures = 0;

void Fail(const std::string& what) {
  ++failures;
  std::cerr << "affinity_driver: FAIL: " << what << "\n";
}

void Log(const std::string& what) { std::cerr << "affinity_driver: " << what << "\n"; }

struct Group {
  std::string key;
  std::vector<Session> sessions;  // two
};

class Driver {
 public:
  Driver(std::string proxy, std::vector<std::string> servers, std::vector<std::string> metrics)
      : servers_(std::move(servers)), metrics_(std::move(metrics)) {
    GdnClientOptions options;
    options.deadline = absl::Seconds(60);
    options.session_affinity = true;
    options.on_retry = [this](absl::string_view method, const absl::Status& status, int attempt) {
      absl::MutexLock lock(&mu_);
      ++retries_[std::string(method)];
      if (retries_[std::string(method)] <= 3) {
        Log(absl::StrCat("retrying ", method, " (try ", attempt, "): ", status.ToString()));
      }
    };
    proxy_ = std::make_unique<GdnClient>(proxy, options);
    GdnClientOptions direct_options;
    direct_options.deadline = absl::Seconds(5);
    direct_options.retry.max_attempts = 1;  // a direct probe reports what it sees
    for (const std::string& s : servers_) {
      direct_.push_back(std::make_unique<GdnClient>(s, direct_options));
    }
  }

  bool Init() {
    absl::StatusOr<v1::ServerInfoResponse> info = proxy_->GetServerInfo();
    if (!info.ok()) {
      Fail(absl::StrCat("GetServerInfo through the proxy: ", info.status().ToString()));
      return false;
    }
    const v1::LayerConfig& c = info->config();
    options_.shape.num_qk_heads = c.num_qk_heads();
    options_.shape.num_v_heads = c.num_v_heads();
    options_.shape.head_dim_k = c.head_dim_k();
    options_.shape.head_dim_v = c.head_dim_v();
    if (!wire::FromProtoDType(c.activation_dtype(), &options_.input_dtype) ||
        !ParseStateDType(c.state_dtype(), &options_.state_dtype) ||
        !ParseGatingMode(c.gating_mode(), &options_.gating)) {
      Fail("server config not understood");
      return false;
    }
    options_.l2_norm_qk = c.l2_norm_qk();
    options_.scale = c.scale();
    layers_ = c.num_layers();
    model_ = std::make_unique<e2e::OracleModel>(options_, layers_);
    return true;
  }

  // Which server (index) holds each session, from ListSessions on each.
  std::map<std::string, int> Placement(const std::set<int>& skip = {}) {
    std::map<std::string, int> where;
    for (int i = 0; i < static_cast<int>(direct_.size()); ++i) {
      if (skip.count(i)) continue;
      absl::StatusOr<std::vector<std::string>> ids = direct_[i]->ListSessions();
      if (!ids.ok()) {
        Fail(absl::StrCat("ListSessions on ", servers_[i], ": ", ids.status().ToString()));
        continue;
      }
      for (const std::string& id : *ids) {
        if (where.count(id)) Fail(absl::StrCat(id, " on two servers"));
        where[id] = i;
      }
    }
    return where;
  }

  // Phase 1: groups until every server holds min_groups_per_server.
  bool CreateSpread() {
    const int want = absl::GetFlag(FLAGS_min_groups_per_server);
    std::map<std::string, int> where;
    while (true) {
      Group g;
      g.key = client::NewRouteGroup();
      for (int j = 0; j < 2; ++j) {
        absl::StatusOr<Session> s = Session::Create(proxy_.get(), client::NewSessionId(g.key));
        if (!s.ok()) {
          Fail(absl::StrCat("create through the proxy: ", s.status().ToString()));
          return false;
        }
        model_->AddSession(s->id());
        g.sessions.push_back(*std::move(s));
      }
      groups_.push_back(std::move(g));
      where = Placement();
      std::vector<int> per_server(servers_.size(), 0);
      for (const Group& grp : groups_) {
        auto a = where.find(grp.sessions[0].id()), b = where.find(grp.sessions[1].id());
        if (a == where.end() || b == where.end()) {
          Fail(absl::StrCat("group ", grp.key, " not listed by any server"));
          return false;
        }
        if (a->second != b->second) {
          Fail(absl::StrCat("group ", grp.key, " split over servers ", a->second, " and ",
                            b->second));
          return false;
        }
        ++per_server[a->second];
      }
      if (*std::min_element(per_server.begin(), per_server.end()) >= want) {
        Log(absl::StrCat(groups_.size(), " groups (", 2 * groups_.size(),
                         " sessions) spread over the servers: ",
                         absl::StrJoin(per_server, " / ")));
        return true;
      }
      if (static_cast<int>(groups_.size()) >= absl::GetFlag(FLAGS_max_groups)) {
        Fail(absl::StrCat("after ", groups_.size(), " groups the servers hold ",
                          absl::StrJoin(per_server, " / "), " groups: the hash does not spread"));
        return false;
      }
    }
  }

  // One Forward per group and layer, `tokens` new tokens for each session.
  bool Round(const std::vector<int>& tokens) {
    for (Group& g : groups_) {
      for (int layer = 0; layer < layers_; ++layer) {
        const oracle::Inputs inputs = model_->MakeInputs(tokens, ++seed_);
        std::vector<Session*> sessions = {&g.sessions[0], &g.sessions[1]};
        std::vector<int32_t> counts(tokens.begin(), tokens.end());
        absl::StatusOr<std::vector<float>> o = client::ForwardSessions(
            proxy_.get(), layer, sessions, counts, e2e::OracleModel::ToClientInputs(inputs));
        if (!o.ok()) {
          Fail(absl::StrCat("Forward of group ", g.key, " layer ", layer, ": ",
                            o.status().ToString()));
          return false;
        }
        const std::vector<double> ref =
            model_->Forward(layer, {g.sessions[0].id(), g.sessions[1].id()}, inputs);
        if (o->size() != ref.size()) {
          Fail(absl::StrCat("o has ", o->size(), " values, expected ", ref.size()));
          return false;
        }
        const testing::ErrorStats err = testing::Compare(o->data(), ref.data(), ref.size());
        max_err_ = std::max(max_err_, err.max_abs_rel);
        if (!(err.max_abs_rel < Tolerance())) {
          Fail(absl::StrCat("group ", g.key, " layer ", layer, " o differs from the oracle: ",
                            testing::ToString(err)));
          return false;
        }
        ++calls_;
      }
    }
    return true;
  }

  double Tolerance() const { return options_.input_dtype == DType::kF32 ? 1e-3 : 6e-3; }

  // The index of the server holding the most sessions.
  int DrainTarget() {
    std::map<std::string, int> where = Placement();
    std::vector<int> n(servers_.size(), 0);
    for (const auto& [id, i] : where) ++n[i];
    target_ = static_cast<int>(std::max_element(n.begin(), n.end()) - n.begin());
    for (const auto& [id, i] : where) {
      if (i == target_) on_target_.push_back(id);
    }
    return target_;
  }

  bool TargetGone() {
    absl::StatusOr<v1::ServerInfoResponse> info = direct_[target_]->GetServerInfo();
    return !info.ok();
  }

  const std::vector<std::string>& on_target() const { return on_target_; }

  void CheckAfterDrain() {
    std::map<std::string, int> where = Placement({target_});
    int ours = 0;
    for (const std::string& id : on_target_) {
      auto it = where.find(id);
      if (it == where.end()) {
        // gdn-bench's sessions may have been closed since; ours never are.
        if (model_has(id)) Fail(absl::StrCat(id, " (drained) is held by no server"));
        continue;
      }
      if (model_has(id)) ++ours;
    }
    double restored = 0;
    for (int i = 0; i < static_cast<int>(metrics_.size()); ++i) {
      if (i == target_) continue;
      absl::StatusOr<std::string> text = e2e::HttpGet(metrics_[i], "/metrics");
      if (!text.ok()) {
        Fail(absl::StrCat("/metrics of ", metrics_[i], ": ", text.status().ToString()));
        continue;
      }
      restored += e2e::SumSamples(*text, "gdn_snapshot_sessions_restored_total");
    }
    Log(absl::StrCat(ours, " of the drained server's driver sessions now on other servers; ",
                     restored, " sessions restored from snapshots in all"));
    if (ours == 0) Fail("the drained server held none of the driver's sessions");
    if (restored < ours) {
      Fail(absl::StrCat("gdn_snapshot_sessions_restored_total adds up to ", restored,
                        ", fewer than the ", ours, " sessions moved"));
    }
  }

  // Exported states and positions (through the proxy) equal the oracle's.
  void CheckStates() {
    const size_t elements = static_cast<size_t>(options_.shape.num_v_heads) *
                            options_.shape.head_dim_k * options_.shape.head_dim_v;
    for (const Group& g : groups_) {
      for (const Session& s : g.sessions) {
        absl::StatusOr<client::SessionSnapshot> snap = proxy_->ExportSession(s.id());
        if (!snap.ok()) {
          Fail(absl::StrCat("export ", s.id(), ": ", snap.status().ToString()));
          continue;
        }
        for (const client::SessionSnapshot::Layer& l : snap->layers) {
          if (l.position != model_->Position(s.id(), l.layer)) {
            Fail(absl::StrCat(s.id(), " layer ", l.layer, " at position ", l.position,
                              ", expected ", model_->Position(s.id(), l.layer)));
          }
          const std::vector<float>& want = model_->State(s.id(), l.layer);
          const std::vector<float> got =
              e2e::StateFromBytes(l.bytes, options_.state_dtype, elements);
          if (want.size() != elements || got.size() != elements) {
            Fail(absl::StrCat(s.id(), " layer ", l.layer, ": state missing"));
            continue;
          }
          std::vector<double> ref(want.begin(), want.end());
          const testing::ErrorStats err = testing::Compare(got.data(), ref.data(), elements);
          if (!(err.max_abs_rel < (options_.state_dtype == StateDType::kF32 ? 1e-3 : 8e-3))) {
            Fail(absl::StrCat(s.id(), " layer ", l.layer, " state differs from the oracle: ",
                              testing::ToString(err)));
          }
        }
        if (static_cast<int>(snap->layers.size()) != layers_) {
          Fail(absl::StrCat(s.id(), ": ", snap->layers.size(), " layers exported, expected ",
                            layers_));
        }
      }
    }
  }

  void CloseAll() {
    for (Group& g : groups_) {
      for (Session& s : g.sessions) {
        if (absl::Status st = s.Close(); !st.ok()) {
          Fail(absl::StrCat("close ", s.id(), ": ", st.ToString()));
        }
      }
    }
  }

  std::string Summary() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> r;
    for (const auto& [m, n] : retries_) r.push_back(absl::StrCat(m, " ", n));
    return absl::StrCat(calls_, " Forward calls over ", 2 * groups_.size(),
                        " sessions matched the oracle (max rel err ", max_err_, "); retries: ",
                        r.empty() ? "none" : absl::StrJoin(r, ", "));
  }

 private:
  bool model_has(const std::string& id) const {
    for (const Group& g : groups_) {
      for (const Session& s : g.sessions) {
        if (s.id() == id) return true;
      }
    }
    return false;
  }

  std::vector<std::string> servers_, metrics_;
  std::unique_ptr<GdnClient> proxy_;
  std::vector<std::unique_ptr<GdnClient>> direct_;
  GdnOptions options_;
  int layers_ = 0;
  std::unique_ptr<e2e::OracleModel> model_;
  std::vector<Group> groups_;
  uint64_t seed_ = 1000;
  int64_t calls_ = 0;
  double max_err_ = 0;
  int target_ = -1;
  std::vector<std::string> on_target_;
  absl::Mutex mu_;
  std::map<std::string, int64_t> retries_ ABSL_GUARDED_BY(mu_);
};

bool WriteReadyFile(const std::string& path, int index) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << index << "\n";
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

int Main() {
  const std::vector<std::string> servers =
      absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipEmpty());
  const std::vector<std::string> metrics =
      absl::StrSplit(absl::GetFlag(FLAGS_metrics), ',', absl::SkipEmpty());
  if (absl::GetFlag(FLAGS_proxy).empty() || servers.size() < 2 ||
      metrics.size() != servers.size() || absl::GetFlag(FLAGS_ready_file).empty()) {
    std::cerr << "usage: affinity_driver --proxy=H:P --servers=A,B,C --metrics=MA,MB,MC "
                 "--ready_file=F\n";
    return 2;
  }
  Driver d(absl::GetFlag(FLAGS_proxy), servers, metrics);
  if (!d.Init() || !d.CreateSpread()) return 1;
  // Prefill of uneven lengths, a speculative step, single-token decodes.
  for (const std::vector<int>& tokens :
       std::vector<std::vector<int>>{{37, 5}, {1, 1}, {3, 1}, {1, 1}}) {
    if (!d.Round(tokens)) return 1;
  }
  const int target = d.DrainTarget();
  Log(absl::StrCat("drain target: server ", target, " (", servers[target], ") with ",
                   d.on_target().size(), " sessions"));
  if (!WriteReadyFile(absl::GetFlag(FLAGS_ready_file), target)) {
    Fail("cannot write --ready_file");
    return 1;
  }
  // Keep going through the drain, and a few rounds after the server is gone.
  const absl::Time give_up = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_drain_wait_s));
  int after = -1;
  for (int round = 0; after < absl::GetFlag(FLAGS_rounds_after_drain); ++round) {
    const std::vector<int> tokens = round % 4 == 3 ? std::vector<int>{9, 2}
                                                   : std::vector<int>{1, 1};
    if (!d.Round(tokens)) return 1;
    if (after >= 0) {
      ++after;
    } else if (d.TargetGone()) {
      Log(absl::StrCat("server ", target, " is gone after ", round + 1, " rounds"));
      after = 0;
    } else if (absl::Now() > give_up) {
      Fail("the drained server never went away");
      return 1;
    }
  }
  d.CheckAfterDrain();
  d.CheckStates();
  d.CloseAll();
  Log(d.Summary());
  if (failures > 0) {
    Log(absl::StrCat(failures, " check(s) failed"));
    return 1;
  }
  Log("all checks passed");
  return 0;
}

}  // namespace
}  // namespace gdn

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return gdn::Main();
}
