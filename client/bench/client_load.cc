#include "client/bench/client_load.h"

#include <sys/resource.h>

#include <algorithm>
#include <thread>

namespace gdn::client::bench {

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

int UsableCores() { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace gdn::client::bench
