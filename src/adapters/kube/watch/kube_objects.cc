#include "adapters/kube/watch/kube_objects.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include "troupe/common/quantity.h"
#include "troupe/model/pod_contract.h"

namespace troupe::kube {
namespace {

// Members scheduling never reads. Skipped wherever they appear, except as keys of labels and
// annotations.
constexpr std::array<std::string_view, 37> kSkipped = {"managedFields",
                                                       "ownerReferences",
                                                       "finalizers",
                                                       "volumes",
                                                       "env",
                                                       "envFrom",
                                                       "volumeMounts",
                                                       "volumeDevices",
                                                       "command",
                                                       "args",
                                                       "ports",
                                                       "livenessProbe",
                                                       "readinessProbe",
                                                       "startupProbe",
                                                       "lifecycle",
                                                       "securityContext",
                                                       "tolerations",
                                                       "affinity",
                                                       "topologySpreadConstraints",
                                                       "readinessGates",
                                                       "dnsConfig",
                                                       "hostAliases",
                                                       "ephemeralContainers",
                                                       "conditions",
                                                       "containerStatuses",
                                                       "initContainerStatuses",
                                                       "ephemeralContainerStatuses",
                                                       "podIPs",
                                                       "hostIPs",
                                                       "images",
                                                       "nodeInfo",
                                                       "addresses",
                                                       "daemonEndpoints",
                                                       "volumesInUse",
                                                       "volumesAttached",
                                                       "runtimeHandlers",
                                                       "taints"};

bool skipped(const std::string& key) {
  return std::find(kSkipped.begin(), kSkipped.end(), key) != kSkipped.end();
}

const Json* member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// The pod's nvidia.com/gpu by Kubernetes' rule (requests, else limits; init containers
// count alone), without the rest of the pod contract: for pods whose annotations are invalid.
int rawGpuCount(const sched::PodFacts& pod) {
  auto of = [](const sched::ContainerResources& c) -> int64_t {
    const std::string* text = nullptr;
    if (auto r = c.requests.find("nvidia.com/gpu"); r != c.requests.end())
      text = &r->second;
    else if (auto l = c.limits.find("nvidia.com/gpu"); l != c.limits.end())
      text = &l->second;
    if (!text) return 0;
    Result<int64_t> v = parseQuantityValue(*text);
    return v.isOk() && v.value() > 0 ? v.value() : 0;
  };
  // Capped at 64 at every step: a sum of huge requests must not wrap to a small (or negative)
  // count.
  int64_t app = 0;
  for (const auto& c : pod.containers) app = std::min<int64_t>(64, app + std::min<int64_t>(64, of(c)));
  int64_t init = 0;
  for (const auto& c : pod.init_containers) init = std::max(init, std::min<int64_t>(64, of(c)));
  return static_cast<int>(std::max(app, init));
}

}  // namespace

Result<Json> parseKubeJson(std::string_view text) {
  // keys[d]: the last key read at depth d, so a key's parent is keys[d - 1] (stale under
  // arrays, which can only make the parser keep more, never drop a label).
  std::vector<std::string> keys;
  auto callback = [&keys](int depth, Json::parse_event_t event, Json& parsed) {
    if (event != Json::parse_event_t::key || depth < 0) return true;
    const auto d = static_cast<size_t>(depth);
    if (keys.size() <= d) keys.resize(d + 1);
    keys[d].assign(parsed.get_ref<const std::string&>());  // reuses the slot's buffer
    if (!skipped(keys[d])) return true;
    if (d >= 1 && (keys[d - 1] == "labels" || keys[d - 1] == "annotations")) return true;
    return false;
  };
  Json doc = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return invalidArgument("the API server sent invalid JSON (" + std::to_string(text.size()) + " bytes: \"" +
                           std::string(text.substr(0, 120)) + "\")");
  }
  return doc;
}

std::string uidOf(const Json& object) {
  const Json* meta = member(object, "metadata");
  const Json* uid = meta ? member(*meta, "uid") : nullptr;
  return uid && uid->is_string() ? uid->get<std::string>() : std::string();
}

std::string nameOf(const Json& object) {
  const Json* meta = member(object, "metadata");
  const Json* name = meta ? member(*meta, "name") : nullptr;
  return name && name->is_string() ? name->get<std::string>() : std::string();
}

std::string resourceVersionOf(const Json& object) {
  const Json* meta = member(object, "metadata");
  const Json* rv = meta ? member(*meta, "resourceVersion") : nullptr;
  return rv && rv->is_string() ? rv->get<std::string>() : std::string();
}

Result<PodView> decodePod(const Json& pod, const std::vector<std::string>& topology_levels) {
  Result<sched::PodFacts> facts = adapters::podFromJson(pod);
  if (!facts.isOk()) return facts.status();
  PodView v;
  v.facts = std::move(facts).value();
  if (v.facts.uid.empty()) return invalidArgument("pod " + v.facts.key() + " has no metadata.uid");
  auto timeOf = [](const Json* t) -> std::optional<std::chrono::system_clock::time_point> {
    if (!t || !t->is_string()) return std::nullopt;
    return parseApiTime(t->get_ref<const std::string&>());
  };
  if (const Json* meta = member(pod, "metadata")) {
    const Json* ts = member(*meta, "deletionTimestamp");
    v.terminating = ts && !ts->is_null();
    v.created = timeOf(member(*meta, "creationTimestamp"));
  }
  if (const Json* status = member(pod, "status")) v.started = timeOf(member(*status, "startTime"));
  // The API server defaults an absent schedulerName; a pod read from it always has one.
  v.scheduler_name = "default-scheduler";
  if (const Json* spec = member(pod, "spec")) {
    const Json* name = member(*spec, "schedulerName");
    if (name && name->is_string() && !name->get_ref<const std::string&>().empty()) {
      v.scheduler_name = name->get<std::string>();
    }
  }
  v.finished = v.facts.phase == "Succeeded" || v.facts.phase == "Failed";
  Result<sched::GpuRequest> req = sched::parseGpuRequest(v.facts, topology_levels);
  v.request_levels = topology_levels;
  if (req.isOk()) {
    v.request = req.value();
    v.gpus = req.value().gpus;
    v.milli_per_gpu = req.value().milli_per_gpu;
    v.cpu_milli = req.value().cpu_milli;
    v.memory_bytes = req.value().memory_bytes;
  } else {
    v.gpus = rawGpuCount(v.facts);
    if (v.gpus == 0 && v.facts.annotations.count(sched::kAnnotationGpuMilli)) v.gpus = 1;
    if (Result<sched::PodCompute> compute = sched::podCompute(v.facts); compute.isOk()) {
      v.cpu_milli = compute.value().cpu_milli;
      v.memory_bytes = compute.value().memory_bytes;
    }
  }
  if (auto a = v.facts.annotations.find(sched::kAnnotationGpus); a != v.facts.annotations.end()) {
    v.has_assignment = true;
    Result<std::vector<int>> gpus = sched::parseGpuAssignment(a->second);
    if (!gpus.isOk()) {
      v.assignment_problem = gpus.status().message();
    } else if (static_cast<int>(gpus.value().size()) != v.gpus) {
      v.assignment_problem = "annotation troupe.dev/gpus=\"" + a->second + "\" lists " +
                             std::to_string(gpus.value().size()) + " GPUs but the pod holds " +
                             std::to_string(v.gpus);
    } else {
      v.assigned = std::move(gpus).value();
    }
  }
  return v;
}

Result<model::NodeFacts> decodeNode(const Json& node) {
  Result<model::NodeFacts> facts = adapters::nodeFromJson(node);
  if (!facts.isOk()) return facts;
  const Json* status = member(node, "status");
  const Json* alloc = status ? member(*status, "allocatable") : nullptr;
  if (!alloc) return facts;
  auto text = [&](const char* key) {
    const Json* q = member(*alloc, key);
    return q && q->is_string() ? q->get<std::string>() : std::string();
  };
  facts.value().cpu = text("cpu");
  facts.value().memory = text("memory");
  facts.value().pods = text("pods");
  return facts;
}

std::optional<std::chrono::system_clock::time_point> parseApiTime(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then optional .fraction, then Z or +HH:MM / -HH:MM.
  auto digits = [&](size_t at, size_t n, int* out) {
    if (at + n > text.size()) return false;
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      v = v * 10 + (text[i] - '0');
    }
    *out = v;
    return true;
  };
  struct tm tm {};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!digits(0, 4, &year) || text.size() < 20 || text[4] != '-' || !digits(5, 2, &month) || text[7] != '-' ||
      !digits(8, 2, &day) || (text[10] != 'T' && text[10] != 't') || !digits(11, 2, &hour) ||
      text[13] != ':' || !digits(14, 2, &minute) || text[16] != ':' || !digits(17, 2, &second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return std::nullopt;
  size_t at = 19;
  int64_t nanos = 0;
  if (at < text.size() && text[at] == '.') {
    int64_t scale = 100000000;
    for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at) {
      nanos += (text[at] - '0') * scale;
      scale /= 10;
    }
  }
  int offset_minutes = 0;
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    int oh = 0, om = 0;
    if (!digits(at + 1, 2, &oh) || at + 3 >= text.size() || text[at + 3] != ':' || !digits(at + 4, 2, &om))
      return std::nullopt;
    offset_minutes = (text[at] == '+' ? 1 : -1) * (oh * 60 + om);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != text.size()) return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const time_t secs = timegm(&tm);
  return std::chrono::system_clock::from_time_t(secs) - std::chrono::minutes(offset_minutes) +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(nanos));
}

std::string formatApiTime(std::chrono::system_clock::time_point t) {
  const time_t secs = std::chrono::system_clock::to_time_t(t);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::pair<std::string, std::string> splitObjectKey(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::string formatGpus(const std::vector<int>& gpus) {
  std::string out;
  for (int g : gpus) out += (out.empty() ? "" : ",") + std::to_string(g);
  return out;
}

std::vector<ApiCondition> conditionsOf(const Json& object) {
  std::vector<ApiCondition> out;
  const Json* status = adapters::field(object, "status");
  const Json* conds = status ? adapters::field(*status, "conditions") : nullptr;
  if (!conds || !conds->is_array()) return out;
  for (const Json& c : *conds) {
    if (!c.is_object()) continue;
    out.push_back(ApiCondition{
        adapters::textOf(adapters::field(c, "type")), adapters::textOf(adapters::field(c, "status")),
        adapters::textOf(adapters::field(c, "reason")), adapters::textOf(adapters::field(c, "message")),
        adapters::textOf(adapters::field(c, "lastTransitionTime"))});
  }
  return out;
}

}  // namespace troupe::kube
