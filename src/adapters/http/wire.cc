#include "adapters/http/wire.h"

#include "troupe/common/strings.h"

namespace troupe::http {
namespace {

Status badRequest(const std::string& what) { return invalidArgument(what); }

std::string str(const Json* v) { return v && v->is_string() ? v->get<std::string>() : std::string(); }

// A Kubernetes quantity may arrive as a string ("8") or, from hand-written clients, a number.
std::string quantityText(const Json* v) {
  if (!v) return {};
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
  if (v->is_number()) return v->dump();
  return {};
}

sched::StringMap stringMap(const Json* v) {
  sched::StringMap out;
  if (!v || !v->is_object()) return out;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it.value().is_string()) out.emplace(it.key(), it.value().get<std::string>());
  }
  return out;
}

Result<sched::ContainerResources> containerFromJson(const Json& c, const std::string& where) {
  sched::ContainerResources out;
  if (!c.is_object()) return badRequest(where + " must be an object");
  if (const Json* res = field(c, "resources"); res && res->is_object()) {
    for (const char* kind : {"requests", "limits"}) {
      const Json* m = field(*res, kind);
      if (!m || m->is_null()) continue;
      if (!m->is_object()) return badRequest(where + ".resources." + kind + " must be an object");
      auto& target = std::string(kind) == "requests" ? out.requests : out.limits;
      for (auto it = m->begin(); it != m->end(); ++it) {
        std::string q = quantityText(&it.value());
        if (q.empty()) {
          return badRequest(where + ".resources." + kind + "[\"" + it.key() +
                            "\"] must be a quantity string such as \"4\"");
        }
        target.emplace(it.key(), q);
      }
    }
  }
  out.restartable_init = str(field(c, "restartPolicy")) == "Always";
  return out;
}

// Builds the same document as Json::parse, faster. nlohmann's own DOM parser inserts each
// member into its parent as soon as the key is read; an ordered_json object is a vector of
// pair<const string, json>, which cannot be moved, so every growth of that vector deep-copies
// the members (and their whole subtrees) already there. Here an object's members are
// collected first and moved into an object reserved to the right size, so nothing is copied.
// Duplicate keys keep their first position and their last value, as with Json::parse.
class DomBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return put(Json(v)); }
  bool number_float(number_float_t v, const string_t& /*text*/) { return put(Json(v)); }
  bool string(string_t& v) { return put(Json(std::move(v))); }
  bool binary(binary_t& v) { return put(Json::binary(std::move(v))); }
  bool start_object(std::size_t /*size*/) {
    frames_.push_back({true, members_.size(), 0});
    return true;
  }
  bool key(string_t& k) {
    Frame& f = frames_.back();
    for (size_t i = f.start; i < members_.size(); ++i) {
      if (members_[i].first == k) {
        f.pending = i;  // a repeated key: the later value replaces the earlier one in place
        return true;
      }
    }
    f.pending = members_.size();
    members_.emplace_back(std::move(k), Json());
    return true;
  }
  bool end_object() {
    const Frame f = frames_.back();
    frames_.pop_back();
    Json object(Json::value_t::object);
    auto& map = object.get_ref<Json::object_t&>();
    map.reserve(members_.size() - f.start);
    for (size_t i = f.start; i < members_.size(); ++i) {
      map.emplace_back(std::move(members_[i].first), std::move(members_[i].second));
    }
    members_.erase(members_.begin() + static_cast<std::ptrdiff_t>(f.start), members_.end());
    return put(std::move(object));
  }
  bool start_array(std::size_t /*size*/) {
    frames_.push_back({false, items_.size(), 0});
    return true;
  }
  bool end_array() {
    const Frame f = frames_.back();
    frames_.pop_back();
    Json array(Json::value_t::array);
    auto& vec = array.get_ref<Json::array_t&>();
    vec.reserve(items_.size() - f.start);
    for (size_t i = f.start; i < items_.size(); ++i) vec.push_back(std::move(items_[i]));
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(f.start), items_.end());
    return put(std::move(array));
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) {
    return false;
  }

  Json& root() { return root_; }

 private:
  struct Frame {
    bool object;
    size_t start;    // first member (object) or item (array) of this frame
    size_t pending;  // object: the member the next value belongs to
  };
  bool put(Json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
    } else if (frames_.back().object) {
      members_[frames_.back().pending].second = std::move(v);
    } else {
      items_.push_back(std::move(v));
    }
    return true;
  }

  Json root_;
  std::vector<Frame> frames_;
  std::vector<std::pair<std::string, Json>> members_;  // open objects' members, innermost last
  std::vector<Json> items_;                            // open arrays' items, innermost last
};

Result<Json> parseBody(std::string_view body) {
  if (body.empty()) return badRequest("empty request body; expected a JSON object");
  DomBuilder builder;
  if (!Json::sax_parse(body.begin(), body.end(), &builder)) {
    return badRequest("request body is not valid JSON (" + std::to_string(body.size()) + " bytes)");
  }
  Json doc = std::move(builder.root());
  if (!doc.is_object()) return badRequest("request body must be a JSON object");
  return doc;
}

// The document is ours (parsed from the body), so values may be moved out of it.
Json* mutableField(Json& object, std::string_view name) { return const_cast<Json*>(field(object, name)); }

// Appends `text` as a JSON string, byte for byte as Json::dump() writes it: plain printable
// ASCII is copied, anything else goes through the library's escaping (and its UTF-8 check).
void appendString(std::string& out, const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x7f) {
      out += Json(text).dump();
      return;
    }
  }
  out += '"';
  out += text;
  out += '"';
}

// A string-to-string map as a JSON object (Json(map).dump(): std::map order), or null when empty.
void appendMapOrNull(std::string& out, const std::map<std::string, std::string>& map) {
  if (map.empty()) {
    out += "null";
    return;
  }
  out += '{';
  bool first = true;
  for (const auto& [key, value] : map) {
    if (!first) out += ',';
    first = false;
    appendString(out, key);
    out += ':';
    appendString(out, value);
  }
  out += '}';
}

}  // namespace

const Json* field(const Json& object, std::string_view name) {
  if (!object.is_object()) return nullptr;
  if (auto it = object.find(name); it != object.end()) return &*it;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (equalsIgnoreCase(it.key(), name)) return &it.value();
  }
  return nullptr;
}

Result<sched::PodFacts> podFromJson(const Json& pod) {
  sched::PodFacts out;
  if (!pod.is_object()) return badRequest("Pod must be a v1.Pod object");
  const Json* meta = field(pod, "metadata");
  if (!meta || !meta->is_object()) return badRequest("Pod.metadata is missing");
  out.name = str(field(*meta, "name"));
  out.ns = str(field(*meta, "namespace"));
  out.uid = str(field(*meta, "uid"));
  out.labels = stringMap(field(*meta, "labels"));
  out.annotations = stringMap(field(*meta, "annotations"));
  if (out.name.empty()) return badRequest("Pod.metadata.name is missing");
  if (out.ns.empty()) out.ns = "default";
  if (const Json* spec = field(pod, "spec"); spec && spec->is_object()) {
    for (const char* list : {"containers", "initContainers"}) {
      const Json* cs = field(*spec, list);
      if (!cs || cs->is_null()) continue;
      if (!cs->is_array()) return badRequest(std::string("Pod.spec.") + list + " must be an array");
      for (size_t i = 0; i < cs->size(); ++i) {
        Result<sched::ContainerResources> c =
            containerFromJson((*cs)[i], std::string("Pod.spec.") + list + "[" + std::to_string(i) + "]");
        if (!c.isOk()) return c.status();
        (std::string(list) == "containers" ? out.containers : out.init_containers).push_back(c.value());
      }
    }
    if (const Json* p = field(*spec, "priority"); p && p->is_number_integer())
      out.priority = p->get<int64_t>();
    out.node_name = str(field(*spec, "nodeName"));
  }
  if (const Json* status = field(pod, "status"); status && status->is_object()) {
    out.phase = str(field(*status, "phase"));
  }
  return out;
}

Result<model::NodeFacts> nodeFromJson(const Json& node) {
  model::NodeFacts out;
  if (!node.is_object()) return badRequest("each node must be a v1.Node object");
  const Json* meta = field(node, "metadata");
  if (!meta || !meta->is_object()) return badRequest("node without metadata");
  out.name = str(field(*meta, "name"));
  if (out.name.empty()) return badRequest("node without metadata.name");
  out.labels = stringMap(field(*meta, "labels"));
  out.annotations = stringMap(field(*meta, "annotations"));
  if (const Json* spec = field(node, "spec"); spec && spec->is_object()) {
    if (const Json* u = field(*spec, "unschedulable"); u && u->is_boolean())
      out.unschedulable = u->get<bool>();
  }
  if (const Json* status = field(node, "status"); status && status->is_object()) {
    const Json* alloc = field(*status, "allocatable");
    const Json* cap = field(*status, "capacity");
    auto pick = [&](const char* key) {
      std::string v = alloc ? quantityText(field(*alloc, key)) : std::string();
      if (v.empty() && cap) v = quantityText(field(*cap, key));
      return v;
    };
    out.allocatable_gpus = pick(model::kGpuResource);
    // CPU, memory and pods stay with kube-scheduler in the live path; not tracked here.
  }
  return out;
}

Result<ExtenderArgs> decodeExtenderArgs(std::string_view body) {
  Result<Json> doc = parseBody(body);
  if (!doc.isOk()) return doc.status();
  ExtenderArgs args;
  const Json* pod = field(doc.value(), "Pod");
  if (!pod || pod->is_null()) return badRequest("ExtenderArgs.Pod is missing");
  Result<sched::PodFacts> facts = podFromJson(*pod);
  if (!facts.isOk()) return badRequest("ExtenderArgs." + facts.status().message());
  args.pod = std::move(facts).value();

  Json* names = mutableField(doc.value(), "NodeNames");
  Json* nodes = mutableField(doc.value(), "Nodes");
  if (names && !names->is_null()) {
    if (!names->is_array()) return badRequest("ExtenderArgs.NodeNames must be an array of strings");
    args.node_names.reserve(names->size());
    for (Json& e : *names) {
      if (!e.is_string()) return badRequest("ExtenderArgs.NodeNames must contain only strings");
      args.node_names.push_back(std::move(e.get_ref<std::string&>()));
    }
    args.node_cache_mode = true;
  } else if (nodes && !nodes->is_null()) {
    Json* items = mutableField(*nodes, "items");
    if (!items || !items->is_array())
      return badRequest("ExtenderArgs.Nodes.items must be an array of v1.Node");
    args.node_cache_mode = false;
    args.node_names.reserve(items->size());
    args.nodes.reserve(items->size());
    args.node_objects.reserve(items->size());
    for (size_t i = 0; i < items->size(); ++i) {
      Result<model::NodeFacts> n = nodeFromJson((*items)[i]);
      if (!n.isOk()) {
        return badRequest("ExtenderArgs.Nodes.items[" + std::to_string(i) + "]: " + n.status().message());
      }
      args.node_names.push_back(n.value().name);
      args.nodes.push_back(std::move(n).value());
      args.node_objects.push_back(std::move((*items)[i]));
    }
  } else {
    return badRequest("ExtenderArgs has neither NodeNames nor Nodes; one must be set");
  }
  return args;
}

std::string encodeFilterResult(const ExtenderArgs& args, const sched::FilterResult& result) {
  // Written straight into one string: the same bytes as building an OrderedJson
  // {Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error} and dumping it, without
  // copying every survivor (a whole v1.Node in full mode) into a temporary document.
  std::string out;
  out.reserve(256 + result.passed.size() * 24 + (result.failed.size() + result.unresolvable.size()) * 96);
  out += "{\"Nodes\":";
  if (args.node_cache_mode) {
    out += "null,\"NodeNames\":[";  // [] (not null) when nothing passes
    for (size_t i = 0; i < result.passed.size(); ++i) {
      if (i) out += ',';
      appendString(out, result.passed[i]);
    }
    out += ']';
  } else {
    out += "{\"metadata\":{},\"items\":[";
    size_t next = 0;
    // `passed` keeps the request order, so one forward walk finds each object.
    for (size_t i = 0; i < args.node_names.size() && next < result.passed.size(); ++i) {
      if (args.node_names[i] == result.passed[next]) {
        if (next) out += ',';
        out += args.node_objects[i].dump();
        ++next;
      }
    }
    out += "]},\"NodeNames\":null";
  }
  out += ",\"FailedNodes\":";
  appendMapOrNull(out, result.failed);
  out += ",\"FailedAndUnresolvableNodes\":";
  appendMapOrNull(out, result.unresolvable);
  out += ",\"Error\":\"\"}";
  return out;
}

std::string encodeFilterError(const std::string& message) {
  OrderedJson out = {{"Nodes", nullptr},
                     {"NodeNames", nullptr},
                     {"FailedNodes", nullptr},
                     {"FailedAndUnresolvableNodes", nullptr},
                     {"Error", message}};
  return out.dump();
}

std::string encodeHostPriorityList(const std::vector<sched::HostScore>& scores) {
  // The bytes of an OrderedJson array of {"Host","Score"} objects, written directly.
  std::string out;
  out.reserve(2 + scores.size() * 40);
  out += '[';
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i) out += ',';
    out += "{\"Host\":";
    appendString(out, scores[i].host);
    out += ",\"Score\":";
    out += std::to_string(scores[i].score);
    out += '}';
  }
  out += ']';
  return out;
}

Result<BindingArgs> decodeBindingArgs(std::string_view body) {
  Result<Json> doc = parseBody(body);
  if (!doc.isOk()) return doc.status();
  BindingArgs b;
  b.pod_name = str(field(doc.value(), "PodName"));
  b.pod_namespace = str(field(doc.value(), "PodNamespace"));
  b.pod_uid = str(field(doc.value(), "PodUID"));
  b.node = str(field(doc.value(), "Node"));
  for (auto [value, name] : {std::pair{&b.pod_name, "PodName"},
                             {&b.pod_namespace, "PodNamespace"},
                             {&b.pod_uid, "PodUID"},
                             {&b.node, "Node"}}) {
    if (value->empty()) return badRequest(std::string("ExtenderBindingArgs.") + name + " is missing");
  }
  return b;
}

std::string encodeBindingResult(const std::string& error) { return OrderedJson{{"Error", error}}.dump(); }

Result<PreemptionArgs> decodePreemptionArgs(std::string_view body) {
  Result<Json> doc = parseBody(body);
  if (!doc.isOk()) return doc.status();
  PreemptionArgs args;
  const Json* pod = field(doc.value(), "Pod");
  if (!pod || pod->is_null()) return badRequest("ExtenderPreemptionArgs.Pod is missing");
  Result<sched::PodFacts> facts = podFromJson(*pod);
  if (!facts.isOk()) return badRequest("ExtenderPreemptionArgs." + facts.status().message());
  args.pod = std::move(facts).value();
  const Json* meta = field(doc.value(), "NodeNameToMetaVictims");
  const Json* full = field(doc.value(), "NodeNameToVictims");
  const Json* map = nullptr;
  if (meta && !meta->is_null()) {
    map = meta;
    args.meta = true;
  } else if (full && !full->is_null()) {
    map = full;
    args.meta = false;
  } else {
    return args;  // no candidates
  }
  if (!map->is_object())
    return badRequest("ExtenderPreemptionArgs victims must be a map of node name to victims");
  for (auto it = map->begin(); it != map->end(); ++it) {
    const std::string where = "ExtenderPreemptionArgs victims[\"" + it.key() + "\"]";
    std::vector<std::string>& uids = args.victims[it.key()];
    if (it.value().is_null()) continue;
    const Json* pods = field(it.value(), "Pods");
    if (pods && pods->is_array()) {
      for (const Json& p : *pods) {
        std::string uid = args.meta
                              ? str(field(p, "UID"))
                              : str(field(p, "metadata") ? field(*field(p, "metadata"), "uid") : nullptr);
        if (uid.empty()) return badRequest(where + ": a victim without a UID");
        uids.push_back(uid);
      }
    }
    if (const Json* pdb = field(it.value(), "NumPDBViolations"); pdb && pdb->is_number_integer()) {
      args.pdb_violations[it.key()] = pdb->get<int64_t>();
    }
  }
  return args;
}

std::string encodePreemptionResult(const std::map<std::string, std::vector<std::string>>& victims,
                                   const std::map<std::string, int64_t>& pdb_violations) {
  OrderedJson map = OrderedJson::object();
  for (const auto& [node, uids] : victims) {
    OrderedJson pods = OrderedJson::array();
    for (const std::string& uid : uids) pods.push_back({{"UID", uid}});
    auto pdb = pdb_violations.find(node);
    map[node] = {{"Pods", std::move(pods)},
                 {"NumPDBViolations", pdb == pdb_violations.end() ? 0 : pdb->second}};
  }
  return OrderedJson{{"NodeNameToMetaVictims", std::move(map)}}.dump();
}

std::string encodeHttpError(const std::string& message) { return Json{{"error", message}}.dump(); }

}  // namespace troupe::http
