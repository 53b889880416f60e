// troupe simulate: replays a cluster trace through the scheduling core, the FGD paper's way,
// and compares policies. Reads files and writes results; the simulation itself is in troupe_sim.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "app/commands.h"
#include "troupe/common/strings.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sim/cluster.h"
#include "troupe/sim/replay.h"
#include "troupe/sim/report.h"
#include "troupe/sim/tenant_report.h"
#include "troupe/sim/tenants.h"
#include "troupe/sim/trace.h"

namespace troupe::app {

const char* const kSimulateHelp =
    R"(troupe simulate - replay a GPU cluster trace and compare scheduling policies

Usage:
  troupe simulate [--nodes CSV --pods CSV] [--policy a,b,...] [--seeds N] [flags]

Replays the Alibaba openb trace format the way the FGD paper (Weng et al., USENIX ATC '23)
does, through the same filter and scoring code as 'troupe serve': pods are shuffled with a
seed, cloned until they ask for 130% of the cluster's GPUs, and tried once each, in order;
a pod that fits nowhere is dropped. The table gives the GPUs left unallocated when the arrived
requests reach 100% (and 130%) of capacity: lower is better. Ties between equally scored
nodes go to a seeded node order, and the random stream is Go's math/rand, so a seed gives the
FGD artifact's own run: the paper's policies reproduce its published figures exactly.

fgd measures fragmentation against the trace's typical pods; troupe against its live window of
recent requests (started warm with the trace's pods, as a long-running extender would be), and
among equal fragmentation prefers the best-connected GPU set, then smaller nodes. The trace has
no topology: nodes get the profile Troupe guesses for their GPU type (pcie-8, pcie-4, pcie-2).
The "best GPU set" column is the share of multi-GPU pods placed on a set as well connected as
any on their node.

Flags:
  --nodes CSV        node list: sn,cpu_milli,memory_mib,gpu,model (default: the openb cluster
                     in ../shared/data/alibaba-gpu-v2023/ when present, else the small trace
                     in examples/trace/)
  --pods CSV         pod list: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]
                     (gpu_milli is per GPU; default: as for --nodes)
  --policy LIST      comma-separated, default troupe,fgd,best-fit,gpu-packing,gpu-clustering,
                     dot-product,random. All: troupe, fgd, best-fit, dot-product, gpu-packing,
                     gpu-clustering, random, kube (stock kube-scheduler resource scoring,
                     random ties), binpack, spread
  --seeds N          runs per policy, seeds FIRST..FIRST+N-1 (default 10, the paper's)
  --first-seed S     the first seed (default 42, the paper's)
  --arrive PERCENT   report unallocated GPUs at this arrived % (default 100; 130 is always
                     reported too)
  --tune RATIO       clone pods until they ask for RATIO x the GPU capacity (default 1.3)
  --in-order         replay the pods once each in the file's order (no shuffle, no clones),
                     as the live replay creates them (tools/trace_replay.py): ties go to the
                     live extender's node order and every policy measures fragmentation
                     against a request window that starts empty, as a fresh 'troupe serve'
  --placements FILE  write FILE (CSV: policy,seed,pod,node; node empty when dropped) with
                     every pod's node, in replay order
  --defrag LIST      at 100% arrived, run the defragmentation advisor on a copy of the
                     cluster with up to K pod moves for each K in LIST (e.g. 1,4,16,64), and
                     report fragmented GPUs before and after (docs/defrag.md)
  --json             print the results as JSON instead of the table
                     (the table and JSON also give failed requests by size - CPU-only, share,
                     1, 2, 4 and 8+ GPUs - up to 100% arrived, and the GPU share of each placed)
  --out DIR          write DIR/curves.csv (mean allocation per arrived %), DIR/runs.csv (per
                     seed) and DIR/allocation.svg (the plot)
  --tenants LIST     queueing mode (below): name:weight[:guaranteedGPUs],... e.g. a:1,b:1,c:2
  --load X           queueing mode: divide the times between arrivals by X (default 1)
                     (--tune there: clone pods, times included, up to RATIO x the GPU
                     capacity; default: no clones)
  --threads N        parallel runs (default: the machine's cores)
  -h, --help         this text

Queueing mode (--tenants): pods arrive at their trace creation_time (the gaps divided by
--load), run for deletion_time - scheduled_time (deletion - creation where scheduled is
empty), wait while nothing fits and leave when done. Each pod belongs to one tenant (a queue)
by a seeded hash of its name, so tenants get about the same number of pods whatever their
weight. Two orderings of the waiting pods run on the same workload: fifo (kube-scheduler's:
every waiting pod tried in arrival order at each event, the first that fits takes its place)
and fair-share (the tenant furthest below its fair share first, admitted by the same queue
accounting as 'troupe serve'). Placement is the --policy's (one policy, default troupe). The
table gives GPU utilisation, each tenant's share of allocated GPUs while the fleet is contended
against its fair share, Jain's index of share/fair share and waits (mean, p50, p95, p99). --out
DIR writes DIR/tenant-shares.csv and DIR/tenant-shares.svg (share over time against fair share,
first seed). --seeds defaults to 1 here. docs/queues.md explains the numbers.

Examples:
  troupe simulate --out sim-out                      # all of the above, 10 seeds, with plot
  troupe simulate --policy troupe,fgd,best-fit --seeds 2
  troupe simulate --nodes n.csv --pods p.csv --json
  troupe simulate --tenants a:1,b:1,c:2 --load 50000 --tune 2 --out tenants-out
)";

namespace {

constexpr const char* kSharedNodes = "../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv";
constexpr const char* kSharedPods = "../shared/data/alibaba-gpu-v2023/openb_pod_list_default.csv";
constexpr const char* kExampleNodes = "examples/trace/nodes.csv";
constexpr const char* kExamplePods = "examples/trace/pods.csv";

struct SimulateFlags {
  std::string nodes, pods;
  std::vector<sched::PolicyPtr> policies;
  int seeds = 10;
  int64_t first_seed = 42;
  int arrive = 100;
  double tune = 1.3;
  bool json = false;
  bool in_order = false;
  std::string placements;
  std::string out;
  int threads = 0;
  std::vector<int> defrag;               // move budgets; empty = no advisor
  std::vector<sim::TenantSpec> tenants;  // non-empty: queueing mode
  double load = 1;
  bool seeds_given = false;
  bool tune_given = false;
  std::vector<std::string> fgd_only;  // flags given that queueing mode does not take
};

int usage(const std::string& message) {
  std::cerr << "troupe simulate: " << message << "\nRun 'troupe simulate --help' for the flags.\n";
  return 2;
}

std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool parseInt(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// The policies named in --policy, once each; then the checks that need every flag.
std::optional<int> finishFlags(const std::string& policy_list, bool policy_given, SimulateFlags& f) {
  for (const std::string& name : splitList(policy_list, ',')) {
    Result<sched::PolicyPtr> policy = sched::builtinPolicies().create(trim(name));
    if (!policy.isOk()) return usage("--policy: " + policy.status().message());
    auto same = [&](const sched::PolicyPtr& p) { return p->name() == policy.value()->name(); };
    if (std::none_of(f.policies.begin(), f.policies.end(), same)) f.policies.push_back(policy.value());
  }
  if (f.policies.empty()) return usage("--policy needs at least one policy name");
  if (!f.tenants.empty()) {
    if (!f.fgd_only.empty()) {
      return usage(f.fgd_only.front() +
                   " is for the FGD replay; --tenants runs the queueing simulation, drop " +
                   f.fgd_only.front());
    }
    if (!policy_given) f.policies.resize(1);  // troupe
    if (f.policies.size() != 1) {
      return usage("--tenants takes one --policy (the placement within the cluster), e.g. --policy troupe");
    }
    if (!f.seeds_given) f.seeds = 1;
  } else if (f.load != 1) {
    return usage(
        "--load only applies with --tenants (the queueing simulation), e.g. --tenants a:1,b:1 --load 2");
  }
  if (f.nodes.empty() != f.pods.empty())
    return usage("give both --nodes and --pods, or neither for the default trace");
  if (f.nodes.empty()) {
    const bool shared = std::filesystem::exists(kSharedNodes) && std::filesystem::exists(kSharedPods);
    f.nodes = shared ? kSharedNodes : kExampleNodes;
    f.pods = shared ? kSharedPods : kExamplePods;
  }
  return std::nullopt;
}

// Applies one flag that takes a value; returns an exit code for a bad value.
std::optional<int> applyValuedFlag(const std::string& arg, const std::string& value, SimulateFlags& f,
                                   std::string& policy_list, bool& policy_given) {
  int64_t n = 0;
  if (arg == "--nodes") {
    f.nodes = value;
  } else if (arg == "--pods") {
    f.pods = value;
  } else if (arg == "--policy") {
    policy_list = value;
    policy_given = true;
  } else if (arg == "--seeds") {
    if (!parseInt(value, 1, 1000, &n))
      return usage("--seeds \"" + value + "\" must be a whole number from 1 to 1000");
    f.seeds = static_cast<int>(n);
    f.seeds_given = true;
  } else if (arg == "--first-seed") {
    if (!parseInt(value, -(int64_t{1} << 62), int64_t{1} << 62, &n))
      return usage("--first-seed \"" + value + "\" must be a whole number");
    f.first_seed = n;
  } else if (arg == "--arrive") {
    if (!parseInt(value, 1, 1000, &n))
      return usage("--arrive \"" + value + "\" must be a whole percent from 1 to 1000, e.g. 100");
    f.arrive = static_cast<int>(n);
  } else if (arg == "--tune") {
    double tune = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), tune);
    if (ec != std::errc() || end != value.data() + value.size() || !(tune >= 0.1 && tune <= 10)) {
      return usage("--tune \"" + value + "\" must be a ratio from 0.1 to 10, e.g. 1.3");
    }
    f.tune = tune;
    f.tune_given = true;
  } else if (arg == "--placements") {
    f.placements = value;
  } else if (arg == "--defrag") {
    f.defrag.clear();
    for (const std::string& item : splitList(value, ',')) {
      if (!parseInt(std::string(trim(item)), 0, 100000, &n))
        return usage("--defrag \"" + value + "\" must list move budgets from 0 to 100000, e.g. 1,4,16");
      f.defrag.push_back(static_cast<int>(n));
    }
    if (f.defrag.empty()) return usage("--defrag needs at least one move budget, e.g. --defrag 1,4,16");
  } else if (arg == "--tenants") {
    Result<std::vector<sim::TenantSpec>> tenants = sim::parseTenants(value);
    if (!tenants.isOk()) return usage("--tenants: " + tenants.status().message());
    f.tenants = std::move(tenants).value();
  } else if (arg == "--load") {
    double load = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), load);
    if (ec != std::errc() || end != value.data() + value.size() || !(load > 0 && load <= 1e9)) {
      return usage("--load \"" + value +
                   "\" must be a number above 0 (up to 1e9), e.g. --load 2 halves the "
                   "times between arrivals");
    }
    f.load = load;
  } else if (arg == "--out") {
    f.out = value;
  } else if (arg == "--threads") {
    if (!parseInt(value, 1, 256, &n))
      return usage("--threads \"" + value + "\" must be a whole number from 1 to 256");
    f.threads = static_cast<int>(n);
  }
  return std::nullopt;
}

// Returns an exit code when the command should stop (help, or a usage error).
std::optional<int> parseFlags(const std::vector<std::string>& args, SimulateFlags& f) {
  std::string policy_list = "troupe,fgd,best-fit,gpu-packing,gpu-clustering,dot-product,random";
  bool policy_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i], value;
    if (arg == "-h" || arg == "--help") {
      std::cout << kSimulateHelp;
      return 0;
    }
    if (arg == "--json") {
      f.json = true;
      continue;
    }
    if (arg == "--in-order") {
      f.in_order = true;
      f.fgd_only.push_back(arg);
      continue;
    }
    if (arg.rfind("--arrive", 0) == 0 || arg.rfind("--placements", 0) == 0 || arg.rfind("--defrag", 0) == 0) {
      f.fgd_only.push_back(arg.substr(0, arg.find('=')));
    }
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    static const char* const kValued[] = {"--nodes",  "--pods",    "--policy", "--seeds",   "--first-seed",
                                          "--arrive", "--tune",    "--out",    "--threads", "--placements",
                                          "--defrag", "--tenants", "--load"};
    if (std::find(std::begin(kValued), std::end(kValued), arg) == std::end(kValued)) {
      return usage("unknown flag \"" + arg + "\"");
    }
    if (!has_value) {
      if (i + 1 >= args.size()) return usage(arg + " needs a value");
      value = args[++i];
    }
    if (std::optional<int> code = applyValuedFlag(arg, value, f, policy_list, policy_given)) return code;
  }
  return finishFlags(policy_list, policy_given, f);
}

// A progress bar on stderr, only for a terminal, redrawn at most every 100 ms.
class Progress {
 public:
  explicit Progress(int total) : total_(total), enabled_(isatty(STDERR_FILENO) == 1) {}
  void done(const std::string& what) {
    std::lock_guard lock(mu_);
    ++done_;
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done_ < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const int width = 30, filled = width * done_ / total_;
    std::fprintf(stderr, "\r[%s%s] %d/%d runs  %-28s", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), done_, total_, what.c_str());
    if (done_ == total_) std::fprintf(stderr, "\r%*s\r", 80, "");
    std::fflush(stderr);
  }

 private:
  std::mutex mu_;
  int total_, done_ = 0;
  bool enabled_;
  std::chrono::steady_clock::time_point last_{};
};

bool writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

// Queueing mode: FIFO and fair share on the same timed workload, per seed.
int runTenants(const SimulateFlags& f, const std::vector<sim::TraceNode>& trace_nodes,
               const std::vector<sim::TracePod>& trace_pods) {
  model::TopologyCatalog catalog;
  Result<sim::Cluster> cluster = sim::buildCluster(trace_nodes, catalog);
  if (!cluster.isOk()) return usage(f.nodes + ": " + cluster.status().message());
  sim::TenantReport report;
  report.nodes_file = f.nodes;
  report.pods_file = f.pods;
  report.policy = std::string(f.policies.front()->name());
  report.load = f.load;
  report.first_seed = f.first_seed;
  report.tune = f.tune_given ? f.tune : 0;
  std::vector<sim::TracePod> sorted = trace_pods;
  std::sort(sorted.begin(), sorted.end(),
            [](const sim::TracePod& a, const sim::TracePod& b) { return a.name < b.name; });
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < f.seeds; ++i) {
    const int64_t seed = f.first_seed + i;
    const std::vector<sim::TracePod> tuned =
        f.tune_given ? sim::tunedPods(sorted, cluster.value().gpu_milli(), seed, f.tune) : sorted;
    Result<std::vector<sim::TimedPod>> pods = sim::timedPods(tuned, f.tenants.size(), f.load, seed, f.pods);
    if (!pods.isOk()) return usage("--tenants: " + pods.status().message());
    for (sim::Ordering ordering : {sim::Ordering::kFifo, sim::Ordering::kFairShare}) {
      sim::TenantSimInput in;
      in.cluster = &cluster.value();
      in.pods = &pods.value();
      in.tenants = f.tenants;
      in.policy = f.policies.front();
      in.ordering = ordering;
      in.seed = seed;
      (ordering == sim::Ordering::kFifo ? report.fifo : report.fair).push_back(sim::simulateTenants(in));
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (f.json) {
    std::cout << sim::renderTenantJson(report);
  } else {
    std::cout << "Trace: " << f.nodes << " + " << f.pods << " (" << trace_pods.size() << " pods)\n\n"
              << sim::renderTenantTable(report);
  }
  if (!f.out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.out, ec);
    const std::filesystem::path dir(f.out);
    if (ec || !writeFile(dir / "tenant-shares.csv", sim::renderTenantSharesCsv(report)) ||
        !writeFile(dir / "tenant-shares.svg", sim::renderTenantSvg(report))) {
      std::cerr << "troupe simulate: cannot write to --out directory \"" << f.out << "\"\n";
      return 1;
    }
    (f.json ? std::cerr : std::cout) << "\nPlot: " << (dir / "tenant-shares.svg").string()
                                     << "   shares: " << (dir / "tenant-shares.csv").string() << "\n";
  }
  if (!f.json) {
    std::cout << "\n"
              << 2 * f.seeds << " runs in " << std::to_string(static_cast<int>(report.seconds + 0.5))
              << " s.\n";
  }
  return 0;
}

}  // namespace

int simulateCommand(const std::vector<std::string>& args) {
  SimulateFlags f;
  if (std::optional<int> stop = parseFlags(args, f)) return *stop;
  std::optional<std::string> node_text = slurp(f.nodes);
  if (!node_text) return usage("cannot read --nodes file \"" + f.nodes + "\"");
  std::optional<std::string> pod_text = slurp(f.pods);
  if (!pod_text) return usage("cannot read --pods file \"" + f.pods + "\"");
  Result<std::vector<sim::TraceNode>> trace_nodes = sim::parseNodeCsv(*node_text, f.nodes);
  if (!trace_nodes.isOk()) return usage(trace_nodes.status().message());
  Result<std::vector<sim::TracePod>> trace_pods = sim::parsePodCsv(*pod_text, f.pods);
  if (!trace_pods.isOk()) return usage(trace_pods.status().message());
  if (!f.tenants.empty()) return runTenants(f, trace_nodes.value(), trace_pods.value());
  std::vector<sim::TracePod> pods = std::move(trace_pods).value();
  if (!f.in_order) {
    std::sort(pods.begin(), pods.end(),
              [](const sim::TracePod& a, const sim::TracePod& b) { return a.name < b.name; });
  }
  std::vector<std::string> node_names;  // the cluster's, sorted by name as RunResult::node_of indexes them
  {
    model::TopologyCatalog catalog;
    Result<sim::Cluster> check = sim::buildCluster(trace_nodes.value(), catalog);
    if (!check.isOk()) return usage(f.nodes + ": " + check.status().message());
    for (const model::NodeInfo& info : check.value().nodes) node_names.push_back(info.name);
  }

  sim::Report report;
  report.nodes_file = f.nodes;
  report.pods_file = f.pods;
  report.first_seed = f.first_seed;
  report.seeds = f.seeds;
  report.points = {f.arrive};
  if (f.arrive != 130) report.points.push_back(130);
  for (const sched::PolicyPtr& policy : f.policies) {
    report.policies.push_back(
        {std::string(policy->name()), std::vector<sim::RunResult>(static_cast<size_t>(f.seeds))});
  }
  // Jobs are (policy, seed); each worker has its own cluster so topology memos are not shared.
  const int jobs = static_cast<int>(f.policies.size()) * f.seeds;
  const int threads = std::min(
      jobs, f.threads > 0 ? f.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  std::atomic<int> next{0};
  Progress progress(jobs);
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    model::TopologyCatalog catalog;
    sim::Cluster cluster = sim::buildCluster(trace_nodes.value(), catalog).value();
    for (int j = next++; j < jobs; j = next++) {
      sim::PolicyRuns& p = report.policies[static_cast<size_t>(j / f.seeds)];
      sim::ReplayInput in;
      in.cluster = &cluster;
      in.sorted_pods = &pods;
      in.seed = f.first_seed + j % f.seeds;
      in.tune_ratio = f.tune;
      in.policy = f.policies[static_cast<size_t>(j / f.seeds)];
      in.in_order = f.in_order;
      in.defrag_moves = f.defrag;
      p.runs[static_cast<size_t>(j % f.seeds)] = sim::replay(in);
      progress.done(p.policy + " seed " + std::to_string(in.seed));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (f.json) {
    std::cout << sim::renderJson(report);
  } else {
    std::cout << "Trace: " << f.nodes << " + " << f.pods << " (" << pods.size() << " pods)\n\n"
              << sim::renderTable(report) << "\n"
              << sim::renderSizeTable(report);
    if (!f.defrag.empty()) std::cout << "\n" << sim::renderDefragTable(report);
  }
  if (!f.placements.empty()) {
    std::string csv = "policy,seed,pod,node\n";
    for (const sim::PolicyRuns& p : report.policies) {
      for (const sim::RunResult& run : p.runs) {
        // In-order runs try the pods as given; others follow the seed's plan, clones included.
        sim::RunPlan plan = f.in_order
                                ? sim::planInOrder(static_cast<int>(pods.size()), node_names, run.seed)
                                : sim::planRun(pods, static_cast<int>(node_names.size()),
                                               run.capacity_gpus * model::kMilliPerGpu, run.seed, f.tune);
        for (size_t step = 0; step < run.node_of.size(); ++step) {
          const int node = run.node_of[step];
          csv += p.policy + "," + std::to_string(run.seed) + "," +
                 pods[static_cast<size_t>(plan.order[step])].name + "," +
                 (node >= 0 ? node_names[static_cast<size_t>(node)] : std::string()) + "\n";
        }
      }
    }
    if (!writeFile(f.placements, csv)) {
      std::cerr << "troupe simulate: cannot write --placements file \"" << f.placements << "\"\n";
      return 1;
    }
  }
  if (!f.out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.out, ec);
    const std::filesystem::path dir(f.out);
    if (ec || !writeFile(dir / "curves.csv", sim::renderCurvesCsv(report)) ||
        !writeFile(dir / "runs.csv", sim::renderRunsCsv(report)) ||
        !writeFile(dir / "allocation.svg", sim::renderSvg(report))) {
      std::cerr << "troupe simulate: cannot write to --out directory \"" << f.out << "\"\n";
      return 1;
    }
    (f.json ? std::cerr : std::cout) << "\nPlot: " << (dir / "allocation.svg").string()
                                     << "   curves: " << (dir / "curves.csv").string()
                                     << "   per seed: " << (dir / "runs.csv").string() << "\n";
  }
  if (!f.json)
    std::cout << "\n"
              << jobs << " runs in " << std::to_string(static_cast<int>(report.seconds + 0.5)) << " s on "
              << threads << " threads.\n";
  return 0;
}

}  // namespace troupe::app
