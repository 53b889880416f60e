// Filter narrowed to the policy's best node (SchedulerConfig::narrow_to_best), and the proof
// that a live Scheduler fed pod by pod places them exactly where `troupe simulate --in-order`
// does.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "adapters/http/extender_scores.h"
#include "support/fixtures.h"
#include "support/sim_test_support.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/scheduler/scheduler.h"
#include "troupe/sched/score/best_node.h"
#include "troupe/sim/cluster.h"
#include "troupe/sim/replay.h"
#include "troupe/sim/trace.h"

namespace {

using troupe::sched::FilterResult;
using troupe::sched::PodFacts;
using troupe::sched::Scheduler;
using troupe::sched::SchedulerConfig;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

constexpr const char* kBetter = "troupe: a better-placed node exists";

Scheduler narrowing(bool on, std::string_view kind = "troupe") {
  SchedulerConfig config;
  config.policy = troupe::sched::builtinPolicies().create(kind).value();
  config.narrow_to_best = on;
  return Scheduler(config);
}

void add(Scheduler& s, const troupe::model::NodeFacts& f) {
  auto st = s.upsertNode(f);
  INFO(st.message());
  REQUIRE(st.isOk());
}

void place(Scheduler& s, const PodFacts& pod, const std::string& node) {
  s.filter(pod, {node});
  auto r = s.reserve(pod.uid, pod.ns, pod.name, node);
  INFO(r.status().message());
  REQUIRE(r.isOk());
}

std::string topOf(const std::vector<troupe::http::HostScore>& scores) {
  for (const auto& h : scores)
    if (h.score == 10) return h.host;
  return "";
}

TEST_CASE("narrowing: filter passes only the best node and leaves the others out", "[narrow]") {
  Scheduler s = narrowing(true);
  for (const char* n : {"a", "b", "c"}) add(s, gpuNode(n, 8));
  add(s, gpuNode("small", 2));
  // Half of b is in use: the troupe policy fills it before opening an empty node.
  place(s, gpuPod("busy", 4), "b");
  const PodFacts pod = gpuPod("p", 4);
  FilterResult r = s.filter(pod, {"a", "b", "c", "small"});
  REQUIRE(r.passed == std::vector<std::string>{"b"});
  // a and c fit but are not listed: kube-scheduler pays per FailedNodes entry (decoding, a
  // status each), and a pod with a node left never needs their reasons.
  CHECK(r.failed.empty());
  CHECK_FALSE(r.failed.contains("a"));
  CHECK_FALSE(r.unresolvable.contains("a"));
  // Too few GPUs in total stays unresolvable with its own reason; narrowing adds nothing there.
  CHECK(r.unresolvable.contains("small"));
  CHECK(r.unresolvable.at("small") != kBetter);
  // Not a rejection category: the node was not refused, only not chosen.
  CHECK(r.categories.count("busy") == 0);
  // The node filter keeps is the one prioritize ranks first.
  Scheduler plain = narrowing(false);
  for (const char* n : {"a", "b", "c"}) add(plain, gpuNode(n, 8));
  place(plain, gpuPod("busy", 4), "b");
  CHECK(topOf(troupe::http::extenderScores(plain.prioritize(pod, {"a", "b", "c"}))) == "b");
}

TEST_CASE("narrowing: equal nodes tie to one fixed node, whatever the request order", "[narrow]") {
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) names.push_back("node-" + std::to_string(i));
  const std::string expected =
      *std::min_element(names.begin(), names.end(), [](const auto& a, const auto& b) {
        return troupe::sched::nodeTieRank(a) < troupe::sched::nodeTieRank(b);
      });
  for (std::string_view kind : {"troupe", "fgd", "best-fit"}) {
    Scheduler s = narrowing(true, kind);
    for (const std::string& n : names) add(s, gpuNode(n, 8));
    std::vector<std::string> order = names;
    for (int round = 0; round < 3; ++round) {
      std::rotate(order.begin(), order.begin() + 5, order.end());
      FilterResult r = s.filter(gpuPod("p" + std::to_string(round), 1), order);
      REQUIRE(r.passed.size() == 1);
      CHECK(r.passed[0] == expected);
      CHECK(r.failed.empty());
    }
  }
}

TEST_CASE("narrowing: off by default, and a single fitting node is left alone", "[narrow]") {
  Scheduler off{SchedulerConfig{}};
  for (const char* n : {"a", "b"}) add(off, gpuNode(n, 8));
  CHECK(off.filter(gpuPod("p", 1), {"a", "b"}).passed.size() == 2);

  Scheduler on = narrowing(true);
  for (const char* n : {"a", "b"}) add(on, gpuNode(n, 8));
  place(on, gpuPod("full", 8), "a");
  FilterResult r = on.filter(gpuPod("p", 2), {"a", "b"});
  CHECK(r.passed == std::vector<std::string>{"b"});
  REQUIRE(r.failed.contains("a"));
  CHECK(r.failed.at("a") != kBetter);  // a is busy, and says so
}

// --- live == simulator ---------------------------------------------------------------------

troupe::model::NodeFacts factsOf(const troupe::sim::TraceNode& n) {
  troupe::model::NodeFacts f;
  f.name = n.name;
  f.labels[troupe::model::kLabelGpuProduct] = n.model;
  f.allocatable_gpus = std::to_string(n.gpus);
  f.cpu = std::to_string(n.cpu_milli) + "m";
  f.memory = std::to_string(n.memory_mib) + "Mi";
  f.pods = "1001";
  return f;
}

// The pod as tools/trace_replay.py creates it: CPU and memory requests, nvidia.com/gpu for
// whole GPUs, troupe.dev/gpu-milli for a share.
PodFacts podOf(const troupe::sim::TracePod& t) {
  PodFacts p;
  p.ns = "replay";
  p.name = t.name;
  p.uid = "uid-" + t.name;
  troupe::sched::ContainerResources c;
  c.requests["cpu"] = std::to_string(t.cpu_milli) + "m";
  c.requests["memory"] = std::to_string(t.memory_mib) + "Mi";
  if (t.num_gpu > 0 && t.gpu_milli >= 1000) c.limits["nvidia.com/gpu"] = std::to_string(t.num_gpu);
  if (t.num_gpu == 1 && t.gpu_milli < 1000)
    p.annotations["troupe.dev/gpu-milli"] = std::to_string(t.gpu_milli);
  if (!t.gpu_spec.empty()) {
    std::string models = t.gpu_spec;
    std::replace(models.begin(), models.end(), '|', ',');
    p.annotations["troupe.dev/gpu-model"] = models;
  }
  p.containers.push_back(c);
  return p;
}

// The example trace; or copies of its nodes and three of its pods with either every third
// GPU pod limited to GPU models (kConstrained), a CPU-only twin of every pod (kCpuHeavy: the mix
// is CPU-bound) or of every third pod (kCpuTight), or both the model limits and the CPU-only
// twins of kCpuTight (kConstrainedTight: the CPU-tight rule's guard for free GPUs' CPU is on).
// Past the request window's first refresh (500 requests) the troupe policy then steers by model
// pressure while models still have room, breaks ties by the exact fragmentation change while the
// mix is CPU-bound, or sends CPU-only pods where GPUs are in use while it is CPU-tight: both
// paths must compute these alike.
enum class Variant { kPlain, kConstrained, kCpuHeavy, kCpuTight, kConstrainedTight };

std::vector<troupe::sim::TraceNode> exampleNodes(const std::vector<troupe::sim::TraceNode>& trace,
                                                 Variant variant) {
  if (variant == Variant::kPlain) return trace;
  std::vector<troupe::sim::TraceNode> out;
  // Three copies keep the CPU-heavy variant overfilled (CPU-only twins fill the CPU first).
  const bool cpu =
      variant == Variant::kCpuHeavy || variant == Variant::kCpuTight || variant == Variant::kConstrainedTight;
  for (int copy = 0; copy < (cpu ? 3 : 6); ++copy) {
    for (troupe::sim::TraceNode n : trace) {
      n.name += "-" + std::to_string(copy);
      out.push_back(std::move(n));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::vector<troupe::sim::TracePod> examplePods(const std::vector<troupe::sim::TracePod>& trace,
                                               Variant variant) {
  if (variant == Variant::kPlain) return trace;
  std::vector<troupe::sim::TracePod> out;
  int gpu_pods = 0, pods = 0;
  for (int copy = 0; copy < 3; ++copy) {
    for (troupe::sim::TracePod p : trace) {
      p.name += "-" + std::to_string(copy);
      ++pods;
      const bool tight = variant == Variant::kCpuTight || variant == Variant::kConstrainedTight;
      const bool twin_of_this = variant == Variant::kCpuHeavy || (tight && pods % 3 == 0);
      if (twin_of_this) {
        troupe::sim::TracePod twin = p;
        twin.name += "-cpu";
        twin.num_gpu = 0;
        twin.gpu_milli = 0;
        out.push_back(std::move(twin));
      }
      const bool limits =
          variant == Variant::kConstrained || (variant == Variant::kConstrainedTight && !twin_of_this);
      if (limits && p.num_gpu > 0 && ++gpu_pods % 3 == 0) {
        p.gpu_spec = gpu_pods % 2 ? "T4" : "V100M16|P100";
      }
      out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

TEST_CASE("narrowing: a live Scheduler places the example trace exactly as simulate --in-order",
          "[narrow][sim]") {
  const troupe::testing::ExampleTrace trace = troupe::testing::exampleTrace();
  const Variant variant = GENERATE(Variant::kPlain, Variant::kConstrained, Variant::kCpuHeavy,
                                   Variant::kCpuTight, Variant::kConstrainedTight);
  INFO((variant == Variant::kPlain         ? "the example trace"
        : variant == Variant::kConstrained ? "three copies, a third of the GPU pods limited to models"
        : variant == Variant::kCpuHeavy    ? "three copies, each pod with a CPU-only twin"
        : variant == Variant::kCpuTight    ? "three copies, every third pod with a CPU-only twin"
                                           : "three copies, CPU-only twins and GPU pods limited to models"));
  const std::vector<troupe::sim::TracePod> pods = examplePods(trace.pods, variant);
  const std::vector<troupe::sim::TraceNode> nodes = exampleNodes(trace.nodes, variant);
  troupe::model::TopologyCatalog catalog;
  auto cluster = troupe::sim::buildCluster(nodes, catalog);
  REQUIRE(cluster.isOk());
  if (variant != Variant::kPlain && variant != Variant::kConstrained) {  // the regime each is for
    std::vector<troupe::sched::GpuRequest> requests;
    for (const auto& p : pods) requests.push_back(troupe::sim::requestOf(p));
    const auto mix = troupe::sched::RequestMix::fromRequests(requests, 0.95, cluster.value().cpuPerGpu());
    INFO("CPU load " << mix.cpuLoad());
    REQUIRE((variant == Variant::kCpuHeavy ? mix.cpuBound() : mix.cpuTight()));
    if (variant == Variant::kConstrainedTight) REQUIRE_FALSE(mix.constrained().empty());
  }

  for (std::string_view kind : {"troupe", "fgd", "best-fit"}) {
    troupe::sim::ReplayInput in;
    in.cluster = &cluster.value();
    in.sorted_pods = &pods;
    in.policy = troupe::sched::builtinPolicies().create(kind).value();
    in.in_order = true;
    const troupe::sim::RunResult sim = troupe::sim::replay(in);
    REQUIRE(sim.node_of.size() == pods.size());
    Scheduler live = narrowing(true, kind);
    // kube-scheduler's NodeResourcesFit runs first and hands Troupe only the nodes with room
    // for the pod's CPU, memory and nvidia.com/gpu (shares are invisible to it); this is its
    // bookkeeping. With no node left, Troupe is not called at all.
    struct Room {
      std::string name;
      int64_t cpu, memory_mib, gpus;
    };
    std::vector<Room> rooms;
    for (const auto& n : nodes) {
      if (n.gpus == 0) continue;
      add(live, factsOf(n));
      rooms.push_back({n.name, n.cpu_milli, n.memory_mib, n.gpus});
    }
    int placed = 0, dropped = 0, differ = 0;
    for (size_t i = 0; i < pods.size(); ++i) {
      const PodFacts pod = podOf(pods[i]);
      const int64_t whole = pods[i].gpu_milli >= 1000 ? pods[i].num_gpu : 0;
      std::vector<std::string> names;
      for (const Room& room : rooms) {
        if (room.cpu >= pods[i].cpu_milli && room.memory_mib >= pods[i].memory_mib && room.gpus >= whole)
          names.push_back(room.name);
      }
      FilterResult r = names.empty() ? FilterResult{} : live.filter(pod, names);
      REQUIRE(r.passed.size() <= 1);
      std::string live_node;
      if (!r.passed.empty()) {
        live_node = r.passed[0];
        auto a = live.reserve(pod.uid, pod.ns, pod.name, live_node);
        INFO(a.status().message());
        REQUIRE(a.isOk());
        for (Room& room : rooms) {
          if (room.name != live_node) continue;
          room.cpu -= pods[i].cpu_milli;
          room.memory_mib -= pods[i].memory_mib;
          room.gpus -= whole;
        }
        ++placed;
      } else {
        ++dropped;
        live.forgetPod(pod.uid);  // the replay deletes a pod nobody can take
      }
      const int s = sim.node_of[i];
      const std::string sim_node = s >= 0 ? cluster.value().nodes[static_cast<size_t>(s)].name : "";
      if (live_node != sim_node) {
        ++differ;
        UNSCOPED_INFO(kind << ": pod " << pods[i].name << " live " << live_node << " sim " << sim_node);
      }
    }
    INFO(kind << ": " << placed << " placed, " << dropped << " dropped");
    CHECK(differ == 0);
    CHECK(placed == sim.placed);
    CHECK(dropped > 0);  // the example trace overfills its cluster: rejections are exercised too
  }
}

}  // namespace
