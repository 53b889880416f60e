#include "adapters/http/wire.h"

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>

#include "adapters/http/json_scanner.h"
#include "troupe/common/strings.h"
#include "troupe/model/pod_contract.h"

namespace troupe::http {

using adapters::field;
using adapters::nodeFromJson;
using adapters::podFromJson;
using adapters::quantityText;
using adapters::textOf;

namespace {

Status badRequest(const std::string& what) { return invalidArgument(what); }

Status tooDeep() {
  return badRequest("request body nests JSON objects and arrays deeper than " +
                    std::to_string(kMaxJsonDepth) + " levels, the limit (Kubernetes objects need far fewer)");
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
    if (frames_.size() >= kMaxJsonDepth) return refuseDeeper();
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
    if (frames_.size() >= kMaxJsonDepth) return refuseDeeper();
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
  // The parse stopped at nesting deeper than kMaxJsonDepth.
  bool tooDeep() const { return too_deep_; }

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

  bool refuseDeeper() {
    too_deep_ = true;
    return false;
  }

  Json root_;
  bool too_deep_ = false;
  std::vector<Frame> frames_;
  std::vector<std::pair<std::string, Json>> members_;  // open objects' members, innermost last
  std::vector<Json> items_;                            // open arrays' items, innermost last
};

Result<Json> parseBody(std::string_view body) {
  if (body.empty()) return badRequest("empty request body; expected a JSON object");
  DomBuilder builder;
  if (!Json::sax_parse(body.begin(), body.end(), &builder)) {
    if (builder.tooDeep()) return tooDeep();
    return badRequest("request body is not valid JSON (" + std::to_string(body.size()) + " bytes)");
  }
  Json doc = std::move(builder.root());
  if (!doc.is_object()) return badRequest("request body must be a JSON object");
  return doc;
}

// Json::dump() that never throws: invalid UTF-8 (say, a message cut inside a character)
// becomes U+FFFD instead of an exception.
std::string dumpText(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Appends `text` as a JSON string, byte for byte as Json::dump() writes it: plain printable
// ASCII is copied, anything else goes through the library's escaping (and its UTF-8 check).
void appendString(std::string& out, const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x7f) {
      out += dumpText(Json(text));
      return;
    }
  }
  out += '"';
  out += text;
  out += '"';
}

// Node -> reason as a JSON object in rejection order (Go reads it into a map), or null when
// empty. Each distinct reason is escaped once.
void appendReasonsOrNull(std::string& out, const sched::NodeReasons& reasons) {
  if (reasons.empty()) {
    out += "null";
    return;
  }
  std::vector<std::string> quoted;
  quoted.reserve(reasons.reasons().size());
  for (const std::string& r : reasons.reasons()) {
    quoted.emplace_back();
    appendString(quoted.back(), r);
  }
  out += '{';
  bool first = true;
  for (const sched::NodeReasons::Entry& e : reasons.entries()) {
    if (!first) out += ',';
    first = false;
    appendString(out, e.node);
    out += ':';
    out += quoted[e.reason];
  }
  out += '}';
}

// --- ExtenderArgs, read in place -------------------------------------------------------------
// A names-only request is mostly node names, a full-node one mostly node objects that Troupe
// reads a few fields of and hands back unchanged. Neither needs a document: JsonScanner
// validates the body, the few fields are read as they pass, each node object is kept as its
// own bytes, and only the Pod goes through the DOM (podFromJson). Every reader below gives
// what the DOM path (field(), textOf(), stringMap(), quantityText(), nodeFromJson()) would.

// field()'s choice among an object's members, made while streaming: the member named exactly
// `name` (its last value: a repeated key keeps its first position and last value in the
// document), else the first spelling that matches case-insensitively (its last value).
template <class T>
class Pick {
 public:
  // Where the value of member `key` goes when field(object, name) could choose it, else
  // nullptr (the caller skips the value). A repeated key starts from a fresh T.
  T* slot(std::string_view key, std::string_view name) {
    if (key == name) return &exact_.emplace();
    if (!equalsIgnoreCase(key, name)) return nullptr;
    if (folded_ && key != folded_key_) return nullptr;  // an earlier spelling is the one chosen
    folded_key_.assign(key);
    return &folded_.emplace();
  }
  T* get() { return exact_ ? &*exact_ : folded_ ? &*folded_ : nullptr; }

 private:
  std::optional<T> exact_, folded_;
  std::string folded_key_;
};

// Each reader consumes exactly one value and returns false only when the body is not valid
// JSON; a value of an unexpected type is passed over and reads as absent, as in the DOM path.

bool readText(JsonScanner& in, std::string* out) {  // textOf()
  if (in.peek() != '"') return in.skip();
  std::string_view v;
  std::string scratch;
  if (!in.readString(&v, &scratch)) return false;
  out->assign(v);
  return true;
}

bool readQuantity(JsonScanner& in, std::string* out) {  // quantityText()
  const char c = in.peek();
  if (c == '"') return readText(in, out);
  const size_t start = in.pos();
  if (!in.skip()) return false;
  if (c == '-' || (c >= '0' && c <= '9')) {
    // Rare (hand-written clients): the library's own text for the number (already validated;
    // a failure would read as discarded, never throw).
    const Json number = Json::parse(in.text().substr(start, in.pos() - start), nullptr, false);
    *out = quantityText(&number);
  }
  return true;
}

bool readFlag(JsonScanner& in, bool* out) {  // is_boolean() && get<bool>()
  *out = in.peek() == 't';
  return in.skip();
}

bool readStringMap(JsonScanner& in, sched::StringMap* out) {  // stringMap()
  if (in.peek() != '{') return in.skip();
  in.enterObject();
  std::string_view key, value;
  std::string key_scratch, value_scratch;
  while (in.nextKey(&key, &key_scratch)) {
    if (in.peek() == '"') {
      if (!in.readString(&value, &value_scratch)) return false;
      out->insert_or_assign(std::string(key), std::string(value));
    } else {
      if (!in.skip()) return false;
      out->erase(std::string(key));  // a repeated key whose last value is not a string
    }
  }
  return in.ok();
}

// Reads the members of an object value with `member(key)`, which consumes each value; any
// other value is passed over. Returns whether the value was an object, through `object`.
template <class F>
bool readObject(JsonScanner& in, F&& member, bool* object = nullptr) {
  if (in.peek() != '{') return in.skip();
  if (object) *object = true;
  in.enterObject();
  std::string_view key;
  std::string scratch;
  while (in.nextKey(&key, &scratch)) {
    if (!member(key)) return false;
  }
  return in.ok();
}

struct ResourcesRead {  // status.allocatable or status.capacity
  Pick<std::string> gpus;
};
struct MetadataRead {
  bool object = false;
  Pick<std::string> name;
  Pick<sched::StringMap> labels, annotations;
};
struct SpecRead {
  Pick<bool> unschedulable;
};
struct StatusRead {
  Pick<ResourcesRead> allocatable, capacity;
};
struct NodeRead {
  bool object = false;
  Pick<MetadataRead> metadata;
  Pick<SpecRead> spec;
  Pick<StatusRead> status;
};

bool readResources(JsonScanner& in, ResourcesRead* out) {
  return readObject(in, [&](std::string_view key) {
    std::string* gpus = out->gpus.slot(key, model::kGpuResource);
    return gpus ? readQuantity(in, gpus) : in.skip();
  });
}

bool readNode(JsonScanner& in, NodeRead* out) {
  auto metadata = [&](MetadataRead* m) {
    return readObject(
        in,
        [&](std::string_view key) {
          if (std::string* name = m->name.slot(key, "name")) return readText(in, name);
          if (sched::StringMap* labels = m->labels.slot(key, "labels")) return readStringMap(in, labels);
          if (sched::StringMap* notes = m->annotations.slot(key, "annotations"))
            return readStringMap(in, notes);
          return in.skip();
        },
        &m->object);
  };
  auto spec = [&](SpecRead* s) {
    return readObject(in, [&](std::string_view key) {
      bool* flag = s->unschedulable.slot(key, "unschedulable");
      return flag ? readFlag(in, flag) : in.skip();
    });
  };
  auto status = [&](StatusRead* s) {
    return readObject(in, [&](std::string_view key) {
      if (ResourcesRead* r = s->allocatable.slot(key, "allocatable")) return readResources(in, r);
      if (ResourcesRead* r = s->capacity.slot(key, "capacity")) return readResources(in, r);
      return in.skip();
    });
  };
  return readObject(
      in,
      [&](std::string_view key) {
        if (MetadataRead* m = out->metadata.slot(key, "metadata")) return metadata(m);
        if (SpecRead* sp = out->spec.slot(key, "spec")) return spec(sp);
        if (StatusRead* st = out->status.slot(key, "status")) return status(st);
        return in.skip();
      },
      &out->object);
}

// nodeFromJson() of what readNode() saw.
Result<model::NodeFacts> nodeFacts(NodeRead& read) {
  model::NodeFacts out;
  if (!read.object) return badRequest("each node must be a v1.Node object");
  MetadataRead* meta = read.metadata.get();
  if (!meta || !meta->object) return badRequest("node without metadata");
  if (std::string* name = meta->name.get()) out.name = std::move(*name);
  if (out.name.empty()) return badRequest("node without metadata.name");
  if (sched::StringMap* labels = meta->labels.get()) out.labels = std::move(*labels);
  if (sched::StringMap* notes = meta->annotations.get()) out.annotations = std::move(*notes);
  if (SpecRead* spec = read.spec.get()) {
    if (bool* u = spec->unschedulable.get()) out.unschedulable = *u;
  }
  if (StatusRead* status = read.status.get()) {
    auto gpus = [](Pick<ResourcesRead>& list) {
      ResourcesRead* r = list.get();
      std::string* v = r ? r->gpus.get() : nullptr;
      return v ? *v : std::string();
    };
    out.allocatable_gpus = gpus(status->allocatable);
    if (out.allocatable_gpus.empty()) out.allocatable_gpus = gpus(status->capacity);
  }
  return out;
}

struct NodeNamesRead {
  bool null = false, array = false, strings = true;
  std::vector<std::string> names;
};
struct NodeItem {
  std::string error;  // nodeFromJson's message when the object is not a usable v1.Node
  model::NodeFacts facts;
  std::string text;  // the object's bytes as received
};
struct ItemsRead {
  bool array = false;
  std::vector<NodeItem> nodes;
};
struct NodeListRead {
  bool null = false;
  Pick<ItemsRead> items;
};

bool readNodeNames(JsonScanner& in, NodeNamesRead* out) {
  const char c = in.peek();
  if (c == 'n') out->null = true;
  if (c != '[') return in.skip();
  out->array = true;
  in.enterArray();
  // Views first (a plain-bytes vector grows cheaply), then the strings in one allocation.
  // Names with escapes are decoded into `decoded`, whose strings never move.
  std::vector<std::string_view> views;
  std::deque<std::string> decoded;
  std::string_view name;
  std::string scratch;
  while (in.nextItem()) {
    if (in.peek() == '"') {
      if (!in.readString(&name, &scratch)) return false;
      if (name.data() == scratch.data()) name = decoded.emplace_back(name);
      views.push_back(name);
    } else {
      out->strings = false;
      if (!in.skip()) return false;
    }
  }
  out->names.assign(views.begin(), views.end());
  return in.ok();
}

bool readItems(JsonScanner& in, ItemsRead* out) {
  if (in.peek() != '[') return in.skip();
  out->array = true;
  in.enterArray();
  while (in.nextItem()) {
    in.peek();
    const size_t start = in.pos();
    NodeRead read;
    if (!readNode(in, &read)) return false;
    NodeItem& item = out->nodes.emplace_back();
    item.text.assign(in.text().substr(start, in.pos() - start));
    Result<model::NodeFacts> facts = nodeFacts(read);
    if (facts.isOk()) {
      item.facts = std::move(facts).value();
    } else {
      item.error = facts.status().message();
    }
  }
  return in.ok();
}

bool readNodeList(JsonScanner& in, NodeListRead* out) {
  if (in.peek() == 'n') out->null = true;
  return readObject(in, [&](std::string_view key) {
    ItemsRead* items = out->items.slot(key, "items");
    return items ? readItems(in, items) : in.skip();
  });
}

// A value the scanner has already validated, as a document (the DomBuilder of parseBody).
std::optional<Json> parseValidated(std::string_view text) {
  DomBuilder builder;
  if (!Json::sax_parse(text.begin(), text.end(), &builder)) return std::nullopt;
  return std::move(builder.root());
}

}  // namespace

Result<ExtenderArgs> decodeExtenderArgs(std::string_view body) {
  if (body.empty()) return badRequest("empty request body; expected a JSON object");
  JsonScanner in(body);
  auto invalid = [&] {
    if (in.tooDeep()) return tooDeep();
    return badRequest("request body is not valid JSON (" + std::to_string(body.size()) + " bytes)");
  };
  if (in.peek() != '{') {
    if (!in.skip() || !in.finish()) return invalid();
    return badRequest("request body must be a JSON object");
  }
  // The whole body is read (and validated) first; then the fields are checked in the order
  // the messages promise: Pod, then NodeNames, then Nodes.
  Pick<std::string_view> pod;
  Pick<NodeNamesRead> names;
  Pick<NodeListRead> nodes;
  const bool read = readObject(in, [&](std::string_view key) {
    if (std::string_view* text = pod.slot(key, "Pod")) {
      in.peek();
      const size_t start = in.pos();
      if (!in.skip()) return false;
      *text = body.substr(start, in.pos() - start);
      return true;
    }
    if (NodeNamesRead* n = names.slot(key, "NodeNames")) return readNodeNames(in, n);
    if (NodeListRead* n = nodes.slot(key, "Nodes")) return readNodeList(in, n);
    return in.skip();
  });
  if (!read || !in.finish()) return invalid();

  ExtenderArgs args;
  const std::string_view* pod_text = pod.get();
  std::optional<Json> pod_doc = pod_text ? parseValidated(*pod_text) : std::optional<Json>(Json());
  if (!pod_doc) return invalid();
  if (pod_doc->is_null()) return badRequest("ExtenderArgs.Pod is missing");
  Result<sched::PodFacts> facts = podFromJson(*pod_doc);
  if (!facts.isOk()) return badRequest("ExtenderArgs." + facts.status().message());
  args.pod = std::move(facts).value();

  NodeNamesRead* node_names = names.get();
  NodeListRead* node_list = nodes.get();
  if (node_names && !node_names->null) {
    if (!node_names->array) return badRequest("ExtenderArgs.NodeNames must be an array of strings");
    if (!node_names->strings) return badRequest("ExtenderArgs.NodeNames must contain only strings");
    args.node_names = std::move(node_names->names);
    args.node_cache_mode = true;
  } else if (node_list && !node_list->null) {
    ItemsRead* items = node_list->items.get();
    if (!items || !items->array) return badRequest("ExtenderArgs.Nodes.items must be an array of v1.Node");
    args.node_cache_mode = false;
    args.node_names.reserve(items->nodes.size());
    args.nodes.reserve(items->nodes.size());
    args.node_objects.reserve(items->nodes.size());
    for (size_t i = 0; i < items->nodes.size(); ++i) {
      NodeItem& item = items->nodes[i];
      if (!item.error.empty()) {
        return badRequest("ExtenderArgs.Nodes.items[" + std::to_string(i) + "]: " + item.error);
      }
      args.node_names.push_back(item.facts.name);
      args.nodes.push_back(std::move(item.facts));
      args.node_objects.push_back(std::move(item.text));
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
  size_t objects = 0;
  for (const std::string& text : args.node_objects) objects += text.size() + 1;
  out.reserve(256 + objects + result.passed.size() * 24 +
              (result.failed.size() + result.unresolvable.size()) * 96);
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
        out += args.node_objects[i];  // the bytes kube-scheduler sent
        ++next;
      }
    }
    out += "]},\"NodeNames\":null";
  }
  out += ",\"FailedNodes\":";
  appendReasonsOrNull(out, result.failed);
  out += ",\"FailedAndUnresolvableNodes\":";
  appendReasonsOrNull(out, result.unresolvable);
  out += ",\"Error\":\"\"}";
  return out;
}

std::string encodeFilterError(const std::string& message) {
  OrderedJson out = {{"Nodes", nullptr},
                     {"NodeNames", nullptr},
                     {"FailedNodes", nullptr},
                     {"FailedAndUnresolvableNodes", nullptr},
                     {"Error", message}};
  return dumpText(out);
}

std::string encodeHostPriorityList(const std::vector<HostScore>& scores) {
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

Result<sched::BindRequest> decodeBindingArgs(std::string_view body) {
  Result<Json> doc = parseBody(body);
  if (!doc.isOk()) return doc.status();
  sched::BindRequest b;
  b.pod_name = textOf(field(doc.value(), "PodName"));
  b.pod_namespace = textOf(field(doc.value(), "PodNamespace"));
  b.pod_uid = textOf(field(doc.value(), "PodUID"));
  b.node = textOf(field(doc.value(), "Node"));
  for (auto [value, name] : {std::pair{&b.pod_name, "PodName"},
                             {&b.pod_namespace, "PodNamespace"},
                             {&b.pod_uid, "PodUID"},
                             {&b.node, "Node"}}) {
    if (value->empty()) return badRequest(std::string("ExtenderBindingArgs.") + name + " is missing");
  }
  return b;
}

std::string encodeBindingResult(const std::string& error) { return dumpText(OrderedJson{{"Error", error}}); }

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
                              ? textOf(field(p, "UID"))
                              : textOf(field(p, "metadata") ? field(*field(p, "metadata"), "uid") : nullptr);
        if (uid.empty()) return badRequest(where + ": a victim without a UID");
        uids.push_back(uid);
      }
    }
    if (const Json* pdb = field(it.value(), "NumPDBViolations"); pdb && pdb->is_number_integer()) {
      if (pdb->is_number_unsigned() &&
          pdb->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return badRequest(where + ".NumPDBViolations " + pdb->dump() + " is out of range");
      }
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
  return dumpText(OrderedJson{{"NodeNameToMetaVictims", std::move(map)}});
}

std::string encodeHttpError(const std::string& message) { return dumpText(Json{{"error", message}}); }

}  // namespace troupe::http
