// The wire decoders and Troupe's decisions on bytes a real kube-scheduler sent.
//
// tests/corpus/kube-scheduler-1.36/ holds request bodies recorded by `troupe serve --record-dir`
// during the e2e suite (tests/e2e, real kube-scheduler v1.36), copied unchanged by
// tests/e2e/update_corpus.py, plus index.json (what each body holds, read with Python's json
// module) and cluster.yaml (the fleet Troupe knew during the run). See the README there.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "adapters/http/extender_scores.h"
#include "adapters/http/wire.h"
#include "adapters/yaml/config.h"
#include "support/fixtures.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::http::Json;

const char* const kCorpusLabel = "troupe.dev/e2e-corpus";

std::string corpusDir() { return troupe::testing::sourceDir() + "/tests/corpus/kube-scheduler-1.36"; }

std::string mustRead(const std::string& file) {
  const std::string path = corpusDir() + "/" + file;
  auto text = troupe::testing::readFile(path);
  INFO("path: " << path << " (TROUPE_SOURCE_DIR is the repository root; ctest sets it)");
  REQUIRE(text);
  return *text;
}

Json mustParse(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

const Json& index() {
  static const Json j = mustParse(mustRead("index.json"));
  return j;
}

const Json& expected(const std::string& file) {
  const Json& files = index().at("files");
  INFO("file: " << file);
  REQUIRE(files.contains(file));
  return files.at(file);
}

std::vector<std::string> strings(const Json& array) {
  std::vector<std::string> out;
  for (const Json& s : array) out.push_back(s.get<std::string>());
  return out;
}

// A scheduler that knows the fleet the corpus was recorded against, and nothing bound: what
// standalone Troupe knew during the e2e run (kube-scheduler binds; Troupe is not told).
std::unique_ptr<troupe::sched::Scheduler> fleetScheduler() {
  auto s = std::make_unique<troupe::sched::Scheduler>(troupe::sched::SchedulerConfig{});
  auto nodes = troupe::config::loadCluster(corpusDir() + "/cluster.yaml");
  INFO(nodes.status().message());
  REQUIRE(nodes.isOk());
  REQUIRE(nodes.value().size() == 16);
  for (const auto& n : nodes.value()) REQUIRE(s->upsertNode(n).isOk());
  return s;
}

std::string productOf(const std::string& node) {
  static const std::map<std::string, std::string> products = [] {
    std::map<std::string, std::string> m;
    auto nodes = troupe::config::loadCluster(corpusDir() + "/cluster.yaml");
    REQUIRE(nodes.isOk());
    for (const auto& n : nodes.value()) m[n.name] = n.labels.at("nvidia.com/gpu.product");
    return m;
  }();
  auto it = products.find(node);
  return it == products.end() ? "" : it->second;
}

bool nvswitch(const std::string& node) {
  const std::string p = productOf(node);
  return p == "NVIDIA-H100-80GB-HBM3" || p == "NVIDIA-A100-SXM4-80GB";
}

// Pod fields against index.json, and the GPU request parsed from the real pod.
void checkPod(const troupe::sched::PodFacts& pod, const Json& want, const std::string& corpus_key) {
  CHECK_FALSE(pod.name.empty());
  CHECK_FALSE(pod.ns.empty());
  CHECK_FALSE(pod.uid.empty());
  CHECK(pod.name == want.at("name").get<std::string>());
  CHECK(pod.ns == want.at("namespace").get<std::string>());
  CHECK(pod.uid == want.at("uid").get<std::string>());
  CHECK(pod.priority == want.at("priority").get<int64_t>());
  CHECK(pod.phase == "Pending");
  CHECK(pod.node_name.empty());
  for (auto it = want.at("annotations").begin(); it != want.at("annotations").end(); ++it) {
    INFO("annotation " << it.key());
    REQUIRE(pod.annotations.count(it.key()) == 1);
    CHECK(pod.annotations.at(it.key()) == it.value().get<std::string>());
  }
  REQUIRE(pod.labels.count(kCorpusLabel) == 1);
  CHECK(pod.labels.at(kCorpusLabel) == corpus_key);
  auto req = troupe::sched::parseGpuRequest(pod);
  INFO(req.status().message());
  REQUIRE(req.isOk());
  CHECK(req.value().gpus == want.at("gpus").get<int>());
  CHECK(req.value().gpus > 0);
}

// "filter-nvlink.json" -> "nvlink"
std::string keyOf(const std::string& file) {
  const std::string stem = file.substr(0, file.size() - 5);
  return stem.substr(stem.find('-') + 1);
}

troupe::http::ExtenderArgs decodeArgs(const std::string& file) {
  const std::string body = mustRead(file);
  auto r = troupe::http::decodeExtenderArgs(body);
  INFO(file << ": " << r.status().message());
  REQUIRE(r.isOk());
  return r.value();
}

}  // namespace

TEST_CASE("corpus: every recorded body is indexed and every index entry exists", "[wire][corpus]") {
  REQUIRE(std::filesystem::is_directory(corpusDir()));
  CHECK(index().at("kubernetesVersion").get<std::string>().rfind("v1.36.", 0) == 0);
  std::set<std::string> on_disk, verbs;
  for (const auto& entry : std::filesystem::directory_iterator(corpusDir())) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".json" && name != "index.json") on_disk.insert(name);
  }
  std::set<std::string> indexed;
  for (auto it = index().at("files").begin(); it != index().at("files").end(); ++it) {
    indexed.insert(it.key());
    verbs.insert(it.value().at("verb").get<std::string>());
  }
  CHECK(on_disk == indexed);
  // The corpus covers the verbs the e2e cluster uses (bind is kube-scheduler's own for now).
  CHECK(verbs == std::set<std::string>{"filter", "prioritize", "preempt"});
  for (const std::string& file : on_disk) {
    INFO(file);
    const std::string body = mustRead(file);
    REQUIRE_FALSE(body.empty());
    CHECK(body.back() != '\n');  // Go's json.Marshal: compact, no trailing newline
    CHECK(body.rfind("{\"Pod\":{\"metadata\":{", 0) == 0);
    CHECK(body.find("managedFields") == std::string::npos);  // dropped from the pod since 1.36
    // Top-level keys in Go's struct order.
    Json j = mustParse(body);
    std::vector<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
    const std::string verb = expected(file).at("verb").get<std::string>();
    if (verb == "preempt") {
      CHECK(keys == std::vector<std::string>{"Pod", "NodeNameToVictims", "NodeNameToMetaVictims"});
    } else {
      CHECK(keys == std::vector<std::string>{"Pod", "Nodes", "NodeNames"});
    }
  }
}

TEST_CASE("corpus: filter and prioritize bodies decode to what index.json says", "[wire][corpus]") {
  int seen = 0;
  for (auto it = index().at("files").begin(); it != index().at("files").end(); ++it) {
    const std::string verb = it.value().at("verb").get<std::string>();
    if (verb != "filter" && verb != "prioritize") continue;
    ++seen;
    const std::string file = it.key();
    INFO(file);
    const Json& want = it.value();
    auto args = decodeArgs(file);
    CHECK(args.node_cache_mode == want.at("nodeCache").get<bool>());
    CHECK(args.node_cache_mode);  // nodeCacheCapable: true in the e2e scheduler config
    CHECK(args.nodes.empty());
    CHECK(args.node_names == strings(want.at("nodeNames")));
    CHECK_FALSE(args.node_names.empty());
    for (const std::string& n : args.node_names) CHECK_FALSE(productOf(n).empty());  // fleet nodes
    checkPod(args.pod, want.at("pod"), keyOf(file));
  }
  CHECK(seen >= 4);
}

TEST_CASE("corpus: Troupe's filter on the real bodies, and its encoded answer", "[wire][corpus]") {
  const auto owned = fleetScheduler();
  auto& sched = *owned;
  struct Case {
    const char* file;
    const char* rejected_because;  // the reason every rejected node gets
    bool (*may_pass)(const std::string& node);
  };
  const Case cases[] = {
      {"filter-nvlink.json",
       "troupe: no NVLink domain of 8 GPUs on this node (troupe.dev/gpu-topology=nvlink)", &nvswitch},
      {"filter-gpu-memory.json", "troupe: GPU memory below troupe.dev/gpu-memory 70Gi", &nvswitch},
      {"filter-model-mismatch.json", "is not in troupe.dev/gpu-model (NVIDIA-H200)",
       [](const std::string&) { return false; }},
      {"filter-preemptor.json", "", [](const std::string&) { return true; }},
  };
  for (const Case& c : cases) {
    INFO(c.file);
    auto args = decodeArgs(c.file);
    const troupe::sched::FilterResult r = sched.filter(args.pod, args.node_names);
    // Every candidate is answered exactly once: passed, or rejected with a reason.
    std::multiset<std::string> answered(r.passed.begin(), r.passed.end());
    for (const auto& [n, why] : r.failed) answered.insert(n);
    for (const auto& [n, why] : r.unresolvable) answered.insert(n);
    CHECK(answered == std::multiset<std::string>(args.node_names.begin(), args.node_names.end()));
    CHECK(r.failed.empty());  // nothing is bound in Troupe's view: no "busy" rejections
    for (const std::string& n : args.node_names) {
      INFO("node " << n << " (" << productOf(n) << ")");
      const bool passed = std::find(r.passed.begin(), r.passed.end(), n) != r.passed.end();
      CHECK(passed == c.may_pass(n));
      if (!passed) {
        REQUIRE(r.unresolvable.contains(n));
        CHECK_THAT(r.unresolvable.at(n), Catch::Contains(c.rejected_because));
      }
    }
    if (std::string(c.file) == "filter-preemptor.json") {
      // The preemptor's retry after preemption: kube-scheduler tries the nominated node alone.
      CHECK(args.node_names.size() == 1);
    }

    // The answer kube-scheduler gets: survivors by name, in request order, reasons by name.
    const Json out = mustParse(troupe::http::encodeFilterResult(args, r));
    CHECK(out.at("Nodes").is_null());
    CHECK(strings(out.at("NodeNames")) == r.passed);
    std::vector<std::string> in_order;
    for (const std::string& n : args.node_names) {
      if (std::find(r.passed.begin(), r.passed.end(), n) != r.passed.end()) in_order.push_back(n);
    }
    CHECK(strings(out.at("NodeNames")) == in_order);
    const Json& unres = out.at("FailedAndUnresolvableNodes");
    CHECK(unres.is_null() == r.unresolvable.empty());
    if (!unres.is_null()) {
      CHECK(unres.size() == r.unresolvable.size());
      for (const auto& [n, why] : r.unresolvable) CHECK(unres.at(n).get<std::string>() == why);
    }
    CHECK(out.at("Error") == "");
  }
}

TEST_CASE("corpus: Troupe's scores for the real prioritize bodies", "[wire][corpus]") {
  const auto owned = fleetScheduler();
  auto& sched = *owned;
  for (const char* file : {"prioritize-nvlink.json", "prioritize-gpu-memory.json"}) {
    INFO(file);
    auto args = decodeArgs(file);
    REQUIRE(args.node_names.size() >= 2);  // kube-scheduler prioritizes only between 2 or more
    // kube-scheduler asks to rank only nodes that survived Troupe's filter.
    const troupe::sched::FilterResult f = sched.filter(args.pod, args.node_names);
    CHECK(f.passed == args.node_names);
    const auto scores = troupe::http::extenderScores(sched.prioritize(args.pod, args.node_names));
    const Json out = mustParse(troupe::http::encodeHostPriorityList(scores));
    REQUIRE(out.is_array());
    REQUIRE(out.size() == args.node_names.size());
    std::set<std::string> hosts;
    int tens = 0;
    for (const Json& hp : out) {
      hosts.insert(hp.at("Host").get<std::string>());
      REQUIRE(hp.at("Score").is_number_integer());
      const int64_t s = hp.at("Score").get<int64_t>();
      CHECK(s >= 0);
      CHECK(s <= 10);
      if (s == 10) ++tens;
    }
    CHECK(hosts == std::set<std::string>(args.node_names.begin(), args.node_names.end()));
    CHECK(tens == 1);  // only the best node gets 10, so kube-scheduler's random tie-break cannot scatter
  }
}

TEST_CASE("corpus: preempt bodies decode, and Troupe keeps or vetoes the candidates", "[wire][corpus]") {
  const auto owned = fleetScheduler();
  auto& sched = *owned;
  struct Case {
    const char* file;
    bool kept;  // does Troupe agree to evict the victims?
  };
  // preemptor: 4 GPUs on an H100 node held by a lower-priority 8-GPU pod: evicting helps.
  // veto: the same, but the pod asks for a model the node does not have: evicting is useless.
  for (const Case& c : {Case{"preempt-preemptor.json", true}, Case{"preempt-veto.json", false}}) {
    INFO(c.file);
    const Json& want = expected(c.file);
    const std::string body = mustRead(c.file);
    auto r = troupe::http::decodePreemptionArgs(body);
    INFO(r.status().message());
    REQUIRE(r.isOk());
    const auto& args = r.value();
    CHECK(args.meta == want.at("nodeCache").get<bool>());
    CHECK(args.meta);  // nodeCacheCapable: UIDs only
    std::map<std::string, std::vector<std::string>> victims;
    for (auto it = want.at("victims").begin(); it != want.at("victims").end(); ++it) {
      victims[it.key()] = strings(it.value());
    }
    std::map<std::string, int64_t> pdbs;
    for (auto it = want.at("pdbViolations").begin(); it != want.at("pdbViolations").end(); ++it) {
      pdbs[it.key()] = it.value().get<int64_t>();
    }
    CHECK(args.victims == victims);
    CHECK(args.pdb_violations == pdbs);
    REQUIRE(args.victims.size() == 1);
    for (const auto& [node, uids] : args.victims) {
      CHECK(nvswitch(node));
      REQUIRE(uids.size() == 1);
      CHECK_FALSE(uids[0].empty());
      CHECK(uids[0] != args.pod.uid);
    }
    checkPod(args.pod, want.at("pod"), keyOf(c.file));
    CHECK(args.pod.priority > 0);  // from the test's PriorityClass

    const auto kept = sched.preempt(args.pod, args.victims);
    CHECK(kept == (c.kept ? args.victims : std::map<std::string, std::vector<std::string>>{}));
    const Json out = mustParse(troupe::http::encodePreemptionResult(kept, args.pdb_violations));
    const Json& meta = out.at("NodeNameToMetaVictims");
    REQUIRE(meta.is_object());
    CHECK(meta.size() == kept.size());
    for (const auto& [node, uids] : kept) {
      REQUIRE(meta.contains(node));
      const Json& pods = meta.at(node).at("Pods");
      REQUIRE(pods.size() == uids.size());
      for (size_t i = 0; i < uids.size(); ++i) CHECK(pods[i].at("UID").get<std::string>() == uids[i]);
      CHECK(meta.at(node).at("NumPDBViolations").get<int64_t>() == pdbs.at(node));
    }
  }
}
