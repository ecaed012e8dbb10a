// gdn-eval: seed 000's evaluation of a GDN operator backend, as one report.
//
//   gdn-eval --grid=ci|full --backend=cpu|cuda|auto --out_dir=DIR
//            [--sections=correctness,performance,baselines,stability]
//            [--time_budget_s=S] [--cpu_threads=N] [--seed=N] [--commit=SHA]
//            [--lengths=L1,L2,...]   (only these of the grid's lengths)
//
// Writes DIR/report.json and DIR/report.md (plot_eval.py turns the JSON into
// PNGs). Sections share the time budget (work that does not fit is recorded
// as skipped_time_budget, never dropped silently). Exit status: 0 when the
// report was written (pass / fail is in it), 1 on a setup error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/eval/eval_baselines.h"
#include "bench/eval/eval_config.h"
#include "bench/eval/eval_context.h"
#include "bench/eval/eval_correctness.h"
#include "bench/eval/eval_performance.h"
#include "bench/eval/eval_stability.h"
#include "bench/eval/json_value.h"
#include "kernels/backend.h"

#ifndef GDN_EVAL_BUILD_TYPE
#define GDN_EVAL_BUILD_TYPE "unknown"
#endif

namespace gdn::eval {
namespace {

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

std::string Hostname() {
  char buf[256] = {0};
  return gethostname(buf, sizeof(buf) - 1) == 0 ? buf : "unknown";
}

// Default whole-run budgets: CI must stay under 60 s on 2 loaded cores; the
// full grid must leave gpu_baselines.py room in one 10-minute device command.
double DefaultBudget(const std::string& grid) { return grid == "ci" ? 40.0 : 420.0; }

int Main(int argc, char** argv) {
  absl::StatusOr<EvalFlags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "gdn-eval: %s\n", std::string(flags.status().message()).c_str());
    return 1;
  }
  BackendConfig config;
  if (!ParseBackendKind(flags->backend, &config.kind)) {
    std::fprintf(stderr, "gdn-eval: --backend must be cpu, cuda or auto\n");
    return 1;
  }
  config.cpu_threads = flags->cpu_threads;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(config);
  if (!backend.ok()) {
    std::fprintf(stderr, "gdn-eval: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  const absl::StatusOr<Grid> restricted = RestrictLengths(MakeGrid(flags->grid), flags->lengths);
  if (!restricted.ok()) {
    std::fprintf(stderr, "gdn-eval: %s\n", std::string(restricted.status().message()).c_str());
    return 1;
  }
  const Grid& grid = *restricted;
  std::error_code ec;
  std::filesystem::create_directories(flags->out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "gdn-eval: cannot create %s: %s\n", flags->out_dir.c_str(), ec.message().c_str());
    return 1;
  }

  const Clock::time_point start = Clock::now();
  const double budget = flags->time_budget_s > 0 ? flags->time_budget_s : DefaultBudget(flags->grid);
  EvalContext ctx;
  ctx.backend = backend->get();
  ctx.grid = &grid;
  ctx.flags = &*flags;

  Json report = Json::Object();
  report.Set("tool", "gdn-eval").Set("schema_version", 1);
  Json env = Json::Object();
  env.Set("date_utc", UtcNow()).Set("host", Hostname()).Set("backend", std::string((*backend)->name()))
      .Set("device", (*backend)->device_description()).Set("cuda_backend_built", CudaBackendBuilt())
      .Set("compiler", __VERSION__).Set("build_type", GDN_EVAL_BUILD_TYPE)
      .Set("hardware_threads", static_cast<int>(std::thread::hardware_concurrency()))
      .Set("cpu_threads_flag", flags->cpu_threads)
      .Set("commit", flags->commit.empty() ? "not given (--commit)" : flags->commit)
      .Set("command", flags->command).Set("grid", grid.name).Set("seed", static_cast<double>(flags->seed))
      .Set("time_budget_s", budget).Set("memory_total_bytes", static_cast<double>((*backend)->MemoryInfo().total_bytes));
  report.Set("environment", env);

  ctx.markdown = absl::StrCat("# gdn-eval report (", grid.name, " grid, ", (*backend)->name(), " backend)\n\n");
  ctx.markdown += absl::StrCat("- date (UTC): ", UtcNow(), "\n- device: ", (*backend)->device_description(),
                               "\n- host: ", Hostname(), "\n- build: ", GDN_EVAL_BUILD_TYPE, ", ", __VERSION__,
                               ", cuda backend built: ", CudaBackendBuilt() ? "yes" : "no",
                               "\n- commit: ", flags->commit.empty() ? "not given" : flags->commit,
                               "\n- command: `", flags->command, "`\n- time budget: ", Fixed(budget, 0), " s\n\n");

  // Sections and their shares of the budget; time a section leaves unused
  // passes on to the next.
  struct Section { const char* name; double share; };
  const std::vector<Section> sections = {
      {"correctness", 0.35}, {"performance", 0.35}, {"baselines", 0.10}, {"stability", 0.20}};
  double shares_left = 0;
  for (const Section& s : sections) {
    if (SectionEnabled(*flags, s.name)) shares_left += s.share;
  }
  LargestPrefill largest;
  Json summary = Json::Object();
  for (const Section& s : sections) {
    if (!SectionEnabled(*flags, s.name)) continue;
    const double left = budget - SecondsSince(start);
    const double slice = std::max(0.0, left * s.share / shares_left);
    shares_left -= s.share;
    ctx.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(slice));
    const Clock::time_point section_start = Clock::now();
    std::fprintf(stderr, "gdn-eval: %s (%.1f s budget)\n", s.name, slice);
    Json result;
    const std::string name = s.name;
    if (name == "correctness") result = RunCorrectness(ctx);
    else if (name == "performance") result = RunPerformance(ctx, &largest);
    else if (name == "baselines") result = RunBaselines(ctx);
    else result = RunStability(ctx, largest);
    result.Set("seconds", SecondsSince(section_start)).Set("budget_s", slice);
    report.Set(name, result);
    summary.Set(name + "_seconds", SecondsSince(section_start));
  }
  summary.Set("total_seconds", SecondsSince(start));
  report.Set("run", summary);
  ctx.markdown += absl::StrCat("Total run time: ", Fixed(SecondsSince(start), 1), " s.\n\n");
  ctx.markdown += "Plots (`python3 bench/eval/plot_eval.py DIR` from report.json): ![time](time_vs_length.png) "
                  "![scaling](scaling.png) ![memory](memory_vs_length.png) ![decode](decode_batch.png) "
                  "![error vs step](error_vs_step.png)\n";

  const std::string json_path = flags->out_dir + "/report.json";
  const std::string md_path = flags->out_dir + "/report.md";
  std::ofstream(json_path) << report.Dump(1) << "\n";
  std::ofstream(md_path) << ctx.markdown;
  std::fprintf(stderr, "gdn-eval: wrote %s and %s in %.1f s\n", json_path.c_str(), md_path.c_str(),
               SecondsSince(start));
  return 0;
}

}  // namespace
}  // namespace gdn::eval

int main(int argc, char** argv) { return gdn::eval::Main(argc, argv); }
