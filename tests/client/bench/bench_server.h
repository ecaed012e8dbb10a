// An in-process gdn-server for the bench tests: cpu backend, free ports,
// tiny shapes (2 layers, Hqk 1, Hv 2, K = V = 64, fp32), so each
// mode runs in a second or two on two cores.
#ifndef GDN_TESTS_CLIENT_BENCH_BENCH_SERVER_H_
#define GDN_TESTS_CLIENT_BENCH_BENCH_SERVER_H_

#include <memory>

#include "server/gdn_server.h"
#include "server/ops/server_config.h"

namespace gdn::client::bench::testing {

ServerConfig TinyServerConfig(bool diagnostic_no_compute = false);
// Null (and a test failure) when it cannot start.
std::unique_ptr<GdnServer> StartTinyServer(bool diagnostic_no_compute = false);

}  // namespace gdn::client::bench::testing

#endif  // GDN_TESTS_CLIENT_BENCH_BENCH_SERVER_H_
