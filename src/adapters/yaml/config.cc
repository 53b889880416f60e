#include "adapters/yaml/config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include "adapters/common/gpu_amount.h"
#include "troupe/model/pod_contract.h"
#include "troupe/sched/cluster/gpu_amount.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/policies/policy_registry.h"

namespace troupe::config {
namespace {

// Errors carry "FILE:LINE: KEY: problem" so an editor can jump there.
struct Where {
  std::string file;
  Status at(const YAML::Node& node, const std::string& key, const std::string& problem) const {
    int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return invalidArgument(file + ":" + std::to_string(line) + ": " + key + ": " + problem);
  }
};

Status checkKeys(const Where& w, const YAML::Node& map, const std::string& path,
                 const std::set<std::string>& allowed) {
  if (!map.IsMap()) return w.at(map, path, "must be a mapping");
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::string key = it->first.as<std::string>();
    if (!allowed.count(key)) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return w.at(it->first, path.empty() ? key : path + "." + key, "unknown key; expected one of " + list);
    }
  }
  return Status::ok();
}

template <typename T>
Result<T> scalar(const Where& w, const YAML::Node& node, const std::string& key, const char* expected) {
  if (!node.IsScalar()) return w.at(node, key, std::string("must be ") + expected);
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return w.at(node, key, std::string("must be ") + expected + ", got \"" + node.Scalar() + "\"");
  }
}

// A DNS subdomain (RFC 1123): how Kubernetes names scheduler profiles and cluster-scoped objects.
bool isDnsSubdomain(const std::string& name) {
  auto alnum = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  bool ok = !name.empty() && name.size() <= 253;
  for (size_t start = 0; ok && start <= name.size();) {
    size_t end = name.find('.', start);
    if (end == std::string::npos) end = name.size();
    const std::string_view label(name.data() + start, end - start);
    ok = !label.empty() && label.size() <= 63 && alnum(label.front()) && alnum(label.back());
    for (char ch : label) ok = ok && (alnum(ch) || ch == '-');
    start = end + 1;
  }
  return ok;
}

// A Queue's name, as the Queue object's metadata.name must be.
Status checkQueueName(const std::string& name) {
  if (isDnsSubdomain(name)) return Status::ok();
  return invalidArgument("\"" + name +
                         "\" is not a queue name: use lower-case letters, digits, '-' and '.', starting and "
                         "ending with a letter or digit (e.g. research)");
}

Result<std::string> readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return notFound("cannot read " + path + ": no such file or not readable");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<YAML::Node> parseYaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return invalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
}

Result<model::StringMap> stringMap(const Where& w, const YAML::Node& node, const std::string& key) {
  model::StringMap out;
  if (!node || node.IsNull()) return out;
  if (!node.IsMap()) return w.at(node, key, "must be a mapping of strings");
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->second.IsScalar()) {
      return w.at(it->second, key + "." + it->first.as<std::string>(), "must be a string");
    }
    out[it->first.as<std::string>()] = it->second.Scalar();
  }
  return out;
}

// A whole number in [lo, hi]: `expected` names it in the type error, `out_of_range` is the
// problem reported outside the bounds (each key keeps its own wording).
Result<int64_t> boundedInt(const Where& w, const YAML::Node& node, const std::string& key,
                           const char* expected, int64_t lo, int64_t hi, const char* out_of_range) {
  Result<int64_t> v = scalar<int64_t>(w, node, key, expected);
  if (!v.isOk()) return v.status();
  if (v.value() < lo || v.value() > hi) return w.at(node, key, out_of_range);
  return v.value();
}

Status parseLimits(const Where& w, const YAML::Node& limits, ServerLimitsConfig* out) {
  if (Status s =
          checkKeys(w, limits, "limits",
                    {"maxHeaderBytes", "maxBodyBytesInFlight", "maxConnections", "headerTimeoutSeconds",
                     "readTimeoutSeconds", "idleTimeoutSeconds", "writeTimeoutSeconds"});
      !s.isOk())
    return s;
  for (auto [key, target, minimum] : {std::tuple{"maxHeaderBytes", &out->max_header_bytes, int64_t{1024}},
                                      {"maxBodyBytesInFlight", &out->max_body_bytes_in_flight, int64_t{1024}},
                                      {"maxConnections", &out->max_connections, int64_t{1}}}) {
    if (!limits[key]) continue;
    const std::string name = std::string("limits.") + key;
    Result<int64_t> v = scalar<int64_t>(w, limits[key], name, "a whole number");
    if (!v.isOk()) return v.status();
    if (v.value() < minimum) return w.at(limits[key], name, "must be at least " + std::to_string(minimum));
    *target = static_cast<size_t>(v.value());
  }
  for (auto [key, target] : {std::pair{"headerTimeoutSeconds", &out->header_timeout_seconds},
                             {"readTimeoutSeconds", &out->read_timeout_seconds},
                             {"idleTimeoutSeconds", &out->idle_timeout_seconds},
                             {"writeTimeoutSeconds", &out->write_timeout_seconds}}) {
    if (!limits[key]) continue;
    const std::string name = std::string("limits.") + key;
    Result<double> v = scalar<double>(w, limits[key], name, "a number of seconds");
    if (!v.isOk()) return v.status();
    if (!(v.value() >= 0.1 && v.value() <= 86400)) {
      return w.at(limits[key], name, "must be between 0.1 and 86400 seconds");
    }
    *target = v.value();
  }
  return Status::ok();
}

Status parseMetrics(const Where& w, const YAML::Node& m, adapters::PerNodeSeries* out) {
  if (Status s = checkKeys(w, m, "metrics", {"perNodeSeries", "perNodeSeriesOffAt"}); !s.isOk()) return s;
  if (m["perNodeSeries"]) {
    Result<std::string> v =
        scalar<std::string>(w, m["perNodeSeries"], "metrics.perNodeSeries", "auto, on or off");
    if (!v.isOk()) return v.status();
    Result<adapters::PerNodeSeries::Mode> mode = parsePerNodeSeries(v.value());
    if (!mode.isOk()) return w.at(m["perNodeSeries"], "metrics.perNodeSeries", mode.status().message());
    out->mode = mode.value();
  }
  if (m["perNodeSeriesOffAt"]) {
    Result<int64_t> v = boundedInt(w, m["perNodeSeriesOffAt"], "metrics.perNodeSeriesOffAt",
                                   "a number of GPU nodes (1-1000000)", 1, 1000000, "must be 1 to 1000000");
    if (!v.isOk()) return v.status();
    out->auto_off_at = static_cast<size_t>(v.value());
  }
  return Status::ok();
}

// A duration key such as queues.minRuntime: "5m", "90s"; `allow_zero` for "at once".
Result<std::chrono::milliseconds> durationKey(const Where& w, const YAML::Node& node, const std::string& key,
                                              bool allow_zero) {
  Result<std::string> v = scalar<std::string>(w, node, key, "a duration such as 5m");
  if (!v.isOk()) return v.status();
  Result<std::chrono::milliseconds> d = sched::parseDuration(v.value());
  if (!d.isOk() || d.value().count() < 0 || (!allow_zero && d.value().count() == 0)) {
    return w.at(node, key,
                std::string("is \"") + v.value() + "\": must be a " + (allow_zero ? "" : "positive ") +
                    "duration such as \"5m\" or \"90s\"" + (allow_zero ? " (0s: at once)" : ""));
  }
  return d.value();
}

// guaranteed / limit: {gpus: N, products: {PRODUCT: N}}, N whole or a quantity ("2.5", "500m").
Status parseGpuQuota(const Where& w, const YAML::Node& node, const std::string& key, sched::GpuQuota* out) {
  if (node.IsNull()) return Status::ok();
  if (Status s = checkKeys(w, node, key, {"gpus", "products"}); !s.isOk()) return s;
  auto amount = [&](const YAML::Node& n, const std::string& name) -> Result<int64_t> {
    if (!n.IsScalar()) return w.at(n, name, "must be a number of GPUs such as 8, \"2.5\" or \"500m\"");
    Result<int64_t> milli = adapters::parseGpuAmount(n.Scalar());
    if (!milli.isOk()) return w.at(n, name, milli.status().message());
    return milli.value();
  };
  if (const YAML::Node gpus = node["gpus"]; gpus && !gpus.IsNull()) {
    Result<int64_t> milli = amount(gpus, key + ".gpus");
    if (!milli.isOk()) return milli.status();
    out->milli = milli.value();
  }
  if (const YAML::Node products = node["products"]; products && !products.IsNull()) {
    if (!products.IsMap()) {
      return w.at(products, key + ".products",
                  "must map GPU products (the nodes' nvidia.com/gpu.product label) to GPUs, e.g. "
                  "{NVIDIA-H100-80GB-HBM3: 4}");
    }
    for (auto it = products.begin(); it != products.end(); ++it) {
      const std::string product = it->first.as<std::string>();
      Result<int64_t> milli = amount(it->second, key + ".products." + product);
      if (!milli.isOk()) return milli.status();
      out->product_milli[product] = milli.value();
    }
  }
  return Status::ok();
}

Result<sched::QueueSpec> parseQueueDefinition(const Where& w, const YAML::Node& node,
                                              const std::string& key) {
  if (Status s = checkKeys(w, node, key, {"name", "parent", "weight", "guaranteed", "limit", "preemptible"});
      !s.isOk())
    return s;
  sched::QueueSpec spec;
  if (!node["name"]) return w.at(node, key + ".name", "is required: the queue's name, e.g. research");
  Result<std::string> name = scalar<std::string>(w, node["name"], key + ".name", "a queue name");
  if (!name.isOk()) return name.status();
  spec.name = name.value();
  if (node["parent"] && !node["parent"].IsNull()) {
    Result<std::string> parent = scalar<std::string>(w, node["parent"], key + ".parent", "a queue name");
    if (!parent.isOk()) return parent.status();
    spec.parent = parent.value();
  }
  if (node["weight"]) {
    Result<double> weight =
        scalar<double>(w, node["weight"], key + ".weight", "a positive number such as 1 or 2.5");
    if (!weight.isOk()) return weight.status();
    if (Status s = adapters::checkQueueWeight(weight.value()); !s.isOk())
      return w.at(node["weight"], key + ".weight", s.message());
    spec.weight = weight.value();
  }
  for (auto [field, target] : {std::pair{"guaranteed", &spec.guaranteed}, {"limit", &spec.limit}}) {
    if (!node[field]) continue;
    if (Status s = parseGpuQuota(w, node[field], key + "." + field, target); !s.isOk()) return s;
  }
  if (node["preemptible"]) {
    Result<bool> p = scalar<bool>(w, node["preemptible"], key + ".preemptible", "true or false");
    if (!p.isOk()) return p.status();
    spec.preemptible = p.value();
  }
  return spec;
}

Status parseQueues(const Where& w, const YAML::Node& q, QueuesConfig* out) {
  if (Status s =
          checkKeys(w, q, "queues", {"default", "minRuntime", "reclaim", "reclaimTimeout", "definitions"});
      !s.isOk())
    return s;
  if (q["default"]) {
    Result<std::string> v = scalar<std::string>(w, q["default"], "queues.default", "a queue name");
    if (!v.isOk()) return v.status();
    if (Status st = checkQueueName(v.value()); !st.isOk())
      return w.at(q["default"], "queues.default", st.message());
    out->default_queue = v.value();
  }
  if (q["minRuntime"]) {
    Result<std::chrono::milliseconds> d = durationKey(w, q["minRuntime"], "queues.minRuntime", true);
    if (!d.isOk()) return d.status();
    out->reclaim.min_runtime = d.value();
  }
  if (q["reclaimTimeout"]) {
    Result<std::chrono::milliseconds> d = durationKey(w, q["reclaimTimeout"], "queues.reclaimTimeout", false);
    if (!d.isOk()) return d.status();
    out->reclaim.timeout = d.value();
  }
  if (q["reclaim"]) {
    Result<bool> v = scalar<bool>(w, q["reclaim"], "queues.reclaim", "true or false");
    if (!v.isOk()) return v.status();
    out->reclaim.enabled = v.value();
  }
  const YAML::Node defs = q["definitions"];
  if (!defs || defs.IsNull()) return Status::ok();
  if (!defs.IsSequence()) {
    return w.at(defs, "queues.definitions", "must be a list of queues, e.g. [{name: research, weight: 2}]");
  }
  out->definitions.clear();
  for (size_t i = 0; i < defs.size(); ++i) {
    const std::string key = "queues.definitions[" + std::to_string(i) + "]";
    Result<sched::QueueSpec> spec = parseQueueDefinition(w, defs[i], key);
    if (!spec.isOk()) return spec.status();
    out->definitions.push_back(std::move(spec).value());
  }
  // The tree's own checks (names, parents, cycles, guarantees within limits and parents): a
  // queue it refuses would refuse its pods, so the file is refused instead, at that queue.
  const sched::QueueTree tree = sched::QueueTree::build(out->definitions, out->default_queue);
  for (size_t i = 0; i < out->definitions.size(); ++i) {
    auto bad = tree.invalid().find(out->definitions[i].name);
    if (bad == tree.invalid().end()) continue;
    return w.at(defs[i], "queues.definitions[" + std::to_string(i) + "]", bad->second);
  }
  if (!tree.invalid().empty()) {
    return w.at(defs, "queues.definitions",
                tree.invalid().begin()->first + ": " + tree.invalid().begin()->second);
  }
  return Status::ok();
}

Status parseDefrag(const Where& w, const YAML::Node& d, DefragConfig* out) {
  if (Status s =
          checkKeys(w, d, "defrag", {"enabled", "interval", "minGpus", "minPending", "maxMoves", "evict"});
      !s.isOk())
    return s;
  for (auto [key, target] : {std::pair{"enabled", &out->enabled}, {"evict", &out->evict}}) {
    if (!d[key]) continue;
    Result<bool> v = scalar<bool>(w, d[key], std::string("defrag.") + key, "true or false");
    if (!v.isOk()) return v.status();
    *target = v.value();
  }
  if (d["interval"]) {
    Result<std::chrono::milliseconds> v = durationKey(w, d["interval"], "defrag.interval", false);
    if (!v.isOk()) return v.status();
    out->interval = v.value();
  }
  if (d["minPending"]) {
    Result<std::chrono::milliseconds> v = durationKey(w, d["minPending"], "defrag.minPending", true);
    if (!v.isOk()) return v.status();
    out->min_pending = v.value();
  }
  if (d["minGpus"]) {
    Result<int64_t> v = boundedInt(w, d["minGpus"], "defrag.minGpus", "a whole number of GPUs", 1, 64,
                                   "must be 1-64 GPUs: pods on their own asking fewer get no advice");
    if (!v.isOk()) return v.status();
    out->min_gpus = static_cast<int>(v.value());
  }
  if (d["maxMoves"]) {
    Result<int64_t> v = boundedInt(w, d["maxMoves"], "defrag.maxMoves", "a whole number", 1, 16,
                                   "must be 1-16: the planner's cost grows with it");
    if (!v.isOk()) return v.status();
    out->max_moves = static_cast<int>(v.value());
  }
  return Status::ok();
}

// The top level's own keys: listen, maxBodyBytes, logLevel.
Status parseServer(const Where& w, const YAML::Node& root, ServeConfig* out) {
  if (root["listen"]) {
    Result<std::string> v = scalar<std::string>(w, root["listen"], "listen", "HOST:PORT");
    if (!v.isOk()) return v.status();
    out->listen = v.value();
  }
  if (root["maxBodyBytes"]) {
    Result<int64_t> v = scalar<int64_t>(w, root["maxBodyBytes"], "maxBodyBytes", "a number of bytes");
    if (!v.isOk()) return v.status();
    if (v.value() < 1024) return w.at(root["maxBodyBytes"], "maxBodyBytes", "must be at least 1024");
    if (v.value() > (int64_t{1} << 30)) {
      return w.at(root["maxBodyBytes"], "maxBodyBytes", "must be at most 1073741824 (1 GiB)");
    }
    out->max_body_bytes = static_cast<size_t>(v.value());
  }
  if (root["logLevel"]) {
    Result<std::string> v =
        scalar<std::string>(w, root["logLevel"], "logLevel", "debug, info, warn or error");
    if (!v.isOk()) return v.status();
    if (v.value() != "debug" && v.value() != "info" && v.value() != "warn" && v.value() != "error") {
      return w.at(root["logLevel"], "logLevel", "must be debug, info, warn or error");
    }
    out->log_level = v.value();
  }
  return Status::ok();
}

Status parsePolicy(const Where& w, const YAML::Node& policy, sched::PolicyChoice* out) {
  if (Status s = checkKeys(w, policy, "policy", {"name", "weights"}); !s.isOk()) return s;
  if (policy["name"]) {
    Result<std::string> v = scalar<std::string>(w, policy["name"], "policy.name", "a policy name");
    if (!v.isOk()) return v.status();
    // Made once here so that an unknown name is refused with the known ones listed.
    Result<sched::PolicyPtr> made = sched::builtinPolicies().create(v.value());
    if (!made.isOk()) return w.at(policy["name"], "policy.name", made.status().message());
    out->name = v.value();
  }
  if (const YAML::Node weights = policy["weights"]) {
    if (Status s =
            checkKeys(w, weights, "policy.weights", {"pack", "topology", "domains", "balance", "scarcity"});
        !s.isOk())
      return s;
    // The troupe policy's arguments (TroupeArgs); other policies take none.
    sched::TroupeArgs& troupe = out->args.troupe;
    for (auto [key, target] : {std::pair{"pack", &troupe.pack_weight},
                               {"topology", &troupe.topology_weight},
                               {"domains", &troupe.domain_weight},
                               {"balance", &troupe.balance_weight},
                               {"scarcity", &troupe.scarcity_weight}}) {
      if (!weights[key]) continue;
      Result<double> v =
          scalar<double>(w, weights[key], std::string("policy.weights.") + key, "a number >= 0");
      if (!v.isOk()) return v.status();
      *target = v.value();
    }
    std::vector<std::string> errors = sched::validateTroupeArgs(troupe);
    if (!errors.empty()) return w.at(weights, "policy.weights", errors.front());
  }
  return Status::ok();
}

Status parseFilter(const Where& w, const YAML::Node& filter, bool* narrow_to_best) {
  if (Status st = checkKeys(w, filter, "filter", {"narrowTo"}); !st.isOk()) return st;
  if (filter["narrowTo"]) {
    Result<std::string> v = scalar<std::string>(w, filter["narrowTo"], "filter.narrowTo", "best or all");
    if (!v.isOk()) return v.status();
    Result<bool> narrow = parseNarrowTo(v.value());
    if (!narrow.isOk()) return w.at(filter["narrowTo"], "filter.narrowTo", narrow.status().message());
    *narrow_to_best = narrow.value();
  }
  return Status::ok();
}

Status parseTopology(const Where& w, const YAML::Node& topology, ServeConfig* out) {
  if (Status s = checkKeys(w, topology, "topology", {"preset", "levels"}); !s.isOk()) return s;
  if (const YAML::Node preset = topology["preset"]) {
    Result<std::string> v = scalar<std::string>(w, preset, "topology.preset", "a preset name");
    if (!v.isOk()) return v.status();
    const model::TopologyPreset* p = model::findTopologyPreset(v.value());
    if (!p) {
      return w.at(preset, "topology.preset",
                  "unknown preset \"" + v.value() + "\"; expected one of " + model::topologyPresetNames() +
                      " (or list topology.levels yourself)");
    }
    out->topology_preset = p->name;
    out->topology_levels = p->levels;  // explicit levels below replace these
  }
  if (const YAML::Node levels = topology["levels"]) {
    if (!levels.IsSequence()) {
      return w.at(levels, "topology.levels",
                  "must be a list of node label keys, widest first, e.g. [topology.kubernetes.io/zone, "
                  "troupe.dev/block, troupe.dev/rack]");
    }
    out->topology_levels.clear();
    for (size_t i = 0; i < levels.size(); ++i) {
      const std::string key = "topology.levels[" + std::to_string(i) + "]";
      Result<std::string> v = scalar<std::string>(w, levels[i], key, "a node label key");
      if (!v.isOk()) return v.status();
      out->topology_levels.push_back(v.value());
      std::vector<std::string> errors = model::validateTopologyLevels(out->topology_levels);
      if (!errors.empty()) return w.at(levels[i], key, errors.front());
    }
  }
  return Status::ok();
}

Status parseGang(const Where& w, const YAML::Node& gang, sched::GangSettings* out) {
  if (Status s = checkKeys(w, gang, "gang", {"timeout", "maxTimeout", "maxGangs"}); !s.isOk()) return s;
  for (auto [key, target] : {std::pair{"timeout", &out->timeout}, {"maxTimeout", &out->max_timeout}}) {
    if (!gang[key]) continue;
    const std::string name = std::string("gang.") + key;
    Result<std::string> v = scalar<std::string>(w, gang[key], name, "a duration such as 5m");
    if (!v.isOk()) return v.status();
    Result<std::chrono::milliseconds> d = sched::parseDuration(v.value());
    if (!d.isOk() || d.value().count() <= 0) {
      return w.at(gang[key], name, "must be a positive duration such as \"5m\" or \"90s\"");
    }
    *target = d.value();
  }
  if (out->timeout > out->max_timeout) {
    return w.at(gang, "gang.timeout",
                "the default gang timeout must not exceed gang.maxTimeout (which must stay below "
                "kube-scheduler's extender httpTimeout)");
  }
  if (gang["maxGangs"]) {
    Result<int64_t> v = boundedInt(w, gang["maxGangs"], "gang.maxGangs", "a number of gangs", 1, 1000000,
                                   "must be from 1 to 1000000");
    if (!v.isOk()) return v.status();
    out->max_gangs = static_cast<size_t>(v.value());
  }
  return Status::ok();
}

Status parseBinder(const Where& w, const YAML::Node& binder, int* workers) {
  if (Status st = checkKeys(w, binder, "binder", {"workers"}); !st.isOk()) return st;
  if (binder["workers"]) {
    Result<int64_t> v =
        boundedInt(w, binder["workers"], "binder.workers", "a number of concurrent Bindings (1-256)", 1, 256,
                   "must be 1 to 256 (concurrent Bindings in flight)");
    if (!v.isOk()) return v.status();
    *workers = static_cast<int>(v.value());
  }
  return Status::ok();
}

Status parseSchedulerNames(const Where& w, const YAML::Node& names, std::vector<std::string>* out) {
  if (!names.IsSequence() || names.size() == 0) {
    return w.at(names, "schedulerNames",
                "must be a non-empty list of kube-scheduler profile names, e.g. [troupe-scheduler]");
  }
  out->clear();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string key = "schedulerNames[" + std::to_string(i) + "]";
    Result<std::string> v = scalar<std::string>(w, names[i], key, "a scheduler profile name");
    if (!v.isOk()) return v.status();
    if (Status st = checkSchedulerName(v.value()); !st.isOk()) return w.at(names[i], key, st.message());
    out->push_back(v.value());
  }
  return Status::ok();
}

// dra.gpuDrivers or dra.gpuDeviceClasses: DNS subdomains; an empty list turns that side off.
Status parseDraNames(const Where& w, const YAML::Node& dra, const char* key, std::vector<std::string>* out) {
  const YAML::Node list = dra[key];
  if (!list) return Status::ok();
  const std::string where = std::string("dra.") + key;
  if (!list.IsSequence()) return w.at(list, where, "must be a list of names, e.g. [gpu.nvidia.com]");
  out->clear();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = where + "[" + std::to_string(i) + "]";
    Result<std::string> v = scalar<std::string>(w, list[i], item, "a DRA driver or DeviceClass name");
    if (!v.isOk()) return v.status();
    if (!isDnsSubdomain(v.value())) {
      return w.at(list[i], item,
                  "\"" + v.value() +
                      "\" is not a DNS subdomain: use lower-case letters, digits, '-' and '.' (e.g. "
                      "gpu.nvidia.com)");
    }
    out->push_back(v.value());
  }
  return Status::ok();
}

Status parseDra(const Where& w, const YAML::Node& dra, adapters::DraOptions* out) {
  if (Status st = checkKeys(w, dra, "dra", {"gpuDrivers", "gpuDeviceClasses"}); !st.isOk()) return st;
  if (Status st = parseDraNames(w, dra, "gpuDrivers", &out->gpu_drivers); !st.isOk()) return st;
  return parseDraNames(w, dra, "gpuDeviceClasses", &out->gpu_device_classes);
}

Status parseLearnedNodes(const Where& w, const YAML::Node& learned, sched::NodeLearning* out) {
  if (Status st = checkKeys(w, learned, "learnedNodes", {"maxNodes", "ttlSeconds"}); !st.isOk()) return st;
  if (learned["maxNodes"]) {
    Result<int64_t> v = boundedInt(w, learned["maxNodes"], "learnedNodes.maxNodes",
                                   "a number of nodes (1-1000000)", 1, 1000000, "must be 1 to 1000000");
    if (!v.isOk()) return v.status();
    out->max_nodes = static_cast<size_t>(v.value());
  }
  if (learned["ttlSeconds"]) {
    Result<int64_t> v =
        boundedInt(w, learned["ttlSeconds"], "learnedNodes.ttlSeconds", "a number of seconds (1-31536000)", 1,
                   31536000, "must be 1 to 31536000 (a year)");
    if (!v.isOk()) return v.status();
    out->ttl = std::chrono::seconds(v.value());
  }
  return Status::ok();
}

}  // namespace

Result<ServeConfig> parseServeConfig(const std::string& text, const std::string& source) {
  Result<YAML::Node> doc = parseYaml(text, source);
  if (!doc.isOk()) return doc.status();
  ServeConfig c;
  const YAML::Node& root = doc.value();
  if (root.IsNull()) return c;
  Where w{source};
  if (Status s =
          checkKeys(w, root, "",
                    {"listen", "maxBodyBytes", "logLevel", "policy", "filter", "topology", "gang", "metrics",
                     "schedulerNames", "learnedNodes", "limits", "binder", "queues", "dra", "defrag"});
      !s.isOk())
    return s;
  if (Status s = parseServer(w, root, &c); !s.isOk()) return s;
  // Each section by its own parser, in this order: the first error is the one reported.
  using Section = std::function<Status(const YAML::Node&)>;
  const std::pair<const char*, Section> sections[] = {
      {"policy", [&](const YAML::Node& n) { return parsePolicy(w, n, &c.policy); }},
      {"filter", [&](const YAML::Node& n) { return parseFilter(w, n, &c.narrow_to_best); }},
      {"limits", [&](const YAML::Node& n) { return parseLimits(w, n, &c.limits); }},
      {"metrics", [&](const YAML::Node& n) { return parseMetrics(w, n, &c.per_node_series); }},
      {"topology", [&](const YAML::Node& n) { return parseTopology(w, n, &c); }},
      {"gang", [&](const YAML::Node& n) { return parseGang(w, n, &c.gang); }},
      {"binder", [&](const YAML::Node& n) { return parseBinder(w, n, &c.bind_workers); }},
      {"schedulerNames", [&](const YAML::Node& n) { return parseSchedulerNames(w, n, &c.scheduler_names); }},
      {"defrag", [&](const YAML::Node& n) { return parseDefrag(w, n, &c.defrag); }},
      {"queues", [&](const YAML::Node& n) { return parseQueues(w, n, &c.queues); }},
      {"dra", [&](const YAML::Node& n) { return parseDra(w, n, &c.dra); }},
      {"learnedNodes", [&](const YAML::Node& n) { return parseLearnedNodes(w, n, &c.learned_nodes); }},
  };
  for (const auto& [key, parse] : sections) {
    if (const YAML::Node node = root[key]) {
      if (Status s = parse(node); !s.isOk()) return s;
    }
  }
  return c;
}

Status checkSchedulerName(const std::string& name) {
  // A DNS subdomain (RFC 1123), as Kubernetes validates spec.schedulerName.
  if (!isDnsSubdomain(name)) {
    return invalidArgument("\"" + name +
                           "\" is not a scheduler profile name: use lower-case letters, digits, '-' and '.', "
                           "starting and ending with a letter or digit (e.g. troupe-scheduler)");
  }
  return Status::ok();
}

Result<bool> parseNarrowTo(const std::string& value) {
  if (value == "best") return true;
  if (value == "all") return false;
  return invalidArgument("\"" + value +
                         "\" is not a choice: use best (pass only the node Troupe ranks first) or all "
                         "(pass every node that fits)");
}

namespace {

// "300s", "250ms", "90s": the units parseDuration reads, exact to the millisecond.
std::string formatDuration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

// Amounts as parseGpuAmount reads them back: 8, 2.5, 0.125.
void formatGpuQuota(YAML::Emitter& out, const sched::GpuQuota& quota) {
  if (quota.empty()) out << YAML::Flow;  // "{}": nothing set
  out << YAML::BeginMap;
  if (quota.milli) out << YAML::Key << "gpus" << YAML::Value << sched::gpusText(*quota.milli);
  if (!quota.product_milli.empty()) {
    out << YAML::Key << "products" << YAML::Value << YAML::BeginMap;
    for (const auto& [product, milli] : quota.product_milli)
      out << YAML::Key << product << YAML::Value << sched::gpusText(milli);
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

void formatQueueDefinition(YAML::Emitter& out, const sched::QueueSpec& spec) {
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << spec.name;
  out << YAML::Key << "parent" << YAML::Value << spec.parent;
  out << YAML::Key << "weight" << YAML::Value << spec.weight;
  out << YAML::Key << "guaranteed" << YAML::Value;
  formatGpuQuota(out, spec.guaranteed);
  out << YAML::Key << "limit" << YAML::Value;
  formatGpuQuota(out, spec.limit);
  out << YAML::Key << "preemptible" << YAML::Value << spec.preemptible;
  out << YAML::EndMap;
}

}  // namespace

std::string formatServeConfig(const ServeConfig& c) {
  YAML::Emitter out;
  out.SetDoublePrecision(15);
  out << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << c.listen;
  out << YAML::Key << "maxBodyBytes" << YAML::Value << c.max_body_bytes;
  out << YAML::Key << "logLevel" << YAML::Value << c.log_level;
  out << YAML::Key << "policy" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << c.policy.name;
  out << YAML::Key << "weights" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "pack" << YAML::Value << c.policy.args.troupe.pack_weight;
  out << YAML::Key << "topology" << YAML::Value << c.policy.args.troupe.topology_weight;
  out << YAML::Key << "domains" << YAML::Value << c.policy.args.troupe.domain_weight;
  out << YAML::Key << "balance" << YAML::Value << c.policy.args.troupe.balance_weight;
  out << YAML::Key << "scarcity" << YAML::Value << c.policy.args.troupe.scarcity_weight;
  out << YAML::EndMap << YAML::EndMap;
  out << YAML::Key << "filter" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "narrowTo" << YAML::Value << (c.narrow_to_best ? "best" : "all");
  out << YAML::EndMap;
  out << YAML::Key << "topology" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "preset" << YAML::Value << c.topology_preset;
  out << YAML::Key << "levels" << YAML::Value << YAML::BeginSeq;
  for (const std::string& level : c.topology_levels) out << level;
  out << YAML::EndSeq << YAML::EndMap;
  out << YAML::Key << "gang" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "timeout" << YAML::Value << formatDuration(c.gang.timeout);
  out << YAML::Key << "maxTimeout" << YAML::Value << formatDuration(c.gang.max_timeout);
  out << YAML::Key << "maxGangs" << YAML::Value << c.gang.max_gangs;
  out << YAML::EndMap;
  out << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap;
  // Quoted: YAML 1.1 readers (Helm, PyYAML) take a bare on/off for a boolean.
  out << YAML::Key << "perNodeSeries" << YAML::Value << YAML::DoubleQuoted << c.per_node_series.modeName();
  out << YAML::Key << "perNodeSeriesOffAt" << YAML::Value << c.per_node_series.auto_off_at;
  out << YAML::EndMap;
  out << YAML::Key << "schedulerNames" << YAML::Value << YAML::BeginSeq;
  for (const std::string& name : c.scheduler_names) out << name;
  out << YAML::EndSeq;
  out << YAML::Key << "binder" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "workers" << YAML::Value << c.bind_workers;
  out << YAML::EndMap;
  out << YAML::Key << "dra" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "gpuDrivers" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& name : c.dra.gpu_drivers) out << name;
  out << YAML::EndSeq;
  out << YAML::Key << "gpuDeviceClasses" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& name : c.dra.gpu_device_classes) out << name;
  out << YAML::EndSeq;
  out << YAML::EndMap;
  out << YAML::Key << "learnedNodes" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "maxNodes" << YAML::Value << c.learned_nodes.max_nodes;
  out << YAML::Key << "ttlSeconds" << YAML::Value
      << std::chrono::duration_cast<std::chrono::seconds>(c.learned_nodes.ttl).count();
  out << YAML::EndMap;
  const ServerLimitsConfig& l = c.limits;
  out << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "maxHeaderBytes" << YAML::Value << l.max_header_bytes;
  out << YAML::Key << "maxBodyBytesInFlight" << YAML::Value << l.max_body_bytes_in_flight;
  out << YAML::Key << "maxConnections" << YAML::Value << l.max_connections;
  out << YAML::Key << "headerTimeoutSeconds" << YAML::Value << l.header_timeout_seconds;
  out << YAML::Key << "readTimeoutSeconds" << YAML::Value << l.read_timeout_seconds;
  out << YAML::Key << "idleTimeoutSeconds" << YAML::Value << l.idle_timeout_seconds;
  out << YAML::Key << "writeTimeoutSeconds" << YAML::Value << l.write_timeout_seconds;
  out << YAML::EndMap;
  const QueuesConfig& q = c.queues;
  out << YAML::Key << "queues" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "default" << YAML::Value << q.default_queue;
  out << YAML::Key << "minRuntime" << YAML::Value << formatDuration(q.reclaim.min_runtime);
  out << YAML::Key << "reclaim" << YAML::Value << q.reclaim.enabled;
  out << YAML::Key << "reclaimTimeout" << YAML::Value << formatDuration(q.reclaim.timeout);
  out << YAML::Key << "definitions" << YAML::Value;
  if (q.definitions.empty()) out << YAML::Flow;  // "definitions: []", as the chart writes it
  out << YAML::BeginSeq;
  for (const sched::QueueSpec& spec : q.definitions) formatQueueDefinition(out, spec);
  out << YAML::EndSeq;
  out << YAML::EndMap;
  const DefragConfig& d = c.defrag;
  out << YAML::Key << "defrag" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << d.enabled;
  out << YAML::Key << "interval" << YAML::Value << formatDuration(d.interval);
  out << YAML::Key << "minGpus" << YAML::Value << d.min_gpus;
  out << YAML::Key << "minPending" << YAML::Value << formatDuration(d.min_pending);
  out << YAML::Key << "maxMoves" << YAML::Value << d.max_moves;
  out << YAML::Key << "evict" << YAML::Value << d.evict;
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Result<adapters::PerNodeSeries::Mode> parsePerNodeSeries(const std::string& value) {
  if (value == "auto") return adapters::PerNodeSeries::Mode::kAuto;
  if (value == "on") return adapters::PerNodeSeries::Mode::kOn;
  if (value == "off") return adapters::PerNodeSeries::Mode::kOff;
  return invalidArgument("\"" + value +
                         "\" is not a choice: use auto (per-node series below perNodeSeriesOffAt GPU nodes), "
                         "on or off");
}

Result<ServeConfig> loadServeConfig(const std::string& path) {
  Result<std::string> text = readAll(path);
  if (!text.isOk()) return text.status();
  return parseServeConfig(text.value(), path);
}

Result<std::vector<model::NodeFacts>> parseCluster(const std::string& text, const std::string& source) {
  Result<YAML::Node> doc = parseYaml(text, source);
  if (!doc.isOk()) return doc.status();
  Where w{source};
  const YAML::Node& root = doc.value();
  if (!root.IsMap()) return w.at(root, "nodes", "the file must be a mapping with a 'nodes' list");
  if (Status s = checkKeys(w, root, "", {"nodes"}); !s.isOk()) return s;
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsSequence()) return w.at(root, "nodes", "must be a list of nodes");
  std::vector<model::NodeFacts> out;
  std::set<std::string> names;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const YAML::Node n = nodes[i];
    const std::string key = "nodes[" + std::to_string(i) + "]";
    if (Status s = checkKeys(
            w, n, key,
            {"name", "gpus", "labels", "annotations", "cpu", "memory", "pods", "replicas", "unschedulable"});
        !s.isOk()) {
      return s;
    }
    model::NodeFacts f;
    if (!n["name"]) return w.at(n, key + ".name", "is required");
    Result<std::string> name = scalar<std::string>(w, n["name"], key + ".name", "a node name");
    if (!name.isOk()) return name.status();
    if (n["gpus"]) {
      Result<int> g = scalar<int>(w, n["gpus"], key + ".gpus", "a whole number of GPUs (0-64)");
      if (!g.isOk()) return g.status();
      if (g.value() < 0 || g.value() > 64) return w.at(n["gpus"], key + ".gpus", "must be 0 to 64");
      f.allocatable_gpus = std::to_string(g.value());
    }
    Result<model::StringMap> labels = stringMap(w, n["labels"], key + ".labels");
    if (!labels.isOk()) return labels.status();
    f.labels = labels.value();
    Result<model::StringMap> annotations = stringMap(w, n["annotations"], key + ".annotations");
    if (!annotations.isOk()) return annotations.status();
    f.annotations = annotations.value();
    for (auto [k, target] : {std::pair{"cpu", &f.cpu}, {"memory", &f.memory}, {"pods", &f.pods}}) {
      if (!n[k]) continue;
      Result<std::string> v = scalar<std::string>(w, n[k], key + "." + k, "a Kubernetes quantity");
      if (!v.isOk()) return v.status();
      *target = v.value();
    }
    if (n["unschedulable"]) {
      Result<bool> u = scalar<bool>(w, n["unschedulable"], key + ".unschedulable", "true or false");
      if (!u.isOk()) return u.status();
      f.unschedulable = u.value();
    }
    int replicas = 1;
    if (n["replicas"]) {
      Result<int> r = scalar<int>(w, n["replicas"], key + ".replicas", "a whole number >= 1");
      if (!r.isOk()) return r.status();
      if (r.value() < 1 || r.value() > 100000)
        return w.at(n["replicas"], key + ".replicas", "must be 1 to 100000");
      replicas = r.value();
    }
    for (int r = 0; r < replicas; ++r) {
      model::NodeFacts copy = f;
      copy.name = replicas == 1 ? name.value() : name.value() + "-" + std::to_string(r);
      if (!names.insert(copy.name).second)
        return w.at(n["name"], key + ".name", "node " + copy.name + " is listed twice");
      copy.labels["kubernetes.io/hostname"] = copy.name;
      out.push_back(std::move(copy));
    }
  }
  return out;
}

Result<std::vector<model::NodeFacts>> loadCluster(const std::string& path) {
  Result<std::string> text = readAll(path);
  if (!text.isOk()) return text.status();
  return parseCluster(text.value(), path);
}

}  // namespace troupe::config
