// troupe_bench: how fast Troupe answers kube-scheduler, and how much memory it needs.
//
//   1. memory    VmRSS before/after learning N nodes and placing ~50% of their GPUs
//   2. latency   server-side handling time (decode + core + encode, i.e.
//                ExtenderHandler::handle) of /filter and /prioritize for N candidate nodes, in
//                both nodeCacheCapable modes (names only / full v1.NodeList), p50/p99/mean
//   3. loopback  requests per second of small names-only /filter calls against a real
//                ExtenderServer on 127.0.0.1 from K keep-alive connections, client-side p50/p99
//
// See bench/README.md for what the numbers mean and the measured results.
#include <malloc.h>
#include <sched.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/http/extender_scores.h"
#include "adapters/http/extender_server.h"
#include "adapters/http/wire.h"
#include "adapters/metrics/metrics.h"
#include "cluster.h"
#include "loadgen.h"
#include "troupe/sched/scheduler/scheduler.h"

#ifndef TROUPE_BENCH_BUILD_TYPE
#define TROUPE_BENCH_BUILD_TYPE "unknown"
#endif

namespace troupe::bench {
namespace {

using Clock = std::chrono::steady_clock;
using OJson = nlohmann::ordered_json;

const char* const kHelp = R"(troupe_bench - Troupe's extender performance benchmark

Usage:
  troupe_bench [--nodes 1000,5000,10000] [--iterations N] [--quick] [--json FILE] [--markdown]

Measures, on a synthetic cluster of 8-GPU nodes (70% HGX H100, 20% PCIe L40S, 10% HGX A100)
with about half of the GPUs already allocated through filter + reserve:
  - server-side time of POST /filter and /prioritize (ExtenderHandler::handle: JSON decode,
    scheduling core, JSON encode) with N candidate nodes, in both nodeCacheCapable modes
    (NodeNames only, or a full v1.NodeList of ~4.9 KB per node), p50 / p99 / mean;
  - requests per second of small names-only /filter calls (16 nodes) over loopback HTTP
    against a real ExtenderServer, from many keep-alive connections;
  - resident memory (VmRSS) with the largest node count.

Flags:
  --nodes LIST         candidate node counts (default 1000,5000,10000)
  --iterations N       run every latency case exactly N times (default: adaptive, bounded
                       by a time budget per case)
  --quick              short budgets for a smoke check (~1 minute on 2 cores)
  --json FILE          also write every number to FILE
  --markdown           print the results as Markdown tables (README-ready)
  --only LIST          latency cases to run, e.g. filter/names,prioritize/full
                       (default: all four)
  --pods LIST          pod variants: 4gpu (topology preferred), 4gpu-nvlink (default: both)
  --narrow-to best|all filter passes only the best-ranked node (best, the Helm chart's
                       default) or every node that fits (all, the default here and in
                       `troupe serve`)
  --cold-scores        with --narrow-to best: score every feasible node afresh on every
                       call, without the memo of remembered scores (default: remembered
                       scores, as `troupe serve` does)
  --new-shape          with --narrow-to best: every timed call is the first pod of its shape
                       for the memo (pods of 8 CPU requests, 48 to 48.007 cores, in turn;
                       the memo keeps 4 shapes per node), as for a new pod shape or the
                       first call after the request mix changed: every feasible node is
                       scored and remembered, as `troupe serve` does it
  --connections LIST   loopback connection counts (default 1,16,64; quick 1,64)
  --duration S         seconds per loopback run (default 5; quick 1.5)
  --wrk                also load the server with wrk (if installed), at the largest
                       connection count, with one 16-node request body
  --memory-nodes N     node count for the memory measurement (default: the largest of --nodes)
  --no-memory, --no-latency, --no-loopback   skip a part
  --no-breakdown       skip timing decode / core / encode separately
  --full-max-nodes N   run the full-NodeList cases only up to N nodes (quick: 1000)
  --in-process         measure everything in this process (default: the memory part and
                       each node count in a fresh child process, so heaps do not interfere)
  --fail-on-miss       exit 1 when a target is missed (default: report only)
  -h, --help           this text

Targets (from the performance issue): names-only filter at 5,000 nodes p99 < 2 ms;
full-node filter at 1,000 nodes p99 < 50 ms; 5,000 small requests/s on 2 cores;
< 200 MB resident at 10,000 nodes.
)";

// --- small helpers ---------------------------------------------------------------------------

struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

std::vector<int> parseIntList(const std::string& text, const char* flag) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    try {
      size_t used = 0;
      int v = std::stoi(part, &used);
      if (used != part.size() || v <= 0) throw std::invalid_argument(part);
      out.push_back(v);
    } catch (...) {
      std::cerr << "troupe_bench: " << flag << " \"" << text
                << "\" must be positive integers separated by commas\n";
      std::exit(2);
    }
  }
  return out;
}

std::vector<std::string> parseWordList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

// VmRSS / VmHWM of this process, MiB; -1 when unreadable.
double procStatusMiB(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') {
      return std::strtod(line.c_str() + n + 1, nullptr) / 1024.0;
    }
  }
  return -1;
}
double rssMiB() { return procStatusMiB("VmRSS"); }

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}
double hwmMiB() { return procStatusMiB("VmHWM"); }
// Resets VmHWM to the current RSS (Linux 4.0+); false when not allowed.
bool resetPeak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

std::string fmt(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Milliseconds with a precision that suits the magnitude.
std::string ms(double v) { return v < 1 ? fmt(v, 3) : v < 100 ? fmt(v, 2) : fmt(v, 1); }

std::string thousands(double v) {
  std::string s = fmt(v, 0);
  for (int i = static_cast<int>(s.size()) - 3; i > 0 && s[static_cast<size_t>(i - 1)] != '-'; i -= 3) {
    s.insert(static_cast<size_t>(i), ",");
  }
  return s;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return std::string(line.substr(colon + 2));
    }
  }
  return "unknown";
}

// The 1-minute load average: other work on the machine skews every number here.
std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "?" : one;
}

int usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return 0;
}

// --- options ---------------------------------------------------------------------------------

struct Options {
  std::vector<int> nodes = {1000, 5000, 10000};
  std::optional<int> iterations;
  bool quick = false;
  std::string json_file;
  bool markdown = false;
  std::set<std::string> only;  // verb/mode
  std::vector<std::string> pods = {"4gpu", "4gpu-nvlink"};
  std::vector<int> connections;
  double duration = 0;
  int memory_nodes = 0;
  bool memory = true, latency = true, loopback = true;
  bool fail_on_miss = false;
  bool breakdown = true;
  int full_max_nodes = 0;       // full-NodeList cases only up to this many nodes; 0 = no limit
  bool in_process = false;      // measure in this process instead of one fresh child per part
  bool wrk = false;             // also drive the loopback server with wrk
  bool narrow_to_best = false;  // filter keeps only the best node (the chart's narrowTo: best)
  bool remember_scores = true;  // false: narrowing scores every node afresh on every call
  bool new_shape = false;       // every timed call a pod of a shape the memo does not hold
};

Options parseOptions(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto need = [&](size_t& i) -> std::string {
    if (i + 1 >= args.size()) {
      std::cerr << "troupe_bench: " << args[i] << " needs a value\n";
      std::exit(2);
    }
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      args.insert(args.begin() + static_cast<long>(i) + 1, a.substr(eq + 1));
      a = a.substr(0, eq);
      args[i] = a;
    }
    if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      std::exit(0);
    } else if (a == "--nodes") {
      o.nodes = parseIntList(need(i), "--nodes");
    } else if (a == "--iterations") {
      std::vector<int> v = parseIntList(need(i), "--iterations");
      if (v.size() != 1) {
        std::cerr << "troupe_bench: --iterations takes one number\n";
        std::exit(2);
      }
      o.iterations = v[0];
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--json") {
      o.json_file = need(i);
    } else if (a == "--markdown") {
      o.markdown = true;
    } else if (a == "--only") {
      for (const std::string& c : parseWordList(need(i))) {
        if (c != "filter/names" && c != "filter/full" && c != "prioritize/names" && c != "prioritize/full") {
          std::cerr << "troupe_bench: --only \"" << c
                    << "\": expected filter/names, filter/full, prioritize/names or prioritize/full\n";
          std::exit(2);
        }
        o.only.insert(c);
      }
    } else if (a == "--pods") {
      o.pods = parseWordList(need(i));
      for (const std::string& p : o.pods) {
        if (p != "4gpu" && p != "4gpu-nvlink") {
          std::cerr << "troupe_bench: --pods \"" << p << "\": expected 4gpu or 4gpu-nvlink\n";
          std::exit(2);
        }
      }
    } else if (a == "--connections") {
      o.connections = parseIntList(need(i), "--connections");
    } else if (a == "--duration") {
      std::string v = need(i);
      o.duration = std::strtod(v.c_str(), nullptr);
      if (o.duration <= 0 || o.duration > 600) {
        std::cerr << "troupe_bench: --duration \"" << v << "\" must be seconds between 0 and 600\n";
        std::exit(2);
      }
    } else if (a == "--memory-nodes") {
      std::vector<int> v = parseIntList(need(i), "--memory-nodes");
      o.memory_nodes = v.empty() ? 0 : v[0];
    } else if (a == "--no-memory") {
      o.memory = false;
    } else if (a == "--no-latency") {
      o.latency = false;
    } else if (a == "--no-loopback") {
      o.loopback = false;
    } else if (a == "--full-max-nodes") {
      std::vector<int> v = parseIntList(need(i), "--full-max-nodes");
      o.full_max_nodes = v.empty() ? 0 : v[0];
    } else if (a == "--wrk") {
      o.wrk = true;
    } else if (a == "--narrow-to") {
      const std::string v = need(i);
      if (v != "best" && v != "all") {
        std::cerr << "troupe_bench: --narrow-to \"" << v << "\": expected best or all\n";
        std::exit(2);
      }
      o.narrow_to_best = v == "best";
    } else if (a == "--cold-scores") {
      o.remember_scores = false;
    } else if (a == "--new-shape") {
      o.new_shape = true;
    } else if (a == "--in-process") {
      o.in_process = true;
    } else if (a == "--no-breakdown") {
      o.breakdown = false;
    } else if (a == "--fail-on-miss") {
      o.fail_on_miss = true;
    } else {
      std::cerr << "troupe_bench: unknown flag \"" << a << "\"; see --help\n";
      std::exit(2);
    }
  }
  if (o.nodes.empty()) o.nodes = {1000, 5000, 10000};
  if (o.connections.empty()) o.connections = o.quick ? std::vector<int>{1, 64} : std::vector<int>{1, 16, 64};
  if (o.duration == 0) o.duration = o.quick ? 1.5 : 5.0;
  if (o.memory_nodes == 0) o.memory_nodes = *std::max_element(o.nodes.begin(), o.nodes.end());
  if (o.quick && o.full_max_nodes == 0) o.full_max_nodes = 1000;
  return o;
}

// --- the service under test ------------------------------------------------------------------

sched::SchedulerConfig configFor(const Options& o) {
  sched::SchedulerConfig config;
  config.narrow_to_best = o.narrow_to_best;
  config.remember_scores = o.remember_scores;
  // Full-node cases learn every node of the request (learn mode); the cap must not refuse any.
  for (int n : o.nodes)
    config.learning.max_nodes = std::max(config.learning.max_nodes, static_cast<size_t>(n));
  return config;
}

// A Scheduler with the wiring of `troupe serve` (handler, metrics, a logger that drops lines).
struct Service {
  NullBuffer null_buffer;
  std::ostream null_stream{&null_buffer};
  adapters::Logger logger{null_stream, adapters::LogLevel::kError};
  metrics::Metrics metrics{"bench"};
  sched::Scheduler scheduler;
  http::ExtenderHandler handler{http::HandlerOptions{}, scheduler, metrics, logger};
  FillStats fill;

  Service(int nodes, const Options& o) : scheduler(configFor(o)) {
    learnNodes(scheduler, nodes);
    fill = populate(scheduler, nodes);
  }
};

// --- 1. memory -------------------------------------------------------------------------------

struct MemoryResult {
  int nodes = 0;
  double rss_start = 0, rss_nodes = 0, rss_allocated = 0, rss_trimmed = 0;
  FillStats fill;
  double build_seconds = 0;
};

MemoryResult measureMemory(int nodes) {
  MemoryResult m;
  m.nodes = nodes;
  malloc_trim(0);
  m.rss_start = rssMiB();
  const auto t0 = Clock::now();
  {
    NullBuffer nb;
    std::ostream null_stream(&nb);
    adapters::Logger logger(null_stream, adapters::LogLevel::kError);
    metrics::Metrics metrics("bench");
    sched::Scheduler scheduler{sched::SchedulerConfig{}};
    http::ExtenderHandler handler(http::HandlerOptions{}, scheduler, metrics, logger);
    learnNodes(scheduler, nodes);
    m.rss_nodes = rssMiB();
    m.fill = populate(scheduler, nodes);
    m.rss_allocated = rssMiB();
    m.build_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    malloc_trim(0);
    m.rss_trimmed = rssMiB();
  }
  malloc_trim(0);
  return m;
}

// --- 2. latency ------------------------------------------------------------------------------

struct LatencyRow {
  std::string verb, mode, pod;
  int nodes = 0;
  int iterations = 0;
  double p50 = 0, p99 = 0, mean = 0, max = 0;
  double cpu_p50 = 0, cpu_p99 = 0;  // this thread's CPU time: excludes waiting for a CPU
  size_t request_bytes = 0, response_bytes = 0;
  int passed = -1, failed = -1, unresolvable = -1;  // filter only
  double peak_extra_mib = -1;                       // full mode: VmHWM over RSS before
  // The same request split into its three stages (p50 ms, measured separately).
  int breakdown_runs = 0;
  double decode_p50 = 0, core_p50 = 0, encode_p50 = 0;
};

struct Budget {
  int max_iterations;
  int min_iterations;
  double seconds;
};

Budget budgetFor(const Options& o, const std::string& mode, int nodes) {
  if (o.iterations) return {*o.iterations, *o.iterations, 1e9};
  if (mode == "names")
    return o.quick ? Budget{100, 10, 0.3} : Budget{2000, 50, 2.0 * std::max(1, nodes / 5000)};
  return o.quick ? Budget{5, 3, 1.0} : Budget{100, 5, 6.0};
}

// Times decodeExtenderArgs, the Scheduler call and the encoder on their own, as
// ExtenderHandler::filter / ::prioritize chain them, to show which stage dominates.
// `bodies` are used in turn (one, or one per pod shape with --new-shape).
void timeStages(sched::Scheduler& scheduler, LatencyRow& row, const std::vector<std::string>& bodies,
                int runs) {
  std::vector<double> dec, core, enc;
  for (int i = 0; i < runs; ++i) {
    const std::string& body = bodies[static_cast<size_t>(i) % bodies.size()];
    const auto t0 = Clock::now();
    Result<http::ExtenderArgs> args = http::decodeExtenderArgs(body);
    const auto t1 = Clock::now();
    if (!args.isOk()) {
      std::cerr << "troupe_bench: decode failed: " << args.status().message() << "\n";
      std::exit(1);
    }
    const http::ExtenderArgs& a = args.value();
    std::string out;
    Clock::time_point t2, t3;
    if (row.verb == "filter") {
      sched::FilterResult result = a.node_cache_mode ? scheduler.filter(a.pod, a.node_names)
                                                     : scheduler.filterNodes(a.pod, a.nodes, nullptr);
      t2 = Clock::now();
      out = http::encodeFilterResult(a, result);
      t3 = Clock::now();
    } else {
      if (!a.node_cache_mode) {
        for (const model::NodeFacts& n : a.nodes) (void)scheduler.upsertNode(n);
      }
      std::vector<http::HostScore> scores = http::extenderScores(scheduler.prioritize(a.pod, a.node_names));
      t2 = Clock::now();
      out = http::encodeHostPriorityList(scores);
      t3 = Clock::now();
    }
    dec.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    core.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    enc.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
  }
  row.breakdown_runs = runs;
  row.decode_p50 = percentile(dec, 0.5);
  row.core_p50 = percentile(core, 0.5);
  row.encode_p50 = percentile(enc, 0.5);
}

LatencyRow timeCase(http::ExtenderHandler& handler, const std::string& verb, const std::string& mode,
                    const std::string& pod, int nodes, const std::vector<std::string>& bodies,
                    const Budget& budget) {
  LatencyRow row;
  row.verb = verb;
  row.mode = mode;
  row.pod = pod;
  row.nodes = nodes;
  const std::string& body = bodies.back();
  row.request_bytes = body.size();
  const std::string path = "/" + verb;
  // One unmeasured call: checks the answer, warms caches and the GPU-set memo. With several
  // bodies (--new-shape) it is the last one, and the timed calls start with the first.
  malloc_trim(0);
  const double rss_before = rssMiB();
  const bool peak_ok = mode == "full" && resetPeak();
  http::HttpResponse first = handler.handle("POST", path, body);
  if (peak_ok) row.peak_extra_mib = hwmMiB() - rss_before;
  if (first.status != 200) {
    std::cerr << "troupe_bench: " << path << " answered " << first.status << ": " << first.body.substr(0, 300)
              << "\n";
    std::exit(1);
  }
  row.response_bytes = first.body.size();
  if (verb == "filter") {
    http::Json r = http::Json::parse(first.body);
    if (!r["Error"].get<std::string>().empty()) {
      std::cerr << "troupe_bench: filter error: " << r["Error"] << "\n";
      std::exit(1);
    }
    row.passed = static_cast<int>(mode == "names" ? r["NodeNames"].size() : r["Nodes"]["items"].size());
    row.failed = r["FailedNodes"].is_null() ? 0 : static_cast<int>(r["FailedNodes"].size());
    row.unresolvable = r["FailedAndUnresolvableNodes"].is_null()
                           ? 0
                           : static_cast<int>(r["FailedAndUnresolvableNodes"].size());
  }
  std::vector<double> samples, cpu;
  samples.reserve(static_cast<size_t>(budget.max_iterations));
  cpu.reserve(static_cast<size_t>(budget.max_iterations));
  const auto start = Clock::now();
  while (static_cast<int>(samples.size()) < budget.max_iterations) {
    const double c0 = threadCpuMs();
    const auto t0 = Clock::now();
    http::HttpResponse r = handler.handle("POST", path, bodies[samples.size() % bodies.size()]);
    const auto t1 = Clock::now();
    cpu.push_back(threadCpuMs() - c0);
    if (r.status != 200) {
      std::cerr << "troupe_bench: " << path << " answered " << r.status << "\n";
      std::exit(1);
    }
    samples.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (static_cast<int>(samples.size()) >= budget.min_iterations &&
        std::chrono::duration<double>(t1 - start).count() > budget.seconds) {
      break;
    }
  }
  row.iterations = static_cast<int>(samples.size());
  row.p50 = percentile(samples, 0.50);
  row.p99 = percentile(samples, 0.99);
  row.cpu_p50 = percentile(cpu, 0.50);
  row.cpu_p99 = percentile(cpu, 0.99);
  row.max = *std::max_element(samples.begin(), samples.end());
  row.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  return row;
}

// One node count: a fresh model, then names-only cases for every pod before the full-NodeList
// cases (whose huge documents leave the heap fragmented).
std::vector<LatencyRow> measureSize(const Options& o, int n) {
  std::vector<LatencyRow> rows;
  auto want = [&](const std::string& verb, const std::string& mode) {
    if (mode == "full" && o.full_max_nodes > 0 && n > o.full_max_nodes) return false;
    return o.only.empty() || o.only.count(verb + "/" + mode) > 0;
  };
  const bool any_full = want("filter", "full") || want("prioritize", "full");
  const auto t0 = Clock::now();
  Service service(n, o);
  Cluster cluster = makeCluster(n, any_full);
  std::cerr << "  " << n << " nodes: model built in "
            << fmt(std::chrono::duration<double>(Clock::now() - t0).count(), 1) << " s (" << service.fill.pods
            << " pods, " << service.fill.gpus_used << "/" << service.fill.gpus << " GPUs allocated)\n";
  for (const std::string mode : {"names", "full"}) {
    if (!want("filter", mode) && !want("prioritize", mode)) continue;
    for (const std::string& pod_kind : o.pods) {
      const bool nvlink = pod_kind == "4gpu-nvlink";
      const std::string name = nvlink ? "llm-pretrain-7b-nvl-0-k2d9w" : "llm-pretrain-7b-0-x8q4t";
      const std::string uid =
          nvlink ? "7e41c2a9-5b3d-4f6e-8a1b-9c0d2e3f4a5b" : "3c9a6f1e-7b2d-4e8a-9f10-2a6b5c4d8e71";
      // --new-shape: 8 pods differing only in their CPU request (a new shape each for the
      // memo, which keeps 4 per node), uid and name; 48 cores to 48.007 change no fit.
      const int shapes = o.new_shape ? 8 : 1;
      std::vector<std::string> bodies;
      for (int k = 0; k < shapes; ++k) {
        http::Json object =
            makePodObject(k == 0 ? name : name + "-s" + std::to_string(k),
                          k == 0 ? uid : uid.substr(0, uid.size() - 1) + std::to_string(k), 4, nvlink);
        if (k > 0) {
          http::Json& resources = object["spec"]["containers"][0]["resources"];
          resources["requests"]["cpu"] = std::to_string(48000 + k) + "m";
          resources["limits"]["cpu"] = std::to_string(48000 + k) + "m";
        }
        const std::string pod = object.dump();
        bodies.push_back(mode == "names" ? namesBody(pod, cluster.names) : fullBody(pod, cluster.node_json));
      }
      for (const std::string verb : {"filter", "prioritize"}) {
        if (!want(verb, mode)) continue;
        rows.push_back(timeCase(service.handler, verb, mode, pod_kind, n, bodies, budgetFor(o, mode, n)));
        LatencyRow& r = rows.back();
        if (o.breakdown) {
          const int stage_runs = mode == "names" ? (o.quick ? 20 : 50) : (o.quick ? 2 : 5);
          timeStages(service.scheduler, r, bodies, std::max(1, std::min(r.iterations, stage_runs)));
        }
        std::cerr << "    " << verb << "/" << mode << " " << pod_kind << ": p50 " << ms(r.p50) << " ms, p99 "
                  << ms(r.p99) << " ms (" << r.iterations << " runs)\n";
      }
    }
  }
  // Keep the rows in a stable order for the report: by pod, then mode, then verb.
  std::stable_sort(rows.begin(), rows.end(), [&](const LatencyRow& x, const LatencyRow& y) {
    auto rank = [&](const LatencyRow& r) {
      const size_t pod = static_cast<size_t>(std::find(o.pods.begin(), o.pods.end(), r.pod) - o.pods.begin());
      return pod * 4 + (r.mode == "full" ? 2 : 0) + (r.verb == "prioritize" ? 1 : 0);
    };
    return rank(x) < rank(y);
  });
  return rows;
}

// --- process isolation ------------------------------------------------------------------------

// Runs `fn` in a forked child and returns what it returned, so every node count (and the
// memory measurement) starts from a fresh heap: otherwise what an earlier case allocated and
// freed changes the layout, and so the cache behaviour, of the next model. Call only while
// the process has a single thread.
template <typename Fn>
std::string inChild(Fn fn) {
  std::cout.flush();
  std::cerr.flush();
  int fds[2];
  if (pipe(fds) != 0) {
    std::cerr << "troupe_bench: pipe: " << std::strerror(errno) << "\n";
    std::exit(1);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::cerr << "troupe_bench: fork: " << std::strerror(errno) << "\n";
    std::exit(1);
  }
  if (pid == 0) {
    close(fds[0]);
    const std::string out = fn();
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) _exit(3);
      done += static_cast<size_t>(n);
    }
    close(fds[1]);
    std::cerr.flush();
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::cerr << "troupe_bench: a measurement process failed (status " << status << ")\n";
    std::exit(1);
  }
  return out;
}

OJson rowToJson(const LatencyRow& r) {
  return {{"verb", r.verb},
          {"mode", r.mode},
          {"pod", r.pod},
          {"nodes", r.nodes},
          {"iterations", r.iterations},
          {"p50", r.p50},
          {"p99", r.p99},
          {"mean", r.mean},
          {"max", r.max},
          {"cpu_p50", r.cpu_p50},
          {"cpu_p99", r.cpu_p99},
          {"request_bytes", r.request_bytes},
          {"response_bytes", r.response_bytes},
          {"passed", r.passed},
          {"failed", r.failed},
          {"unresolvable", r.unresolvable},
          {"peak_extra_mib", r.peak_extra_mib},
          {"breakdown_runs", r.breakdown_runs},
          {"decode_p50", r.decode_p50},
          {"core_p50", r.core_p50},
          {"encode_p50", r.encode_p50}};
}

LatencyRow rowFromJson(const OJson& j) {
  LatencyRow r;
  j.at("verb").get_to(r.verb);
  j.at("mode").get_to(r.mode);
  j.at("pod").get_to(r.pod);
  j.at("nodes").get_to(r.nodes);
  j.at("iterations").get_to(r.iterations);
  j.at("p50").get_to(r.p50);
  j.at("p99").get_to(r.p99);
  j.at("mean").get_to(r.mean);
  j.at("max").get_to(r.max);
  j.at("cpu_p50").get_to(r.cpu_p50);
  j.at("cpu_p99").get_to(r.cpu_p99);
  j.at("request_bytes").get_to(r.request_bytes);
  j.at("response_bytes").get_to(r.response_bytes);
  j.at("passed").get_to(r.passed);
  j.at("failed").get_to(r.failed);
  j.at("unresolvable").get_to(r.unresolvable);
  j.at("peak_extra_mib").get_to(r.peak_extra_mib);
  j.at("breakdown_runs").get_to(r.breakdown_runs);
  j.at("decode_p50").get_to(r.decode_p50);
  j.at("core_p50").get_to(r.core_p50);
  j.at("encode_p50").get_to(r.encode_p50);
  return r;
}

std::vector<LatencyRow> measureLatency(const Options& o) {
  std::vector<LatencyRow> rows;
  for (int n : o.nodes) {
    if (o.in_process) {
      for (LatencyRow& r : measureSize(o, n)) rows.push_back(std::move(r));
      continue;
    }
    const OJson got = OJson::parse(inChild([&] {
      OJson list = OJson::array();
      for (const LatencyRow& r : measureSize(o, n)) list.push_back(rowToJson(r));
      return list.dump();
    }));
    for (const OJson& r : got) rows.push_back(rowFromJson(r));
  }
  return rows;
}

// --- 3. loopback -----------------------------------------------------------------------------

struct LoopbackRun {
  int nodes = 0;
  int names_per_request = 0;
  size_t request_bytes = 0;
  std::vector<LoadResult> results;
  std::string error;
};

LoopbackRun measureLoopback(const Options& o) {
  LoopbackRun run;
  run.nodes = 1000;
  run.names_per_request = 16;
  // Outlives the server (declared first): ExtenderServer::stop() drains, so no handler runs
  // on this scheduler once the server is stopped and destroyed.
  const auto owned = std::make_unique<Service>(run.nodes, o);
  Service& service = *owned;
  const std::string pod =
      makePodObject("llm-pretrain-7b-0-x8q4t", "3c9a6f1e-7b2d-4e8a-9f10-2a6b5c4d8e71", 4, false).dump();
  std::vector<std::string> bodies;
  uint64_t x = 12345;
  for (int b = 0; b < 64; ++b) {
    std::vector<std::string> names;
    for (int k = 0; k < run.names_per_request; ++k) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      names.push_back(nodeName(static_cast<int>((x >> 33) % static_cast<uint64_t>(run.nodes))));
    }
    bodies.push_back(namesBody(pod, names));
  }
  run.request_bytes = bodies.front().size();

  std::optional<http::ExtenderServer> server;
  int port = 0;
  for (int attempt = 0; attempt < 5 && !server; ++attempt) {
    port = freeLoopbackPort();
    if (port == 0) continue;
    server.emplace("127.0.0.1", port, service.handler, service.logger);
    if (!server->start().isOk()) server.reset();
  }
  if (!server) {
    run.error = "could not start an ExtenderServer on 127.0.0.1";
    return run;
  }
  for (int c : o.connections) {
    LoadResult r = runLoad(port, "/filter", bodies, c, o.duration, o.quick ? 0.3 : 0.5);
    std::cerr << "    " << c << " connections: " << thousands(r.rps) << " req/s, p50 " << ms(r.p50_ms)
              << " ms, p99 " << ms(r.p99_ms) << " ms"
              << (r.errors ? ", " + std::to_string(r.errors) + " errors" : "") << "\n";
    if (!r.first_error.empty()) std::cerr << "      first error: " << r.first_error << "\n";
    run.results.push_back(r);
  }
  if (o.wrk) {
    const int c = *std::max_element(o.connections.begin(), o.connections.end());
    LoadResult r;
    std::string error;
    if (runWrk(port, "/filter", bodies.front(), c, o.duration, &r, &error)) {
      std::cerr << "    wrk, " << c << " connections: " << thousands(r.rps) << " req/s, p50 " << ms(r.p50_ms)
                << " ms, p99 " << ms(r.p99_ms) << " ms\n";
      run.results.push_back(r);
    } else {
      std::cerr << "    wrk: " << error << "\n";
      run.error = "wrk: " + error;
    }
  }
  server->stop();
  return run;
}

// --- report ----------------------------------------------------------------------------------

struct Target {
  std::string what;
  std::string goal;
  std::string measured;
  std::string verdict;  // PASS, MISS, not measured
};

std::vector<Target> evaluate(const std::vector<LatencyRow>& rows, const std::optional<MemoryResult>& mem,
                             const std::optional<LoopbackRun>& loop) {
  std::vector<Target> out;
  auto worstP99 = [&](const std::string& verb, const std::string& mode, int nodes) -> std::optional<double> {
    std::optional<double> worst;
    for (const LatencyRow& r : rows) {
      if (r.verb == verb && r.mode == mode && r.nodes == nodes) worst = std::max(worst.value_or(0), r.p99);
    }
    return worst;
  };
  if (auto v = worstP99("filter", "names", 5000)) {
    out.push_back(
        {"names-only filter, 5,000 nodes, p99", "< 2 ms", ms(*v) + " ms", *v < 2 ? "PASS" : "MISS"});
  } else {
    out.push_back({"names-only filter, 5,000 nodes, p99", "< 2 ms", "-", "not measured"});
  }
  if (auto v = worstP99("filter", "full", 1000)) {
    out.push_back(
        {"full-node filter, 1,000 nodes, p99", "< 50 ms", ms(*v) + " ms", *v < 50 ? "PASS" : "MISS"});
  } else {
    out.push_back({"full-node filter, 1,000 nodes, p99", "< 50 ms", "-", "not measured"});
  }
  if (loop && !loop->results.empty()) {
    const LoadResult* best = &loop->results.front();
    for (const LoadResult& r : loop->results) {
      if (r.rps > best->rps) best = &r;
    }
    out.push_back({"small requests per second (loopback, " + std::to_string(usableCpus()) + " CPUs)",
                   ">= 5,000/s",
                   thousands(best->rps) + "/s (" + std::to_string(best->connections) + " conns" +
                       (best->client == "wrk" ? ", wrk" : "") + ")",
                   best->rps >= 5000 ? "PASS" : "MISS"});
  } else {
    out.push_back({"small requests per second (loopback)", ">= 5,000/s", "-", "not measured"});
  }
  if (mem) {
    out.push_back({"resident memory, " + thousands(mem->nodes) + " nodes", "< 200 MB",
                   fmt(mem->rss_allocated * 1.048576, 0) + " MB",
                   mem->nodes < 10000                    ? "not measured at 10,000"
                   : mem->rss_allocated * 1.048576 < 200 ? "PASS"
                                                         : "MISS"});
  } else {
    out.push_back({"resident memory, 10,000 nodes", "< 200 MB", "-", "not measured"});
  }
  return out;
}

std::string buildType() {
#ifdef __OPTIMIZE__
  return std::string(TROUPE_BENCH_BUILD_TYPE) + " (optimized)";
#else
  return std::string(TROUPE_BENCH_BUILD_TYPE) + " (NOT optimized: numbers are meaningless)";
#endif
}

std::string kernel() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release;
}

void printReport(const Options& o, const std::string& load_start, const std::vector<LatencyRow>& rows,
                 const std::optional<MemoryResult>& mem, const std::optional<LoopbackRun>& loop,
                 const std::vector<Target>& targets) {
  const bool md = o.markdown;
  std::ostream& out = std::cout;
  auto line = [&](const std::vector<std::string>& cells, const std::vector<int>& widths) {
    if (md) {
      out << "|";
      for (const std::string& c : cells) out << " " << c << " |";
      out << "\n";
      return;
    }
    for (size_t i = 0; i < cells.size(); ++i) {
      const int w = widths[i];
      std::string c = cells[i];
      if (i == 0)
        out << c << std::string(static_cast<size_t>(std::max<int>(1, w - static_cast<int>(c.size()))), ' ');
      else
        out << std::string(static_cast<size_t>(std::max<int>(1, w - static_cast<int>(c.size()))), ' ') << c;
    }
    out << "\n";
  };
  auto header = [&](const std::vector<std::string>& cells, const std::vector<int>& widths,
                    const std::string& align) {
    line(cells, widths);
    if (md) {
      out << "|";
      for (char a : align) out << (a == 'l' ? " --- |" : " ---: |");
      out << "\n";
    }
  };
  auto title = [&](const std::string& t) {
    out << (md ? "\n#### " : "\n== ") << t << (md ? "\n\n" : " ==\n");
  };

  title("Machine");
  out << (md ? "- " : "") << "CPU: " << cpuModel() << ", " << usableCpus() << " usable CPUs\n";
  out << (md ? "- " : "") << "OS: " << kernel() << "; compiler: " << __VERSION__ << "; build: " << buildType()
      << "\n";
  out << (md ? "- " : "") << "Mode: " << (o.quick ? "--quick (short budgets)" : "full")
      << "; load average (1 min) at start " << load_start << ", at end " << loadAverage()
      << (std::strtod(load_start.c_str(), nullptr) > 0.5 * usableCpus()
              ? " (busy machine: expect noisy numbers)"
              : "")
      << "\n";

  if (!rows.empty()) {
    title("Server-side handling time (ExtenderHandler::handle: decode + core + encode), ms");
    const std::vector<int> w = {12, 7, 13, 8, 7, 10, 10, 10, 10, 10, 10, 10, 10, 22};
    header({"verb", "mode", "pod", "nodes", "runs", "p50", "p99", "mean", "max", "cpu p50", "cpu p99",
            "req KB", "resp KB", "passed/failed/unres."},
           w, "lllrrrrrrrrrrr");
    for (const LatencyRow& r : rows) {
      std::string outcome = r.passed < 0 ? "-"
                                         : std::to_string(r.passed) + "/" + std::to_string(r.failed) + "/" +
                                               std::to_string(r.unresolvable);
      line({r.verb, r.mode, r.pod, thousands(r.nodes), std::to_string(r.iterations), ms(r.p50), ms(r.p99),
            ms(r.mean), ms(r.max), ms(r.cpu_p50), ms(r.cpu_p99),
            thousands(static_cast<double>(r.request_bytes) / 1024.0),
            thousands(static_cast<double>(r.response_bytes) / 1024.0), outcome},
           w);
    }
    if (std::any_of(rows.begin(), rows.end(), [](const LatencyRow& r) { return r.breakdown_runs > 0; })) {
      title("Where the time goes: each stage timed on its own, p50 ms (share of their sum)");
      const std::vector<int> bw = {12, 7, 13, 8, 7, 18, 18, 18};
      header({"verb", "mode", "pod", "nodes", "runs", "decode JSON", "Scheduler core", "encode JSON"}, bw,
             "lllrrrrr");
      for (const LatencyRow& r : rows) {
        if (r.breakdown_runs == 0) continue;
        const double sum = r.decode_p50 + r.core_p50 + r.encode_p50;
        auto cell = [&](double v) { return ms(v) + " (" + fmt(sum > 0 ? 100 * v / sum : 0, 0) + "%)"; };
        line({r.verb, r.mode, r.pod, thousands(r.nodes), std::to_string(r.breakdown_runs), cell(r.decode_p50),
              cell(r.core_p50), cell(r.encode_p50)},
             bw);
      }
    }
    for (const LatencyRow& r : rows) {
      if (r.mode == "full" && r.verb == "filter" && r.peak_extra_mib >= 0 && r.pod == rows.front().pod) {
        out << (md ? "\n" : "") << "Transient memory of one full-node filter at " << thousands(r.nodes)
            << " nodes (VmHWM over RSS before): " << fmt(r.peak_extra_mib, 0) << " MiB for a "
            << fmt(static_cast<double>(r.request_bytes) / 1048576.0, 1) << " MiB body\n";
      }
    }
  }

  if (loop) {
    title("Loopback HTTP: names-only /filter, " + std::to_string(loop->names_per_request) +
          " nodes per request (" + fmt(static_cast<double>(loop->request_bytes) / 1024.0, 1) + " KB), " +
          thousands(loop->nodes) + "-node model, built-in client in the same process");
    if (!loop->error.empty()) out << loop->error << "\n";
    const std::vector<int> w = {10, 12, 12, 12, 12, 12, 12, 10, 8};
    header({"client", "connections", "req/s", "p50 ms", "p99 ms", "mean ms", "max ms", "requests", "errors"},
           w, "lrrrrrrrr");
    for (const LoadResult& r : loop->results) {
      line({r.client, std::to_string(r.connections), thousands(r.rps), ms(r.p50_ms), ms(r.p99_ms),
            ms(r.mean_ms), r.client == "wrk" ? "-" : ms(r.max_ms), std::to_string(r.requests),
            std::to_string(r.errors)},
           w);
    }
  }

  if (mem) {
    title("Resident memory (VmRSS), " + thousands(mem->nodes) + " nodes x 8 GPUs");
    const std::vector<int> w = {52, 12};
    header({"stage", "MiB"}, w, "lr");
    line({"process before the model", fmt(mem->rss_start, 1)}, w);
    line({"after learning " + thousands(mem->nodes) + " nodes", fmt(mem->rss_nodes, 1)}, w);
    line({"after placing " + thousands(mem->fill.pods) + " pods (" +
              thousands(static_cast<double>(mem->fill.gpus_used)) + "/" +
              thousands(static_cast<double>(mem->fill.gpus)) + " GPUs)",
          fmt(mem->rss_allocated, 1)},
         w);
    line({"same, after malloc_trim (free heap returned)", fmt(mem->rss_trimmed, 1)}, w);
    line({"model alone (last minus first)", fmt(mem->rss_trimmed - mem->rss_start, 1)}, w);
  }

  title("Targets");
  const std::vector<int> w = {52, 12, 26, 14};
  header({"target", "goal", "measured", "verdict"}, w, "llll");
  for (const Target& t : targets) line({t.what, t.goal, t.measured, t.verdict}, w);
}

void writeJson(const std::string& file, const Options& o, const std::string& load_start,
               const std::vector<LatencyRow>& rows, const std::optional<MemoryResult>& mem,
               const std::optional<LoopbackRun>& loop, const std::vector<Target>& targets) {
  OJson j;
  j["machine"] = {{"cpu", cpuModel()},           {"cpus", usableCpus()},        {"kernel", kernel()},
                  {"compiler", __VERSION__},     {"build", buildType()},        {"quick", o.quick},
                  {"loadavg_start", load_start}, {"loadavg_end", loadAverage()}};
  OJson lat = OJson::array();
  for (const LatencyRow& r : rows) {
    OJson row = {{"verb", r.verb},
                 {"mode", r.mode},
                 {"pod", r.pod},
                 {"nodes", r.nodes},
                 {"iterations", r.iterations},
                 {"p50_ms", r.p50},
                 {"p99_ms", r.p99},
                 {"mean_ms", r.mean},
                 {"max_ms", r.max},
                 {"cpu_p50_ms", r.cpu_p50},
                 {"cpu_p99_ms", r.cpu_p99},
                 {"request_bytes", r.request_bytes},
                 {"response_bytes", r.response_bytes}};
    if (r.passed >= 0)
      row["filter"] = {{"passed", r.passed}, {"failed", r.failed}, {"unresolvable", r.unresolvable}};
    if (r.peak_extra_mib >= 0) row["peak_extra_mib"] = r.peak_extra_mib;
    if (r.breakdown_runs > 0) {
      row["stages_p50_ms"] = {{"runs", r.breakdown_runs},
                              {"decode", r.decode_p50},
                              {"core", r.core_p50},
                              {"encode", r.encode_p50}};
    }
    lat.push_back(row);
  }
  j["latency"] = lat;
  if (loop) {
    OJson l = {{"nodes", loop->nodes},
               {"names_per_request", loop->names_per_request},
               {"request_bytes", loop->request_bytes},
               {"error", loop->error},
               {"runs", OJson::array()}};
    for (const LoadResult& r : loop->results) {
      l["runs"].push_back({{"client", r.client},
                           {"connections", r.connections},
                           {"seconds", r.seconds},
                           {"requests", r.requests},
                           {"errors", r.errors},
                           {"rps", r.rps},
                           {"p50_ms", r.p50_ms},
                           {"p99_ms", r.p99_ms},
                           {"mean_ms", r.mean_ms},
                           {"max_ms", r.max_ms},
                           {"first_error", r.first_error}});
    }
    j["loopback"] = l;
  }
  if (mem) {
    j["memory"] = {{"nodes", mem->nodes},
                   {"pods", mem->fill.pods},
                   {"gpus", mem->fill.gpus},
                   {"gpus_used", mem->fill.gpus_used},
                   {"rss_start_mib", mem->rss_start},
                   {"rss_nodes_mib", mem->rss_nodes},
                   {"rss_allocated_mib", mem->rss_allocated},
                   {"rss_trimmed_mib", mem->rss_trimmed},
                   {"build_seconds", mem->build_seconds}};
  }
  OJson t = OJson::array();
  for (const Target& x : targets)
    t.push_back({{"target", x.what}, {"goal", x.goal}, {"measured", x.measured}, {"verdict", x.verdict}});
  j["targets"] = t;
  std::ofstream out(file);
  out << j.dump(2) << "\n";
  if (!out) {
    std::cerr << "troupe_bench: cannot write " << file << "\n";
    std::exit(1);
  }
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) {
  using namespace troupe::bench;
  const Options o = parseOptions(argc, argv);
  const auto start = Clock::now();
  const std::string load_start = loadAverage();
#ifndef __OPTIMIZE__
  std::cerr << "troupe_bench: WARNING: built without optimization; use a Release or RelWithDebInfo build\n";
#endif
  // Memory first, in a fresh process, before anything else has grown the heap.
  std::optional<MemoryResult> mem;
  if (o.memory) {
    std::cerr << "memory: " << o.memory_nodes << " nodes...\n";
    if (o.in_process) {
      mem = measureMemory(o.memory_nodes);
    } else {
      const OJson m = OJson::parse(inChild([&] {
        const MemoryResult r = measureMemory(o.memory_nodes);
        return OJson{{"nodes", r.nodes},
                     {"rss_start", r.rss_start},
                     {"rss_nodes", r.rss_nodes},
                     {"rss_allocated", r.rss_allocated},
                     {"rss_trimmed", r.rss_trimmed},
                     {"pods", r.fill.pods},
                     {"gpus", r.fill.gpus},
                     {"gpus_used", r.fill.gpus_used},
                     {"build_seconds", r.build_seconds}}
            .dump();
      }));
      MemoryResult r;
      m.at("nodes").get_to(r.nodes);
      m.at("rss_start").get_to(r.rss_start);
      m.at("rss_nodes").get_to(r.rss_nodes);
      m.at("rss_allocated").get_to(r.rss_allocated);
      m.at("rss_trimmed").get_to(r.rss_trimmed);
      m.at("pods").get_to(r.fill.pods);
      m.at("gpus").get_to(r.fill.gpus);
      m.at("gpus_used").get_to(r.fill.gpus_used);
      m.at("build_seconds").get_to(r.build_seconds);
      mem = r;
    }
  }
  std::vector<LatencyRow> rows;
  if (o.latency) {
    std::cerr << "latency:\n";
    rows = measureLatency(o);
  }
  std::optional<LoopbackRun> loop;
  if (o.loopback) {
    std::cerr << "loopback:\n";
    loop = measureLoopback(o);
  }
  const std::vector<Target> targets = evaluate(rows, mem, loop);
  printReport(o, load_start, rows, mem, loop, targets);
  if (!o.json_file.empty()) writeJson(o.json_file, o, load_start, rows, mem, loop, targets);
  std::cerr << "done in " << fmt(std::chrono::duration<double>(Clock::now() - start).count(), 1) << " s\n";
  if (o.fail_on_miss) {
    for (const Target& t : targets) {
      if (t.verdict == "MISS") return 1;
    }
  }
  return 0;
}
