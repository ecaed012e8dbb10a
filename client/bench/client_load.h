// The client's own CPU use over a run (getrusage: user + system seconds of
// the whole process) against wall time and the cores it may use, so a report
// can say when the load generator itself was the bottleneck.
#ifndef GDN_CLIENT_BENCH_CLIENT_LOAD_H_
#define GDN_CLIENT_BENCH_CLIENT_LOAD_H_

namespace gdn::client::bench {

struct ClientLoad {
  double cpu_s = 0;        // user + system
  double wall_s = 0;
  int cores = 1;           // std::thread::hardware_concurrency
  double cores_busy() const { return wall_s > 0 ? cpu_s / wall_s : 0; }  // e.g. 1.6 of 2
  double utilization() const { return cores > 0 ? cores_busy() / cores : 0; }  // [0, 1]
};

// User + system CPU seconds this process has used so far.
double ProcessCpuSeconds();
int UsableCores();

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_CLIENT_LOAD_H_
