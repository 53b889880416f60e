// Fuzz targets of the extender's wire format: the in-place JSON scanner and the decoders of
// every verb, each decoded request run through the scheduler and its answer encoded.
#include <algorithm>
#include <set>

#include "adapters/http/json_scanner.h"
#include "adapters/http/wire.h"
#include "fuzz_support.h"
#include "fuzz_targets.h"

namespace troupe::fuzz {
namespace {

using http::Json;

bool libraryAccepts(std::string_view text) { return Json::accept(std::string(text)); }

void checkFacts(const char* target, const model::NodeFacts& got, const model::NodeFacts& want) {
  FUZZ_CHECK(got.name == want.name && got.labels == want.labels && got.annotations == want.annotations &&
                 got.allocatable_gpus == want.allocatable_gpus && got.unschedulable == want.unschedulable,
             target, "the streaming node reader and nodeFromJson disagree on node " + want.name);
}

}  // namespace

int jsonScanner(const uint8_t* data, size_t size) {
  const std::string_view text = asText(data, size);
  http::JsonScanner in(text);
  const bool scanner = in.skip() && in.finish();
  const bool library = libraryAccepts(text);
  FUZZ_CHECK(scanner == library, "json_scanner",
             std::string("the scanner ") + (scanner ? "accepts" : "rejects") + " what the library " +
                 (library ? "accepts" : "rejects"));
  if (library) {
    // A string value decodes to the library's bytes.
    http::JsonScanner again(text);
    if (again.peek() == '"') {
      std::string_view value;
      std::string scratch;
      FUZZ_CHECK(again.readString(&value, &scratch), "json_scanner", "readString failed on a valid string");
      FUZZ_CHECK(std::string(value) == Json::parse(std::string(text)).get<std::string>(), "json_scanner",
                 "a string decodes differently from the library");
    }
  }
  return 0;
}

int wireFilter(const uint8_t* data, size_t size) {
  const std::string_view body = asText(data, size);
  Result<http::ExtenderArgs> args = http::decodeExtenderArgs(body);
  const bool said_invalid =
      !args.isOk() && args.status().message().find("not valid JSON") != std::string::npos;
  // The scanner stops at the first problem it meets: a body that nests past the depth limit
  // before its syntax error gets the depth error (the library, with no limit, sees only the
  // syntax error). Either answer names a real problem of the body; "not valid JSON" must
  // never be said of a body the library accepts.
  const bool said_too_deep =
      !args.isOk() && args.status().message().find("deeper than 64 levels") != std::string::npos;
  const bool library_rejects = !body.empty() && !libraryAccepts(body);
  FUZZ_CHECK(said_invalid ? library_rejects : !library_rejects || said_too_deep, "wire_filter",
             "\"not valid JSON\" must be said exactly when the JSON library rejects the body "
             "(or the depth limit is met first)");
  if (!args.isOk()) {
    checkJson("wire_filter", http::encodeFilterError(args.status().message()), "encodeFilterError");
    checkJson("wire_filter", http::encodeHttpError(args.status().message()), "encodeHttpError");
    return 0;
  }
  const http::ExtenderArgs& a = args.value();
  // Full-node mode: each node read in place is what the DOM path reads from its bytes.
  FUZZ_CHECK(a.nodes.size() == a.node_objects.size(), "wire_filter",
             "nodes and node objects differ in number");
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Json doc = Json::parse(a.node_objects[i], nullptr, /*allow_exceptions=*/false);
    FUZZ_CHECK(!doc.is_discarded(), "wire_filter", "a node object kept from a valid body is not JSON");
    Result<model::NodeFacts> want = adapters::nodeFromJson(doc);
    FUZZ_CHECK(want.isOk(), "wire_filter", "nodeFromJson refuses a node the streaming reader took");
    checkFacts("wire_filter", a.nodes[i], want.value());
  }
  std::unique_ptr<sched::Scheduler> s = fleet();
  std::vector<std::string> learn_errors;
  const sched::FilterResult r =
      a.node_cache_mode ? s->filter(a.pod, a.node_names) : s->filterNodes(a.pod, a.nodes, &learn_errors);
  const std::set<std::string> asked(a.node_names.begin(), a.node_names.end());
  for (const std::string& n : r.passed) {
    FUZZ_CHECK(asked.count(n) == 1, "wire_filter", "filter passed a node it was not asked about: " + n);
  }
  checkJson("wire_filter", http::encodeFilterResult(a, r), "encodeFilterResult");
  const std::vector<sched::HostScore> scores = s->prioritize(a.pod, a.node_names);
  for (const sched::HostScore& h : scores) {
    FUZZ_CHECK(h.score >= 0 && h.score <= 10, "wire_filter",
               "a score outside 0..10: " + std::to_string(h.score));
    FUZZ_CHECK(asked.count(h.host) == 1, "wire_filter", "prioritize scored a node it was not asked about");
  }
  checkJson("wire_filter", http::encodeHostPriorityList(scores), "encodeHostPriorityList");
  return 0;
}

int wireBind(const uint8_t* data, size_t size) {
  const std::string_view body = asText(data, size);
  // Any text as an error message (an API server's answer cut anywhere) encodes to JSON.
  checkJson("wire_bind", http::encodeBindingResult(std::string(body.substr(0, 512))), "encodeBindingResult");
  Result<sched::BindRequest> args = http::decodeBindingArgs(body);
  if (!args.isOk()) return 0;
  const sched::BindRequest& b = args.value();
  FUZZ_CHECK(!b.pod_name.empty() && !b.pod_namespace.empty() && !b.pod_uid.empty() && !b.node.empty(),
             "wire_bind", "decodeBindingArgs accepted a binding with an empty field");
  std::unique_ptr<sched::Scheduler> s = fleet();
  // The pod was never filtered: the bind must be refused (by name), never reserve anything.
  Result<model::Allocation> reserved = s->reserve(b.pod_uid, b.pod_namespace, b.pod_name, b.node);
  if (b.pod_uid != "uid-v1" && b.pod_uid != "uid-v2" && b.pod_uid != "uid-v3") {
    FUZZ_CHECK(!reserved.isOk(), "wire_bind", "a pod never filtered was reserved");
  }
  checkJson("wire_bind", http::encodeBindingResult(reserved.isOk() ? "" : reserved.status().message()),
            "encodeBindingResult");
  return 0;
}

int wirePreempt(const uint8_t* data, size_t size) {
  Result<http::PreemptionArgs> args = http::decodePreemptionArgs(asText(data, size));
  if (!args.isOk()) return 0;
  const http::PreemptionArgs& a = args.value();
  std::unique_ptr<sched::Scheduler> s = fleet();
  const auto kept = s->preempt(a.pod, a.victims);
  for (const auto& [node, uids] : kept) {
    auto asked = a.victims.find(node);
    FUZZ_CHECK(asked != a.victims.end(), "wire_preempt",
               "preempt answered for a node it was not asked about");
    for (const std::string& uid : uids) {
      FUZZ_CHECK(std::find(asked->second.begin(), asked->second.end(), uid) != asked->second.end(),
                 "wire_preempt", "preempt named a victim it was not offered: " + uid);
    }
  }
  checkJson("wire_preempt", http::encodePreemptionResult(kept, a.pdb_violations), "encodePreemptionResult");
  return 0;
}

}  // namespace troupe::fuzz
