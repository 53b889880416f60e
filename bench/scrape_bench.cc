// scrape_bench: what one Prometheus scrape of GET /metrics costs Troupe on a large model, with
// the per-node series (troupe_node_gpus) on and off. The model is troupe_bench's (cluster.h:
// the same node mix, about half of the GPUs taken through filter + reserve); a scrape is
// ExtenderHandler::handle("GET", "/metrics"), i.e. Scheduler::summary + Metrics::refreshCluster
// + the gang events + Metrics::serialize, without the socket. See bench/README.md.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/http/extender_server.h"
#include "adapters/metrics/metrics.h"
#include "cluster.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::bench {
namespace {

const char* const kUsage = R"(scrape_bench: the cost of one GET /metrics scrape, per-node series on and off

Usage:
  scrape_bench [--nodes 1000,5000,10000] [--iterations N] [--budget S]

  --nodes LIST     GPU node counts (default 1000,5000,10000)
  --iterations N   timed scrapes per case at least (default 20)
  --budget S       seconds per case: more scrapes while time is left (default 3)
)";

using Clock = std::chrono::steady_clock;

struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Nearest rank; with fewer than 100 runs p99 is the maximum.
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f" : "%.1f", v);
  return buf;
}

size_t seriesIn(const std::string& body) {
  size_t n = 0;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) n += !line.empty() && line[0] != '#';
  return n;
}

struct Row {
  int nodes = 0;
  std::string mode;
  double first_ms = 0;  // the first scrape: creates every series
  std::vector<double> wall, cpu, summary, refresh, serialize;
  size_t bytes = 0, series = 0;
};

struct Options {
  std::vector<int> nodes = {1000, 5000, 10000};
  int iterations = 20;
  double budget_s = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "scrape_bench: " << a << " needs a value\n" << kUsage;
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](const std::string& text) {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(v > 0)) {
        std::cerr << "scrape_bench: " << a << " \"" << text << "\" must be a positive number\n";
        std::exit(2);
      }
      return v;
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--nodes") {
      o.nodes.clear();
      std::stringstream ss(value());
      for (std::string part; std::getline(ss, part, ',');) o.nodes.push_back(static_cast<int>(number(part)));
    } else if (a == "--iterations") {
      o.iterations = static_cast<int>(number(value()));
    } else if (a == "--budget") {
      o.budget_s = number(value());
    } else {
      std::cerr << "scrape_bench: unknown flag \"" << a << "\"\n" << kUsage;
      std::exit(2);
    }
  }
  return o;
}

Row timeMode(sched::Scheduler& scheduler, int nodes, adapters::PerNodeSeries::Mode mode, const Options& o) {
  NullBuffer null_buffer;
  std::ostream null_stream{&null_buffer};
  adapters::Logger logger{null_stream, adapters::LogLevel::kError};
  const adapters::PerNodeSeries per_node{mode, adapters::PerNodeSeries::kDefaultAutoOffAt};
  metrics::Metrics metrics{"bench", per_node};
  http::ExtenderHandler handler{http::HandlerOptions{}, scheduler, metrics, logger};
  Row row;
  row.nodes = nodes;
  row.mode = per_node.modeName();
  const auto first = Clock::now();
  http::HttpResponse r = handler.handle("GET", "/metrics", "");
  row.first_ms = msSince(first);
  if (r.status != 200) {
    std::cerr << "scrape_bench: GET /metrics answered " << r.status << "\n";
    std::exit(1);
  }
  row.bytes = r.body.size();
  row.series = seriesIn(r.body);
  // The whole scrape as the HTTP handler does it.
  const auto budget_end = Clock::now() + std::chrono::duration<double>(o.budget_s);
  for (int i = 0; i < o.iterations || Clock::now() < budget_end; ++i) {
    const double cpu0 = threadCpuMs();
    const auto t0 = Clock::now();
    r = handler.handle("GET", "/metrics", "");
    row.wall.push_back(msSince(t0));
    row.cpu.push_back(threadCpuMs() - cpu0);
    if (i >= 100000) break;
  }
  // Its stages on their own (the same calls the handler makes).
  for (int i = 0; i < o.iterations; ++i) {
    auto t = Clock::now();
    const sched::ClusterSummary s = scheduler.summary(metrics.maxNodeRows());
    row.summary.push_back(msSince(t));
    t = Clock::now();
    metrics.refreshCluster(s);
    row.refresh.push_back(msSince(t));
    t = Clock::now();
    const std::string body = metrics.serialize();
    row.serialize.push_back(msSince(t));
  }
  return row;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  using namespace troupe::bench;
  const Options o = parse(argc, argv);
  std::vector<Row> rows;
  for (int nodes : o.nodes) {
    troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
    learnNodes(scheduler, nodes);
    const FillStats fill = populate(scheduler, nodes);
    std::cerr << "scrape_bench: " << nodes << " nodes, " << fill.pods << " pods holding " << fill.gpus_used
              << " of " << fill.gpus << " GPUs\n";
    for (auto mode :
         {troupe::adapters::PerNodeSeries::Mode::kOn, troupe::adapters::PerNodeSeries::Mode::kOff}) {
      rows.push_back(timeMode(scheduler, nodes, mode, o));
    }
  }
  std::cout << "| GPU nodes | per-node series | scrape p50 / p99 ms | cpu p50 ms | first scrape ms | "
               "summary / refresh / serialise p50 ms | body | series | runs |\n"
               "|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Row& r : rows) {
    std::cout << "| " << r.nodes << " | " << r.mode << " | " << fmt(percentile(r.wall, 0.5)) << " / "
              << fmt(percentile(r.wall, 0.99)) << " | " << fmt(percentile(r.cpu, 0.5)) << " | "
              << fmt(r.first_ms) << " | " << fmt(percentile(r.summary, 0.5)) << " / "
              << fmt(percentile(r.refresh, 0.5)) << " / " << fmt(percentile(r.serialize, 0.5)) << " | "
              << (r.bytes >= 1 << 20 ? fmt(static_cast<double>(r.bytes) / (1 << 20)) + " MiB"
                                     : fmt(static_cast<double>(r.bytes) / 1024) + " KiB")
              << " | " << r.series << " | " << r.wall.size() << " |\n";
  }
  return 0;
}
