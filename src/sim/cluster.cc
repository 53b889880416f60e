#include "troupe/sim/cluster.h"

#include <algorithm>

#include "troupe/common/strings.h"
#include "troupe/model/pod_contract.h"
#include "troupe/sched/cluster/cluster_state.h"

namespace troupe::sim {

Result<Cluster> buildCluster(const std::vector<TraceNode>& nodes, model::TopologyCatalog& catalog) {
  Cluster cluster;
  for (const TraceNode& n : nodes) {
    if (n.gpus == 0) continue;
    // The facts a Kubernetes node would carry, parsed by the live path's own code.
    model::NodeFacts facts;
    facts.name = n.name;
    facts.labels[model::kLabelGpuProduct] = n.model;
    facts.allocatable_gpus = std::to_string(n.gpus);
    facts.cpu = std::to_string(n.cpu_milli) + "m";
    facts.memory = std::to_string(n.memory_mib) + "Mi";
    facts.pods = std::to_string(kTracePodLimit);
    Result<model::NodeInfo> info = model::nodeFromFacts(facts, catalog);
    if (!info.isOk()) return info.status();
    cluster.gpus += n.gpus;
    cluster.nodes.push_back(std::move(info).value());
  }
  if (cluster.nodes.empty()) return invalidArgument("the node list has no node with GPUs (column gpu > 0)");
  std::sort(cluster.nodes.begin(), cluster.nodes.end(),
            [](const model::NodeInfo& a, const model::NodeInfo& b) { return a.name < b.name; });
  return cluster;
}

double Cluster::cpuPerGpu() const {
  sched::CpuPerGpu sum;
  for (const model::NodeInfo& n : nodes) sum.add(n);
  return sum.value();
}

sched::GpuRequest requestOf(const TracePod& pod) {
  sched::GpuRequest req;
  req.gpus = pod.num_gpu;
  req.milli_per_gpu = pod.num_gpu > 0 ? pod.gpu_milli : model::kMilliPerGpu;
  if (!pod.gpu_spec.empty()) req.models = splitList(pod.gpu_spec, '|');
  req.cpu_milli = pod.cpu_milli;
  req.memory_bytes = pod.memory_mib * 1024 * 1024;
  return req;
}

}  // namespace troupe::sim
