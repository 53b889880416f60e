#include "adapters/yaml/config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include "troupe/sched/gang.h"

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

}  // namespace

Result<ServeConfig> parseServeConfig(const std::string& text, const std::string& source) {
  Result<YAML::Node> doc = parseYaml(text, source);
  if (!doc.isOk()) return doc.status();
  ServeConfig c;
  const YAML::Node& root = doc.value();
  if (root.IsNull()) return c;
  Where w{source};
  if (Status s = checkKeys(w, root, "",
                           {"listen", "maxBodyBytes", "logLevel", "policy", "filter", "topology", "gang",
                            "metrics", "schedulerNames", "learnedNodes", "limits", "binder"});
      !s.isOk())
    return s;
  if (root["listen"]) {
    Result<std::string> v = scalar<std::string>(w, root["listen"], "listen", "HOST:PORT");
    if (!v.isOk()) return v.status();
    c.listen = v.value();
  }
  if (root["maxBodyBytes"]) {
    Result<int64_t> v = scalar<int64_t>(w, root["maxBodyBytes"], "maxBodyBytes", "a number of bytes");
    if (!v.isOk()) return v.status();
    if (v.value() < 1024) return w.at(root["maxBodyBytes"], "maxBodyBytes", "must be at least 1024");
    if (v.value() > (int64_t{1} << 30)) {
      return w.at(root["maxBodyBytes"], "maxBodyBytes", "must be at most 1073741824 (1 GiB)");
    }
    c.max_body_bytes = static_cast<size_t>(v.value());
  }
  if (root["logLevel"]) {
    Result<std::string> v =
        scalar<std::string>(w, root["logLevel"], "logLevel", "debug, info, warn or error");
    if (!v.isOk()) return v.status();
    if (v.value() != "debug" && v.value() != "info" && v.value() != "warn" && v.value() != "error") {
      return w.at(root["logLevel"], "logLevel", "must be debug, info, warn or error");
    }
    c.log_level = v.value();
  }
  if (const YAML::Node policy = root["policy"]) {
    if (Status s = checkKeys(w, policy, "policy", {"name", "weights"}); !s.isOk()) return s;
    if (policy["name"]) {
      Result<std::string> v = scalar<std::string>(w, policy["name"], "policy.name", "a policy name");
      if (!v.isOk()) return v.status();
      Result<sched::PolicyKind> kind = sched::parsePolicy(v.value());
      if (!kind.isOk()) return w.at(policy["name"], "policy.name", kind.status().message());
      c.policy.kind = kind.value();
    }
    if (const YAML::Node weights = policy["weights"]) {
      if (Status s = checkKeys(w, weights, "policy.weights", {"pack", "topology", "domains"}); !s.isOk())
        return s;
      for (auto [key, target] : {std::pair{"pack", &c.policy.pack_weight},
                                 {"topology", &c.policy.topology_weight},
                                 {"domains", &c.policy.domain_weight}}) {
        if (!weights[key]) continue;
        Result<double> v =
            scalar<double>(w, weights[key], std::string("policy.weights.") + key, "a number >= 0");
        if (!v.isOk()) return v.status();
        *target = v.value();
      }
      std::vector<std::string> errors = sched::validatePolicy(c.policy);
      if (!errors.empty()) return w.at(weights, "policy.weights", errors.front());
    }
  }
  if (const YAML::Node filter = root["filter"]) {
    if (Status st = checkKeys(w, filter, "filter", {"narrowTo"}); !st.isOk()) return st;
    if (filter["narrowTo"]) {
      Result<std::string> v = scalar<std::string>(w, filter["narrowTo"], "filter.narrowTo", "best or all");
      if (!v.isOk()) return v.status();
      Result<bool> narrow = parseNarrowTo(v.value());
      if (!narrow.isOk()) return w.at(filter["narrowTo"], "filter.narrowTo", narrow.status().message());
      c.narrow_to_best = narrow.value();
    }
  }
  if (const YAML::Node limits = root["limits"]) {
    if (Status s = parseLimits(w, limits, &c.limits); !s.isOk()) return s;
  }
  if (const YAML::Node m = root["metrics"]) {
    if (Status s = parseMetrics(w, m, &c.per_node_series); !s.isOk()) return s;
  }
  if (const YAML::Node topology = root["topology"]) {
    if (Status s = checkKeys(w, topology, "topology", {"levels"}); !s.isOk()) return s;
    if (const YAML::Node levels = topology["levels"]) {
      if (!levels.IsSequence()) {
        return w.at(levels, "topology.levels",
                    "must be a list of node label keys, widest first, e.g. [topology.kubernetes.io/zone, "
                    "troupe.dev/block, troupe.dev/rack]");
      }
      c.topology_levels.clear();
      for (size_t i = 0; i < levels.size(); ++i) {
        const std::string key = "topology.levels[" + std::to_string(i) + "]";
        Result<std::string> v = scalar<std::string>(w, levels[i], key, "a node label key");
        if (!v.isOk()) return v.status();
        c.topology_levels.push_back(v.value());
        std::vector<std::string> errors = model::validateTopologyLevels(c.topology_levels);
        if (!errors.empty()) return w.at(levels[i], key, errors.front());
      }
    }
  }
  if (const YAML::Node gang = root["gang"]) {
    if (Status s = checkKeys(w, gang, "gang", {"timeout", "maxTimeout", "maxGangs"}); !s.isOk()) return s;
    for (auto [key, target] : {std::pair{"timeout", &c.gang_timeout}, {"maxTimeout", &c.gang_max_timeout}}) {
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
    if (c.gang_timeout > c.gang_max_timeout) {
      return w.at(gang, "gang.timeout",
                  "the default gang timeout must not exceed gang.maxTimeout (which must stay below "
                  "kube-scheduler's extender httpTimeout)");
    }
    if (gang["maxGangs"]) {
      Result<int64_t> v = boundedInt(w, gang["maxGangs"], "gang.maxGangs", "a number of gangs", 1, 1000000,
                                     "must be from 1 to 1000000");
      if (!v.isOk()) return v.status();
      c.max_gangs = static_cast<size_t>(v.value());
    }
  }
  if (const YAML::Node binder = root["binder"]) {
    if (Status st = checkKeys(w, binder, "binder", {"workers"}); !st.isOk()) return st;
    if (binder["workers"]) {
      Result<int64_t> v =
          boundedInt(w, binder["workers"], "binder.workers", "a number of concurrent Bindings (1-256)", 1,
                     256, "must be 1 to 256 (concurrent Bindings in flight)");
      if (!v.isOk()) return v.status();
      c.bind_workers = static_cast<int>(v.value());
    }
  }
  if (const YAML::Node names = root["schedulerNames"]) {
    if (!names.IsSequence() || names.size() == 0) {
      return w.at(names, "schedulerNames",
                  "must be a non-empty list of kube-scheduler profile names, e.g. [troupe-scheduler]");
    }
    c.scheduler_names.clear();
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string key = "schedulerNames[" + std::to_string(i) + "]";
      Result<std::string> v = scalar<std::string>(w, names[i], key, "a scheduler profile name");
      if (!v.isOk()) return v.status();
      if (Status st = checkSchedulerName(v.value()); !st.isOk()) return w.at(names[i], key, st.message());
      c.scheduler_names.push_back(v.value());
    }
  }
  if (const YAML::Node learned = root["learnedNodes"]) {
    if (Status st = checkKeys(w, learned, "learnedNodes", {"maxNodes", "ttlSeconds"}); !st.isOk()) return st;
    if (learned["maxNodes"]) {
      Result<int64_t> v = boundedInt(w, learned["maxNodes"], "learnedNodes.maxNodes",
                                     "a number of nodes (1-1000000)", 1, 1000000, "must be 1 to 1000000");
      if (!v.isOk()) return v.status();
      c.learned_max_nodes = static_cast<size_t>(v.value());
    }
    if (learned["ttlSeconds"]) {
      Result<int64_t> v =
          boundedInt(w, learned["ttlSeconds"], "learnedNodes.ttlSeconds", "a number of seconds (1-31536000)",
                     1, 31536000, "must be 1 to 31536000 (a year)");
      if (!v.isOk()) return v.status();
      c.learned_ttl_seconds = v.value();
    }
  }
  return c;
}

Status checkSchedulerName(const std::string& name) {
  // A DNS subdomain (RFC 1123), as Kubernetes validates spec.schedulerName.
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
  if (!ok) {
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

}  // namespace

std::string formatServeConfig(const ServeConfig& c) {
  YAML::Emitter out;
  out.SetDoublePrecision(15);
  out << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << c.listen;
  out << YAML::Key << "maxBodyBytes" << YAML::Value << c.max_body_bytes;
  out << YAML::Key << "logLevel" << YAML::Value << c.log_level;
  out << YAML::Key << "policy" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << sched::policyName(c.policy.kind);
  out << YAML::Key << "weights" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "pack" << YAML::Value << c.policy.pack_weight;
  out << YAML::Key << "topology" << YAML::Value << c.policy.topology_weight;
  out << YAML::Key << "domains" << YAML::Value << c.policy.domain_weight;
  out << YAML::EndMap << YAML::EndMap;
  out << YAML::Key << "filter" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "narrowTo" << YAML::Value << (c.narrow_to_best ? "best" : "all");
  out << YAML::EndMap;
  out << YAML::Key << "topology" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "levels" << YAML::Value << YAML::BeginSeq;
  for (const std::string& level : c.topology_levels) out << level;
  out << YAML::EndSeq << YAML::EndMap;
  out << YAML::Key << "gang" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "timeout" << YAML::Value << formatDuration(c.gang_timeout);
  out << YAML::Key << "maxTimeout" << YAML::Value << formatDuration(c.gang_max_timeout);
  out << YAML::Key << "maxGangs" << YAML::Value << c.max_gangs;
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
  out << YAML::Key << "learnedNodes" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "maxNodes" << YAML::Value << c.learned_max_nodes;
  out << YAML::Key << "ttlSeconds" << YAML::Value << c.learned_ttl_seconds;
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
