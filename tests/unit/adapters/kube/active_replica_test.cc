// The active replica's loop on its own: the Lease is read on its period, a standby replica does
// nothing else, and the active one waits for the first full sync before its duties.
#include "adapters/kube/replica/active_replica.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "support/kube_test_support.h"

namespace {

using nlohmann::json;
using troupe::kube::ActiveReplica;
using troupe::kube::ApiReply;
using troupe::kube::replyFromHttp;
using troupe::kube::testing::FakeApi;

const char* kLeasePath = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/troupe-scheduler";

struct World : troupe::kube::testing::SyncWorld {
  FakeApi api;
  std::string holder = "host-a_1234";
  troupe::kube::QueueSync queue_sync{troupe::kube::QueueSink::of(scheduler), logger, "default"};
  troupe::kube::EventRecorder events{api, logger, troupe::kube::EventOptions{}};
  troupe::kube::PodGroupStatusWriter group_status{api, logger};
  std::optional<ActiveReplica> replica;

  World() {
    api.setHook([this](const std::string& method, const std::string& path,
                       const std::string&) -> std::optional<ApiReply> {
      if (method == "GET" && path == kLeasePath)
        return replyFromHttp(200, json{{"spec", {{"holderIdentity", holder}}}}.dump());
      return replyFromHttp(404, R"({"message":"not scripted"})");
    });
    ActiveReplica::Options options;
    options.queues.leader_lease = troupe::kube::LeaseRef{"kube-system", "troupe-scheduler"};
    options.identity = "host-a";
    replica.emplace(
        ActiveReplica::Parts{api, scheduler, sync, queue_sync, events, group_status, logger, nullptr},
        options);
  }
  // The first full list of nodes and pods (empty).
  void synced() {
    for (troupe::kube::WatchHandler* h : {&sync.nodeHandler(), &sync.podHandler()}) {
      h->beginList();
      h->endList();
    }
  }
  int leaseReads() { return api.count("GET", "/leases/troupe-scheduler"); }
  int others() { return static_cast<int>(api.calls().size()) - leaseReads(); }
};

}  // namespace

TEST_CASE("active replica: the Lease is read on its period", "[kube][queue]") {
  World w;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  w.replica->round(t0);
  CHECK(w.leaseReads() == 1);
  CHECK(w.replica->active());
  w.replica->round(t0 + std::chrono::seconds(1));
  CHECK(w.leaseReads() == 1);
  w.replica->round(t0 + std::chrono::seconds(2));
  CHECK(w.leaseReads() == 2);
}

TEST_CASE("active replica: a standby replica, or one not synced yet, does nothing else", "[kube][queue]") {
  World w;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  w.replica->round(t0);  // active, but the cluster is not listed yet
  CHECK(w.others() == 0);
  w.holder = "host-b_5678";  // another replica took the Lease
  w.synced();
  w.replica->round(t0 + std::chrono::seconds(2));
  CHECK_FALSE(w.replica->active());
  CHECK(w.others() == 0);
  w.holder = "host-a_1234";  // the Lease back: active again on the next read
  w.replica->round(t0 + std::chrono::seconds(3));
  CHECK_FALSE(w.replica->active());  // not read yet: the period has not passed
  w.replica->round(t0 + std::chrono::seconds(4));
  CHECK(w.replica->active());
}
