// gdn-state-drift: the drift study of compressed states (state_drift.h).
//
//   gdn-state-drift --out_dir=DIR [--steps=65536] [--heads=2] [--dim=128]
//                   [--gating=mild,qwen] [--variants=fp32,bf16,int8-stochastic,...]
//                   [--threads=2] [--seed=1]
//   python3 bench/eval/plot_drift.py DIR       # drift_<dtype>.png per dtype
//
// Writes DIR/drift.csv (one row per variant, gating and recorded step) and
// DIR/drift.md: per gating and variant the o error (rel_l2, mean over the
// window up to the step) at steps 1, 64, 1k, 8k, 64k, the trend over the
// last half (mean of the last quarter / mean of the third), the worst ratio
// to the bf16 state's error at any recorded step past 64, and the pages per
// GiB against fp32 at the default shape (Hv 32, K = V = 128).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/eval/state_drift.h"
#include "kernels/gdn_types.h"

namespace gdn::eval {
namespace {

struct Flags {
  std::string out_dir;
  DriftConfig base;
  std::vector<DriftGating> gatings = {DriftGating::kMild, DriftGating::kQwen};
  std::vector<DriftVariant> variants = StandardDriftVariants();
  int threads = 2;
  std::string command;
};

bool ParseArgs(int argc, char** argv, Flags* f, std::string* error) {
  for (int i = 0; i < argc; ++i) f->command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    int64_t n = 0;
    if (key == "--out_dir") {
      f->out_dir = value;
    } else if ((key == "--steps" || key == "--heads" || key == "--dim" || key == "--threads" ||
                key == "--seed") &&
               absl::SimpleAtoi(value, &n) && n > 0) {
      if (key == "--steps") f->base.steps = static_cast<int>(n);
      if (key == "--heads") f->base.heads = static_cast<int>(n);
      if (key == "--dim") f->base.dim = static_cast<int>(n);
      if (key == "--threads") f->threads = static_cast<int>(n);
      if (key == "--seed") f->base.seed = static_cast<uint64_t>(n);
    } else if (key == "--gating") {
      f->gatings.clear();
      for (absl::string_view g : absl::StrSplit(value, ',')) {
        if (g == "mild") f->gatings.push_back(DriftGating::kMild);
        else if (g == "qwen") f->gatings.push_back(DriftGating::kQwen);
        else return *error = absl::StrCat("--gating: mild or qwen, got '", g, "'"), false;
      }
    } else if (key == "--variants") {
      f->variants.clear();
      for (absl::string_view v : absl::StrSplit(value, ',')) {
        absl::StatusOr<DriftVariant> parsed = ParseDriftVariant(std::string(v));
        if (!parsed.ok()) return *error = std::string(parsed.status().message()), false;
        f->variants.push_back(*parsed);
      }
    } else {
      return *error = absl::StrCat("unknown or bad flag '", arg, "'"), false;
    }
  }
  if (f->out_dir.empty()) return *error = "--out_dir is required", false;
  if (f->base.dim % 32 != 0 || f->base.dim > 128) return *error = "--dim: 32, 64, 96 or 128", false;
  return true;
}

// Pages per GiB of the variant's format over fp32's, at Hv 32, K = V = 128.
double CapacityVsFp32(const DriftVariant& v) {
  const double hv = 32, d = 128;
  auto page = [](double bytes) { return std::ceil(bytes / 256) * 256; };
  double bytes = hv * d * d * StateDTypeSize(v.dtype);
  if (IsQuantizedState(v.dtype)) {
    bytes += hv * d / v.scale_cols * 4;
    if (v.residual) bytes += hv * d * d / 2 + hv * d / v.scale_cols * 4;
  }
  const double gib = 1024.0 * 1024 * 1024;
  return std::floor(gib / page(bytes)) / std::floor(gib / page(hv * d * d * 4));
}

std::string Sci(double x) { return absl::StrFormat("%.2e", x); }

double MeanOver(const std::vector<DriftPoint>& points, int from, int to) {
  double sum = 0;
  int n = 0;
  for (const DriftPoint& p : points) {
    if (p.step > from && p.step <= to) {
      sum += p.o_rel_l2_window;
      ++n;
    }
  }
  return n ? sum / n : 0.0;
}

int Main(int argc, char** argv) {
  Flags flags;
  std::string error;
  if (!ParseArgs(argc, argv, &flags, &error)) {
    std::fprintf(stderr, "gdn-state-drift: %s\n", error.c_str());
    return 1;
  }
  std::filesystem::create_directories(flags.out_dir);
  struct Job {
    DriftConfig config;
    DriftVariant variant;
    std::vector<DriftPoint> points;
  };
  std::vector<Job> jobs;
  for (DriftGating g : flags.gatings) {
    for (const DriftVariant& v : flags.variants) {
      Job job{flags.base, v, {}};
      job.config.gating = g;
      jobs.push_back(job);
    }
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j = next++; j < jobs.size(); j = next++) {
      jobs[j].points = RunDriftChain(jobs[j].config, jobs[j].variant);
      std::fprintf(stderr, "gdn-state-drift: %s %s done\n", DriftGatingName(jobs[j].config.gating),
                   jobs[j].variant.name.c_str());
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < flags.threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  std::ofstream csv(flags.out_dir + "/drift.csv");
  csv << "gating,variant,dtype,step,o_rel_l2,o_max_abs_rel,o_rel_l2_window,state_rel_l2,nonfinite\n";
  for (const Job& job : jobs) {
    for (const DriftPoint& p : job.points) {
      csv << DriftGatingName(job.config.gating) << "," << job.variant.name << ","
          << StateDTypeName(job.variant.dtype) << "," << p.step << "," << p.o_rel_l2 << ","
          << p.o_max_abs_rel << "," << p.o_rel_l2_window << "," << p.state_rel_l2 << ","
          << p.nonfinite << "\n";
    }
  }

  std::string md = absl::StrCat(
      "# Drift of compressed states (gdn-state-drift)\n\n`", flags.command, "`\n\n",
      "Hqk = Hv = ", flags.base.heads, ", K = V = ", flags.base.dim, ", ", flags.base.steps,
      " decode steps from a zero state, seed ", flags.base.seed,
      ". Error of o against the float64 recurrence (rel_l2, mean over the recorded window "
      "ending at the step); trend = mean of the last quarter / mean of the third quarter of the "
      "steps (> 1: still growing); vs bf16 = the worst ratio to the bf16 state's error at a "
      "recorded step past 64; capacity = pages per GiB / fp32's at Hv 32, K = V = 128.\n\n");
  const std::vector<int> marks = {1, 64, 1024, 8192, 65536};
  for (DriftGating g : flags.gatings) {
    DriftConfig c = flags.base;
    c.gating = g;
    const DecayMemory memory = DriftDecayMemory(c);
    md += absl::StrCat("## ", DriftGatingName(g), " gating (decay memory: mean ",
                       absl::StrFormat("%.1f", memory.mean_steps), " steps, longest head ",
                       absl::StrFormat("%.1f", memory.longest_steps), ")\n\n| variant |");
    for (int m : marks) md += absl::StrCat(" step ", m, " |");
    md += " final state rel_l2 | trend | vs bf16 | NaN/Inf | capacity |\n|---|";
    for (size_t i = 0; i < marks.size() + 5; ++i) md += "---|";
    md += "\n";
    const Job* bf16 = nullptr;
    for (const Job& job : jobs) {
      if (job.config.gating == g && job.variant.name == "bf16") bf16 = &job;
    }
    for (const Job& job : jobs) {
      if (job.config.gating != g || job.points.empty()) continue;
      md += absl::StrCat("| ", job.variant.name, " |");
      for (int m : marks) {
        const auto it = std::find_if(job.points.begin(), job.points.end(),
                                     [&](const DriftPoint& p) { return p.step == m; });
        md += it == job.points.end() ? " - |" : absl::StrCat(" ", Sci(it->o_rel_l2_window), " |");
      }
      const int n = c.steps;
      const double third = MeanOver(job.points, n / 2, 3 * n / 4);
      const double last = MeanOver(job.points, 3 * n / 4, n);
      double worst = 0;
      if (bf16 != nullptr) {
        for (size_t i = 0; i < job.points.size() && i < bf16->points.size(); ++i) {
          if (job.points[i].step > 64 && bf16->points[i].o_rel_l2_window > 0) {
            worst = std::max(worst, job.points[i].o_rel_l2_window / bf16->points[i].o_rel_l2_window);
          }
        }
      }
      md += absl::StrCat(" ", Sci(job.points.back().state_rel_l2), " | ",
                         absl::StrFormat("%.3f", third > 0 ? last / third : 0.0), " | ",
                         bf16 ? absl::StrFormat("%.2f", worst) : "-", " | ",
                         job.points.back().nonfinite, " | ",
                         absl::StrFormat("%.3fx", CapacityVsFp32(job.variant)), " |\n");
    }
    md += "\n";
  }
  std::ofstream(flags.out_dir + "/drift.md") << md;
  std::fprintf(stderr, "gdn-state-drift: wrote %s/drift.csv and drift.md\n", flags.out_dir.c_str());
  return 0;
}

}  // namespace
}  // namespace gdn::eval

int main(int argc, char** argv) { return gdn::eval::Main(argc, argv); }
