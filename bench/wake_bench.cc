// wake_bench: what waking pending pods costs (docs/kubernetes-mode.md#waking-pending-pods):
// API writes per change, and the CPU of a waker round, with 1,000 (--pods) pending 1-GPU pods
// that Troupe's filter refused at their queue's limit, on --nodes 8-GPU nodes. The writes go
// through the real PodWaker to a transport that counts them (no network).
//
//   wake_bench [--nodes 200] [--pods 1000]
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/queues/pod_waker.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;

namespace {

struct CountingApi final : kube::KubeTransport {
  size_t patches = 0;
  kube::ApiReply request(const std::string& method, const std::string&, const std::string&,
                         const std::string&) override {
    if (method == "PATCH") ++patches;
    return kube::replyFromHttp(200, "{}");
  }
  kube::ApiReply stream(const std::string&, std::chrono::seconds, const std::function<bool(std::string&)>&,
                        kube::StopSignal&) override {
    return kube::replyFromHttp(404, "");
  }
};

sched::QueueTree limitedTo(int64_t gpus) {
  sched::QueueSpec q;
  q.name = "team";
  if (gpus > 0) q.limit.milli = gpus * 1000;
  return sched::QueueTree::build({q});
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 200, pods = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--nodes")
      nodes = std::stoi(argv[i + 1]);
    else if (flag == "--pods")
      pods = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s; expected --nodes or --pods\n", flag.c_str());
      return 2;
    }
  }
  sched::SchedulerConfig config;
  sched::Scheduler s(config);
  std::vector<std::string> names;
  for (int i = 0; i < nodes; ++i) {
    model::NodeFacts f;
    f.name = "n" + std::to_string(i);
    f.allocatable_gpus = "8";
    f.labels[model::kLabelGpuProduct] = "NVIDIA-H100-80GB-HBM3";
    if (!s.upsertNode(f).isOk()) return 1;
    names.push_back(f.name);
  }
  s.setQueues(limitedTo(4));
  std::vector<sched::PodFacts> all;
  for (int i = 0; i < pods; ++i) {
    sched::PodFacts p;
    p.ns = "default";
    p.name = "p" + std::to_string(i);
    p.uid = "uid-" + p.name;
    p.labels[sched::kQueueKey] = "team";
    sched::ContainerResources c;
    c.limits["nvidia.com/gpu"] = "1";
    p.containers.push_back(c);
    sched::FilterResult r = s.filter(p, names);
    if (!r.passed.empty() && !s.reserve(p.uid, p.ns, p.name, r.passed.front()).isOk()) return 1;
    all.push_back(std::move(p));
  }
  std::ostringstream sink;
  adapters::Logger logger(sink, adapters::LogLevel::kError);
  CountingApi api;
  kube::PodWakeOptions options;
  options.rate_per_second = 1e9;  // the bench counts writes, it does not wait for the bucket
  options.burst = 1000000;
  kube::PodWaker waker(
      api, [&s](sched::WakePlanner& planner) { return s.planWakes(planner); }, {}, logger, options);
  kube::StopSignal stop;
  // One waker round after each change: the writes it makes, and its wall time (planning and
  // the counted writes); kube-scheduler then binds the pods woken, as it would.
  auto round = [&](const char* change) {
    const size_t before = api.patches;
    const auto t0 = std::chrono::steady_clock::now();
    const size_t woken = waker.round(stop);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-46s %6zu writes  %8.2f ms\n", change, api.patches - before, ms);
    (void)woken;
  };
  auto bindWoken = [&] {
    for (const sched::PodFacts& p : all) {
      if (s.allocationOf(p.uid)) continue;
      sched::FilterResult r = s.filter(p, names);
      if (!r.passed.empty()) (void)s.reserve(p.uid, p.ns, p.name, r.passed.front());
    }
  };
  std::printf("wake_bench: %d nodes x 8 GPUs, %d pending 1-GPU pods in queue team (limit 4)\n", nodes, pods);
  round("nothing changed");
  s.setQueues(limitedTo(8));
  round("limit 4 -> 8 GPUs");
  round("the next round (nothing changed)");
  bindWoken();
  s.setQueues(limitedTo(108));
  round("limit 8 -> 108 GPUs");
  bindWoken();
  s.setQueues(limitedTo(0));
  for (int i = 1; i <= 6; ++i) {
    std::string label = "limit removed, round " + std::to_string(i);
    round(label.c_str());
  }
  return 0;
}
