// Helpers for the kube adapter's unit tests: a fake API server (KubeTransport) that keeps
// pods in memory and serves GET/binding/events, list pages and scripted watch streams (and
// refuses PATCH, as Troupe's RBAC role does);
// JSON builders for pods and nodes; throwaway certificates made with OpenSSL.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/client/kube_config.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "adapters/kube/watch/kube_objects.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::kube::testing {

// A self-signed P-256 certificate and its key, as PEM. Made fresh for each test run.
struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

inline KeyPair makeSelfSigned(const std::string& cn) {
  KeyPair out;
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600L * 24 * 365);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  auto dump = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    std::string s(data, static_cast<size_t>(n));
    BIO_free(bio);
    return s;
  };
  out.cert_pem = dump([&](BIO* b) { PEM_write_bio_X509(b, cert); });
  out.key_pem =
      dump([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

inline std::string base64(const std::string& in) { return troupe::kube::encodeBase64(in); }

using nlohmann::json;

// A v1.Pod with `gpus` nvidia.com/gpu (0 = none), optionally bound and annotated.
inline json podJson(const std::string& name, int gpus, const std::string& node = "",
                    const std::string& assigned = "", const std::string& phase = "Pending",
                    const std::string& ns = "default") {
  json res = json::object();
  if (gpus > 0) {
    res["limits"] = {{"nvidia.com/gpu", std::to_string(gpus)}};
    res["requests"] = {{"nvidia.com/gpu", std::to_string(gpus)}, {"cpu", "1"}};
  }
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", ns},
                {"uid", "uid-" + name},
                {"resourceVersion", "1"},
                {"labels", {{"app", "test"}, {"env", "prod"}}},
                {"managedFields",
                 json::array({{{"manager", "kubectl"}, {"fieldsV1", {{"f:spec", json::object()}}}}})}}},
              {"spec",
               {{"schedulerName", "troupe-scheduler"},
                {"containers", json::array({{{"name", "c"},
                                             {"image", "pause"},
                                             {"env", json::array({{{"name", "X"}, {"value", "1"}}})},
                                             {"resources", res}}})}}},
              {"status", {{"phase", phase}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  if (!assigned.empty()) pod["metadata"]["annotations"] = {{"troupe.dev/gpus", assigned}};
  return pod;
}

inline json nodeJson(const std::string& name, int gpus,
                     const std::string& product = "NVIDIA-H100-80GB-HBM3") {
  return {{"metadata",
           {{"name", name},
            {"resourceVersion", "1"},
            {"labels",
             {{"nvidia.com/gpu.product", product},
              {"nvidia.com/gpu.memory", "81559"},
              {"nvidia.com/gpu.count", std::to_string(gpus)}}}}},
          {"spec", json::object()},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}, {"cpu", "64"}}},
            {"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}, {"cpu", "64"}}},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

inline Json toKube(const json& j) { return Json::parse(j.dump()); }

// An in-memory API server: pods by namespace/name, plus scripted answers.
class FakeApi final : public KubeTransport {
 public:
  struct Call {
    std::string method, path, body;
  };
  // Return a reply to answer a request instead of the fake's own logic; nullopt to go on.
  using Hook = std::function<std::optional<ApiReply>(const std::string& method, const std::string& path,
                                                     const std::string& body)>;

  void putPod(const json& pod) {
    std::lock_guard lock(mu_);
    pods_[pod["metadata"]["namespace"].get<std::string>() + "/" +
          pod["metadata"]["name"].get<std::string>()] = pod;
  }
  std::optional<json> pod(const std::string& ns, const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return std::nullopt;
    return it->second;
  }
  void deletePod(const std::string& ns, const std::string& name) {
    std::lock_guard lock(mu_);
    pods_.erase(ns + "/" + name);
  }
  void setHook(Hook hook) {
    std::lock_guard lock(mu_);
    hook_ = std::move(hook);
  }
  std::vector<Call> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  int count(const std::string& method, const std::string& suffix) {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const Call& c : calls_) {
      if (c.method == method && c.path.size() >= suffix.size() &&
          c.path.compare(c.path.size() - suffix.size(), suffix.size(), suffix) == 0) {
        ++n;
      }
    }
    return n;
  }

  // Scripted list pages and watch streams (for the watcher tests): each request pops one.
  struct Page {
    int status = 200;
    std::string body;
  };
  struct Stream {
    int status = 200;
    std::vector<std::string> lines;
    ApiErrorKind fail = ApiErrorKind::kNone;  // a transport failure after the lines
    bool hold = false;                        // after the lines, stay open and silent until stopped
    std::string match{};                      // serves only watches whose path contains it
  };
  void queueList(Page p) {
    std::lock_guard lock(mu_);
    lists_.push_back(std::move(p));
  }
  void queueWatch(Stream s) {
    std::lock_guard lock(mu_);
    watches_.push_back(std::move(s));
  }

  ApiReply request(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& /*content_type*/) override {
    Hook hook;
    {
      std::lock_guard lock(mu_);
      calls_.push_back({method, path, body});
      hook = hook_;
    }
    if (hook) {
      if (std::optional<ApiReply> r = hook(method, path, body)) return *r;
    }
    std::lock_guard lock(mu_);
    if (method == "GET" && path.find("/pods/") == std::string::npos) {
      if (lists_.empty()) return replyFromFailure(ApiErrorKind::kUnreachable, "no list scripted");
      Page p = lists_.front();
      lists_.pop_front();
      return replyFromHttp(p.status, p.body);
    }
    if (method == "POST" && path.find("/events") != std::string::npos) return replyFromHttp(201, body);
    // /api/v1/namespaces/NS/pods/NAME[/binding]
    const std::string prefix = "/api/v1/namespaces/";
    if (path.rfind(prefix, 0) != 0) return replyFromHttp(404, R"({"message":"no such path"})");
    std::string rest = path.substr(prefix.size());
    const std::string ns = rest.substr(0, rest.find('/'));
    rest = rest.substr(rest.find("/pods/") + 6);
    const bool binding = rest.size() > 8 && rest.substr(rest.size() - 8) == "/binding";
    const std::string name = binding ? rest.substr(0, rest.size() - 8) : rest;
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return replyFromHttp(404, R"({"message":"pods \")" + name + R"(\" not found"})");
    json& pod = it->second;
    if (method == "GET") return replyFromHttp(200, pod.dump());
    json in = json::parse(body);
    if (in["metadata"].contains("uid") && in["metadata"]["uid"] != pod["metadata"]["uid"]) {
      return replyFromHttp(409, R"({"message":"Precondition failed: UID in precondition"})");
    }
    if (method == "PATCH") {
      // Troupe's ClusterRole has no pods: patch (deploy/rbac.yaml).
      return replyFromHttp(
          403, R"({"message":"pods ")" + name + R"(" is forbidden: User cannot patch resource "pods""})");
    }
    if (method == "POST" && binding) {
      if (pod["spec"].contains("nodeName")) {
        return replyFromHttp(409, R"({"message":"pod )" + name + " is already assigned to node " +
                                      pod["spec"]["nodeName"].get<std::string>() + R"("})");
      }
      // As the API server's BindingREST: the Binding's annotations are copied onto the pod in
      // the same write that sets the node.
      if (in["metadata"].contains("annotations")) {
        for (auto& [k, v] : in["metadata"]["annotations"].items()) pod["metadata"]["annotations"][k] = v;
      }
      pod["spec"]["nodeName"] = in["target"]["name"];
      return replyFromHttp(201, R"({"kind":"Status","status":"Success"})");
    }
    return replyFromHttp(405, "{}");
  }

  ApiReply stream(const std::string& path, std::chrono::seconds /*idle_timeout*/,
                  const std::function<bool(std::string&)>& on_line, StopSignal& stop) override {
    Stream s;
    {
      std::lock_guard lock(mu_);
      calls_.push_back({"WATCH", path, ""});
      auto it = std::find_if(watches_.begin(), watches_.end(),
                             [&path](const Stream& w) { return path.find(w.match) != std::string::npos; });
      if (it == watches_.end()) return replyFromFailure(ApiErrorKind::kUnreachable, "no watch scripted");
      s = *it;
      watches_.erase(it);
    }
    if (s.status != 200) return replyFromHttp(s.status, R"({"message":"scripted"})");
    for (std::string line : s.lines) {
      if (!on_line(line)) return replyFromHttp(200, "");
    }
    if (s.hold) {
      // A half-dead connection: nothing more arrives, and only stopping the stream ends it,
      // as ApiClient's cancellation does.
      while (stop.sleepFor(std::chrono::hours(1))) {
      }
      return replyFromFailure(ApiErrorKind::kCancelled, "stopped");
    }
    if (s.fail != ApiErrorKind::kNone) return replyFromFailure(s.fail, "scripted failure");
    return replyFromHttp(200, "");
  }

 private:
  std::mutex mu_;
  std::map<std::string, json> pods_;
  std::vector<Call> calls_;
  Hook hook_;
  std::deque<Page> lists_;
  std::deque<Stream> watches_;
};

// A scheduler fed by a ClusterSync, with a debug log kept in memory: what every kube adapter
// test starts from.
struct SyncWorld {
  std::ostringstream log;
  troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kDebug};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  ClusterSync sync{scheduler, logger};
};

// A SyncWorld with one queue, team-a, and one 8-GPU node n1: where the queue tests of the pod
// watch start.
struct TeamQueueSyncWorld : SyncWorld {
  TeamQueueSyncWorld() {
    troupe::sched::QueueSpec team;
    team.name = "team-a";
    scheduler.setQueues(troupe::sched::QueueTree::build({team}));
    sync.nodeHandler().event(WatchEventType::kAdded, toKube(nodeJson("n1", 8)));
  }
};

}  // namespace troupe::kube::testing
