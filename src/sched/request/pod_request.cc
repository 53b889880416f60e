#include "troupe/sched/request/pod_request.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <set>

#include "troupe/common/quantity.h"
#include "troupe/common/strings.h"
#include "troupe/model/pod_contract.h"

namespace troupe::sched {
namespace {

const std::string* annotationOrLabel(const PodFacts& pod, const char* key) {
  if (auto it = pod.annotations.find(key); it != pod.annotations.end()) return &it->second;
  if (auto it = pod.labels.find(key); it != pod.labels.end()) return &it->second;
  return nullptr;
}

Status badAnnotation(const char* key, const std::string& value, const std::string& expected) {
  return invalidArgument("annotation " + std::string(key) + "=\"" + value + "\" is invalid: " + expected);
}

// A container's demand for one resource: requests win, limits stand in (Kubernetes copies
// limits to requests for extended resources).
Result<int64_t> containerMilli(const ContainerResources& c, const std::string& resource,
                               const std::string& where) {
  const std::string* text = nullptr;
  if (auto req = c.requests.find(resource); req != c.requests.end()) {
    text = &req->second;
  } else if (auto lim = c.limits.find(resource); lim != c.limits.end()) {
    text = &lim->second;
  }
  if (!text) return int64_t{0};
  Result<int64_t> v = parseQuantityMilli(*text);
  if (!v.isOk()) return invalidArgument(where + " " + resource + ": " + v.status().message());
  if (v.value() < 0) {
    return invalidArgument(where + " " + resource + "=\"" + *text + "\" must not be negative");
  }
  return v;
}

// Kubernetes' effective request: app containers and sidecars add up; a plain init container
// runs alone, so the pod needs the larger of that sum and each init container (plus the
// sidecars started before it). Every sum is checked: requests that add up past int64 are an
// error naming the resource, never a wrapped (smaller, even negative) request.
Result<int64_t> effectiveMilli(const PodFacts& pod, const std::string& resource) {
  const auto add = [&](int64_t a, int64_t b, int64_t* sum) -> Status {
    if (!__builtin_add_overflow(a, b, sum)) return Status::ok();
    return invalidArgument("resource " + resource +
                           ": the containers' requests add up to more than Troupe can count (over " +
                           std::to_string(std::numeric_limits<int64_t>::max()) + " thousandths)");
  };
  int64_t app = 0;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    Result<int64_t> v = containerMilli(pod.containers[i], resource, "container " + std::to_string(i));
    if (!v.isOk()) return v;
    if (Status s = add(app, v.value(), &app); !s.isOk()) return s;
  }
  int64_t sidecars = 0;
  int64_t init_peak = 0;
  for (size_t i = 0; i < pod.init_containers.size(); ++i) {
    Result<int64_t> v =
        containerMilli(pod.init_containers[i], resource, "init container " + std::to_string(i));
    if (!v.isOk()) return v;
    int64_t with_sidecars = 0;
    if (Status s = add(sidecars, v.value(), &with_sidecars); !s.isOk()) return s;
    if (pod.init_containers[i].restartable_init) sidecars = with_sidecars;
    init_peak = std::max(init_peak, with_sidecars);
  }
  int64_t total = 0;
  if (Status s = add(app, sidecars, &total); !s.isOk()) return s;
  return std::max(total, init_peak);
}

// A pod's CPU (millicores) or memory (bytes) within what the model can add up.
Status checkAmount(const char* resource, int64_t amount, const char* unit) {
  if (amount <= kMaxResourceAmount) return Status::ok();
  return invalidArgument("resource " + std::string(resource) + "=" + std::to_string(amount) + unit +
                         " is more than Troupe accepts (at most " + std::to_string(kMaxResourceAmount) +
                         unit + ")");
}

// A plain whole number: digits only, no sign, space or exponent; nullopt when it is not one
// or does not fit.
std::optional<int64_t> plainInteger(std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || text[0] == '-' || ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return v;
}

// troupe.dev/topology-required or -preferred: the index of the level it names, -1 when absent.
Result<int> topologyLevel(const PodFacts& pod, const char* key, const std::vector<std::string>& levels) {
  const std::string* value = annotationOrLabel(pod, key);
  if (!value) return -1;
  if (levels.empty()) {
    return badAnnotation(key, *value,
                         "Troupe has no network topology levels configured (topology.levels in its "
                         "config is empty); remove the annotation or configure the levels");
  }
  const int level = model::findTopologyLevel(levels, *value);
  if (level < 0) {
    return badAnnotation(key, *value,
                         "expected one of the configured topology levels, by short name or label key: " +
                             model::describeTopologyLevels(levels));
  }
  return level;
}

}  // namespace

const char* topologyModeName(TopologyMode mode) {
  switch (mode) {
    case TopologyMode::kPreferred: return "preferred";
    case TopologyMode::kNVLink: return "nvlink";
    case TopologyMode::kNone: return "none";
  }
  return "?";
}

Result<GpuRequest> parseGpuRequest(const PodFacts& pod, const std::vector<std::string>& topology_levels) {
  GpuRequest req;
  Result<int64_t> gpu_milli = effectiveMilli(pod, "nvidia.com/gpu");
  if (!gpu_milli.isOk()) return gpu_milli.status();
  if (gpu_milli.value() % 1000 != 0) {
    return invalidArgument("resource nvidia.com/gpu=" + std::to_string(gpu_milli.value()) +
                           "m must be a whole number of GPUs; for a share of one GPU, drop it "
                           "and set annotation troupe.dev/gpu-milli (1-1000)");
  }
  if (gpu_milli.value() > 64000) {
    return invalidArgument("resource nvidia.com/gpu=" + std::to_string(gpu_milli.value() / 1000) +
                           " is more than any node has (64 at most)");
  }
  req.gpus = static_cast<int>(gpu_milli.value() / 1000);

  // A share may also be asked as the extended resource troupe.dev/gpu-milli, which
  // kube-scheduler's managedResources can route to Troupe (annotations cannot).
  Result<int64_t> share = effectiveMilli(pod, kResourceGpuMilli);
  if (!share.isOk()) return share.status();
  std::string share_text;
  const std::string* milli = annotationOrLabel(pod, kAnnotationGpuMilli);
  if (share.value() > 0) {
    share_text = std::to_string(share.value() / 1000);
    if (share.value() % 1000 != 0 || share.value() > 1000 * 1000) {
      return invalidArgument("resource " + std::string(kResourceGpuMilli) + "=" +
                             std::to_string(share.value()) +
                             "m must be thousandths of one GPU, a whole number from 1 to 1000");
    }
    if (req.gpus > 0) {
      return invalidArgument("resource " + std::string(kResourceGpuMilli) + "=" + share_text +
                             " is for pods that share one GPU, but the pod also requests nvidia.com/gpu=" +
                             std::to_string(req.gpus) + "; remove one of the two");
    }
    if (milli && *milli != share_text) {
      return badAnnotation(kAnnotationGpuMilli, *milli,
                           "the pod also requests resource " + std::string(kResourceGpuMilli) + "=" +
                               share_text + "; give one of the two, or the same value");
    }
    milli = &share_text;
  }
  if (milli) {
    const int64_t m = plainInteger(*milli).value_or(-1);  // " 500" and "+500" are not plain
    if (m < 1 || m > 1000) {
      return badAnnotation(kAnnotationGpuMilli, *milli,
                           "expected thousandths of one GPU, a whole number from 1 to 1000 "
                           "(500 = half a GPU)");
    }
    if (req.gpus > 0) {
      return badAnnotation(kAnnotationGpuMilli, *milli,
                           "it is for pods that share one GPU, but the pod also requests "
                           "nvidia.com/gpu=" +
                               std::to_string(req.gpus) + "; remove one of the two");
    }
    req.gpus = 1;
    req.milli_per_gpu = m;
  }
  if (pod.claim_gpus < 0) {
    return unavailable(
        "a ResourceClaim the pod names is not known to Troupe yet (or not made from its "
        "template yet); kube-scheduler tries again once it exists");
  }
  if (req.gpus == 0 && pod.claim_gpus > 0) {
    // Only ResourceClaims ask for GPUs: a whole-GPU request that a DRA-served node must serve.
    req.gpus = pod.claim_gpus;
    req.dra_only = true;
  }

  if (const std::string* models = annotationOrLabel(pod, kAnnotationGpuModel)) {
    req.models = splitList(*models, ',');
    if (req.models.empty()) {
      return badAnnotation(kAnnotationGpuModel, *models,
                           "expected comma-separated GPU products as in the node label "
                           "nvidia.com/gpu.product, e.g. \"NVIDIA-H100-80GB-HBM3,NVIDIA-H200\"");
    }
  }
  if (const std::string* memory = annotationOrLabel(pod, kAnnotationGpuMemory)) {
    Result<int64_t> bytes = parseQuantityValue(*memory);
    if (!bytes.isOk() || bytes.value() <= 0) {
      return badAnnotation(kAnnotationGpuMemory, *memory,
                           "expected the minimum memory per GPU as a Kubernetes quantity, "
                           "e.g. \"40Gi\" or \"80G\"");
    }
    req.min_memory_bytes = bytes.value();
  }
  if (const std::string* topology = annotationOrLabel(pod, kAnnotationGpuTopology)) {
    std::string t(trim(*topology));
    if (equalsIgnoreCase(t, "nvlink"))
      req.topology = TopologyMode::kNVLink;
    else if (equalsIgnoreCase(t, "preferred"))
      req.topology = TopologyMode::kPreferred;
    else if (equalsIgnoreCase(t, "none"))
      req.topology = TopologyMode::kNone;
    else {
      return badAnnotation(kAnnotationGpuTopology, *topology,
                           "expected one of nvlink (all GPUs in one NVLink domain), preferred "
                           "(default: best-connected GPUs score highest) or none");
    }
  }
  Result<int> required = topologyLevel(pod, kAnnotationTopologyRequired, topology_levels);
  if (!required.isOk()) return required.status();
  Result<int> preferred = topologyLevel(pod, kAnnotationTopologyPreferred, topology_levels);
  if (!preferred.isOk()) return preferred.status();
  if (required.value() >= 0 && preferred.value() >= 0 && preferred.value() < required.value()) {
    return badAnnotation(kAnnotationTopologyPreferred, *annotationOrLabel(pod, kAnnotationTopologyPreferred),
                         "it is wider than troupe.dev/topology-required=\"" +
                             *annotationOrLabel(pod, kAnnotationTopologyRequired) +
                             "\", which already keeps the gang in one such domain; prefer a narrower "
                             "level or drop it");
  }
  req.topology_required = required.value();
  req.topology_preferred = preferred.value();
  Result<PodCompute> compute = podCompute(pod);
  if (!compute.isOk()) return compute.status();
  req.cpu_milli = compute.value().cpu_milli;
  req.memory_bytes = compute.value().memory_bytes;
  return req;
}

Result<PodCompute> podCompute(const PodFacts& pod) {
  PodCompute out;
  Result<int64_t> cpu = effectiveMilli(pod, "cpu");
  if (!cpu.isOk()) return cpu.status();
  if (Status s = checkAmount("cpu", cpu.value(), "m"); !s.isOk()) return s;
  out.cpu_milli = cpu.value();
  Result<int64_t> mem = effectiveMilli(pod, "memory");
  if (!mem.isOk()) return mem.status();
  // Thousandths of a byte rounded up to bytes, without the overflow of (milli + 999) / 1000.
  const int64_t bytes = mem.value() / 1000 + (mem.value() % 1000 != 0 ? 1 : 0);
  if (Status s = checkAmount("memory", bytes, ""); !s.isOk()) return s;
  out.memory_bytes = bytes;
  return out;
}

Result<std::vector<int>> parseGpuAssignment(const std::string& text) {
  std::vector<int> gpus;
  std::set<int> seen;
  for (const std::string& part : splitList(text, ',')) {
    const int64_t g64 = plainInteger(part).value_or(-1);
    const int g = g64 >= 0 && g64 <= 63 ? static_cast<int>(g64) : -1;
    if (g < 0 || !seen.insert(g).second) {
      return invalidArgument("annotation troupe.dev/gpus=\"" + text +
                             "\" is invalid: expected distinct GPU indices 0-63 separated by "
                             "commas, e.g. \"0,1,2,3\"");
    }
    gpus.push_back(g);
  }
  if (gpus.empty()) {
    return invalidArgument("annotation troupe.dev/gpus=\"" + text + "\" lists no GPU index");
  }
  return gpus;
}

}  // namespace troupe::sched
