// Fuzz targets of the core's parsers of pod- and node-controlled text: the pod contract
// (requests and troupe.dev/* annotations, gangs), node facts (labels, annotations, the link
// matrix), quantities and durations. Each checks the ranges its result promises.
#include <cmath>

#include "fuzz_support.h"
#include "fuzz_targets.h"
#include "troupe/common/quantity.h"
#include "troupe/common/strings.h"
#include "troupe/model/topology.h"
#include "troupe/sched/gang/gang.h"

namespace troupe::fuzz {

int podContract(const uint8_t* data, size_t size) {
  const sched::PodFacts pod = podFromLines(asText(data, size));
  Result<sched::GpuRequest> req = sched::parseGpuRequest(pod);
  if (req.isOk()) {
    const sched::GpuRequest& r = req.value();
    FUZZ_CHECK(r.gpus >= 0 && r.gpus <= 64, "pod_contract", "gpus out of range: " + std::to_string(r.gpus));
    FUZZ_CHECK(r.milli_per_gpu >= 1 && r.milli_per_gpu <= 1000, "pod_contract", "milli_per_gpu out of range");
    FUZZ_CHECK(r.milli_per_gpu == 1000 || r.gpus == 1, "pod_contract", "a share of more than one GPU");
    FUZZ_CHECK(r.cpu_milli >= 0 && r.cpu_milli <= kMaxResourceAmount, "pod_contract", "cpu out of range");
    FUZZ_CHECK(r.memory_bytes >= 0 && r.memory_bytes <= kMaxResourceAmount, "pod_contract",
               "memory out of range");
    FUZZ_CHECK(r.min_memory_bytes >= 0, "pod_contract", "negative troupe.dev/gpu-memory");
  }
  Result<std::optional<sched::GangSpec>> gang = sched::parseGang(pod, std::chrono::minutes(5));
  if (gang.isOk() && gang.value()) {
    const sched::GangSpec& g = *gang.value();
    FUZZ_CHECK(g.min_member >= 1 && g.min_member <= 100000, "pod_contract", "gang size out of range");
    FUZZ_CHECK(g.timeout.count() > 0 && g.timeout <= sched::kMaxDuration, "pod_contract",
               "gang timeout out of range: " + std::to_string(g.timeout.count()) + "ms");
  }
  if (auto gpus = pod.annotations.find(sched::kAnnotationGpus); gpus != pod.annotations.end()) {
    if (Result<std::vector<int>> a = sched::parseGpuAssignment(gpus->second); a.isOk()) {
      for (int g : a.value()) FUZZ_CHECK(g >= 0 && g <= 63, "pod_contract", "GPU index out of range");
    }
  }
  // The scheduler's verbs on the pod, gangs included, as /filter, /prioritize and /bind run them.
  std::unique_ptr<sched::Scheduler> s = fleet();
  const std::vector<std::string> names = fleetNames();
  const sched::FilterResult r = s->filter(pod, names);
  if (!req.isOk() || !gang.isOk()) {
    FUZZ_CHECK(r.passed.empty() && r.unresolvable.size() == names.size(), "pod_contract",
               "a pod with an invalid contract must be unresolvable everywhere");
  }
  (void)s->prioritize(pod, names);
  if (!r.passed.empty() && req.isOk()) {
    Result<model::Allocation> a = s->reserve(pod.uid, pod.ns, pod.name, r.passed.front());
    const bool fleet_pod = pod.uid.rfind("uid-v", 0) == 0;  // the fleet's own pods answer as retried binds
    if (a.isOk() && !gang.value() && !fleet_pod) {
      FUZZ_CHECK(static_cast<int>(a.value().gpus.size()) + a.value().unknown_gpus == req.value().gpus,
                 "pod_contract", "reserved a different number of GPUs than the pod asks");
    }
  }
  (void)s->summary();
  return 0;
}

int nodeFacts(const uint8_t* data, size_t size) {
  const model::NodeFacts facts = nodeFromLines(asText(data, size));
  model::TopologyCatalog catalog;
  Result<model::NodeInfo> info = model::nodeFromFacts(facts, catalog);
  if (info.isOk()) {
    const model::NodeInfo& n = info.value();
    FUZZ_CHECK(n.gpu_count >= 0 && n.gpu_count <= 64, "node_facts", "GPU count out of range");
    FUZZ_CHECK(n.topology && n.topology->size() == n.gpu_count, "node_facts", "topology size != GPU count");
    for (int a = 0; a < n.gpu_count; ++a) {
      for (int b = 0; b < n.gpu_count; ++b) {
        const double bw = n.topology->link(a, b).bandwidth;
        FUZZ_CHECK(std::isfinite(bw) && bw >= 0, "node_facts",
                   "a link bandwidth that is not finite and >= 0");
      }
    }
    FUZZ_CHECK(n.gpu_memory_mib >= 0 && n.gpu_memory_mib <= (kMaxResourceAmount >> 20), "node_facts",
               "GPU memory out of range");
    for (int64_t v : {n.cpu_milli, n.memory_bytes, n.max_pods}) {
      FUZZ_CHECK(v >= 0 && v <= kMaxResourceAmount, "node_facts", "a capacity out of range");
    }
  }
  // The link matrix alone, as the annotation's text is parsed.
  if (auto m = facts.annotations.find(model::kAnnotationGpuTopology); m != facts.annotations.end()) {
    if (auto rows = parseMatrixText(m->second); rows.isOk()) {
      (void)model::topologyFromMatrix(rows.value(), 25.0, 32.0);
    }
  }
  // Into the scheduler (the watch thread's path, C1), then pods of each shape onto it.
  std::unique_ptr<sched::Scheduler> s = fleet();
  const Status up = s->upsertNode(facts);
  FUZZ_CHECK(up.isOk() == info.isOk(), "node_facts", "upsertNode and nodeFromFacts disagree");
  for (const char* shape : {"r nvidia.com/gpu=1", "r nvidia.com/gpu=8\na troupe.dev/gpu-topology=nvlink",
                            "a troupe.dev/gpu-milli=250\nr cpu=2\nr memory=8Gi"}) {
    const sched::PodFacts pod = podFromLines(shape);
    (void)s->filter(pod, {facts.name});
    (void)s->prioritize(pod, {facts.name});
  }
  return 0;
}

int quantity(const uint8_t* data, size_t size) {
  const std::string_view text = asText(data, size);
  Result<int64_t> milli = parseQuantityMilli(text);
  Result<int64_t> value = parseQuantityValue(text);
  if (milli.isOk()) {
    // Whatever fits in thousandths fits as whole units, and is about a thousandth of it.
    FUZZ_CHECK(value.isOk(), "quantity", "a quantity parsed in thousandths but not as a value");
    const long double ratio = static_cast<long double>(milli.value()) / 1000.0L;
    FUZZ_CHECK(std::fabs(static_cast<long double>(value.value()) - ratio) <= 1.0L + std::fabs(ratio) * 1e-12L,
               "quantity", "value and thousandths disagree");
  }
  return 0;
}

int duration(const uint8_t* data, size_t size) {
  const std::string text(asText(data, size));
  Result<std::chrono::milliseconds> d = sched::parseDuration(text);
  if (d.isOk()) {
    FUZZ_CHECK(d.value().count() >= 0 && d.value() <= sched::kMaxDuration, "duration",
               "duration out of range: " + std::to_string(d.value().count()) + "ms");
  }
  // The same text as a gang's timeout: an error names the annotation.
  sched::PodFacts pod;
  pod.ns = "fuzz";
  pod.name = "m-0";
  pod.annotations = {{sched::kGangName, "g"}, {sched::kGangSize, "2"}, {sched::kGangTimeout, text}};
  Result<std::optional<sched::GangSpec>> gang = sched::parseGang(pod, std::chrono::minutes(5));
  if (!gang.isOk()) {
    FUZZ_CHECK(gang.status().message().find(sched::kGangTimeout) != std::string::npos, "duration",
               "a gang-timeout error that does not name the annotation");
  }
  return 0;
}

}  // namespace troupe::fuzz
