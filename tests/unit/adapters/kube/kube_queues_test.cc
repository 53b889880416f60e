// Queue objects and Namespaces decoded into the core's QueueSpec: every field, amounts as
// numbers and quantity strings, and errors that name the queue, the field, the value and the
// fix; a Queue that does not decode stays in the tree as an invalid queue with its error.
#include <catch2/catch.hpp>

#include "adapters/common/gpu_amount.h"
#include "adapters/kube/queues/queues.h"
#include "troupe/sched/cluster/gpu_amount.h"

namespace {

using troupe::adapters::Json;
using troupe::kube::decodeNamespace;
using troupe::kube::decodeQueue;

Json queue(const char* text) { return Json::parse(text); }

}  // namespace

TEST_CASE("queue decoding: every field", "[kube][queue]") {
  auto q = decodeQueue(queue(R"({"apiVersion":"troupe.dev/v1alpha1","kind":"Queue",
    "metadata":{"name":"team-a","resourceVersion":"7"},
    "spec":{"parent":"research","weight":2.5,
            "guaranteed":{"gpus":8,"products":{"NVIDIA-H100-80GB-HBM3":"2.5"}},
            "limit":{"gpus":"32","products":{"NVIDIA-A100-SXM4-80GB":"500m"}},
            "preemptible":false},
    "status":{"running":3}})"));
  INFO(q.error);
  REQUIRE(q.error.empty());
  CHECK(q.name == "team-a");
  CHECK(q.spec.name == "team-a");
  CHECK(q.spec.parent == "research");
  CHECK(q.spec.weight == 2.5);
  CHECK(q.spec.guaranteed.milli == 8000);
  CHECK(q.spec.guaranteed.product_milli == std::map<std::string, int64_t>{{"NVIDIA-H100-80GB-HBM3", 2500}});
  CHECK(q.spec.limit.milli == 32000);
  CHECK(q.spec.limit.product_milli == std::map<std::string, int64_t>{{"NVIDIA-A100-SXM4-80GB", 500}});
  CHECK_FALSE(q.spec.preemptible);
}

TEST_CASE("queue decoding: absent fields take the defaults", "[kube][queue]") {
  for (const char* text :
       {R"({"metadata":{"name":"q"}})", R"({"metadata":{"name":"q"},"spec":{}})",
        R"({"metadata":{"name":"q"},"spec":{"weight":null,"limit":null,"guaranteed":{}}})"}) {
    INFO(text);
    auto q = decodeQueue(queue(text));
    REQUIRE(q.error.empty());
    CHECK(q.spec == troupe::sched::QueueSpec{"q", "", 1, {}, {}, true});
    CHECK(q.spec.guaranteed.empty());
    CHECK(q.spec.limit.empty());
  }
}

TEST_CASE("queue decoding: errors name the queue, the field, the value and the fix", "[kube][queue]") {
  struct Case {
    const char* spec;
    const char* error;
  };
  const std::vector<Case> cases = {
      {R"({"weight":-1})", "queue team-a: spec.weight is -1: must be a positive number"},
      {R"({"weight":0})", "queue team-a: spec.weight is 0: must be a positive number"},
      {R"({"weight":"2"})", "queue team-a: spec.weight is \"2\": must be a positive number such as 1 or 2.5"},
      {R"({"parent":7})", "queue team-a: spec.parent is 7: must be the name of another Queue"},
      {R"({"preemptible":"no"})", "queue team-a: spec.preemptible is \"no\": must be true or false"},
      {R"({"guaranteed":{"gpus":"lots"}})",
       "queue team-a: spec.guaranteed.gpus is \"lots\": must be a number of GPUs, whole (8) or a quantity "
       "such "
       "as \"2.5\" or \"500m\""},
      {R"({"limit":{"gpus":-2}})", "queue team-a: spec.limit.gpus is \"-2\": must be 0 or more GPUs"},
      {R"({"limit":{"gpus":true}})", "queue team-a: spec.limit.gpus is true: must be a number of GPUs"},
      {R"({"limit":{"products":{"NVIDIA-H100-80GB-HBM3":"1Zi"}}})",
       "queue team-a: spec.limit.products[\"NVIDIA-H100-80GB-HBM3\"] is \"1Zi\": must be a number of GPUs"},
      {R"({"limit":{"products":["a"]}})",
       "queue team-a: spec.limit.products is [\"a\"]: must map GPU products"},
      {R"({"limit":{"cpus":4}})", "queue team-a: spec.limit.cpus is not a field: use gpus and products"},
      {R"({"guaranteed":8})", "queue team-a: spec.guaranteed is 8: must be an object such as {gpus: 8"},
      {R"([1])", "queue team-a: spec is [1]: must be an object"},
  };
  for (const Case& c : cases) {
    INFO(c.spec);
    auto q = decodeQueue(Json{{"metadata", {{"name", "team-a"}}}, {"spec", Json::parse(c.spec)}});
    CHECK(q.name == "team-a");
    CHECK_THAT(q.error, Catch::StartsWith(c.error));
  }
  auto nameless = decodeQueue(queue(R"({"metadata":{},"spec":{"weight":1}})"));
  CHECK(nameless.name.empty());
  CHECK_THAT(nameless.error, Catch::Contains("metadata.name"));
}

TEST_CASE("queue decoding: GPU amounts in milli-GPUs, read back as printed", "[kube][queue]") {
  using troupe::adapters::parseGpuAmount;
  using troupe::sched::gpusText;
  CHECK(parseGpuAmount("8").value() == 8000);
  CHECK(parseGpuAmount("2.5").value() == 2500);
  CHECK(parseGpuAmount("500m").value() == 500);
  CHECK(parseGpuAmount("0").value() == 0);
  CHECK_FALSE(parseGpuAmount("").isOk());
  CHECK_FALSE(parseGpuAmount("-1").isOk());
  CHECK_FALSE(parseGpuAmount("1Ei").isOk());  // beyond any cluster
  CHECK(gpusText(8000) == "8");
  CHECK(gpusText(2500) == "2.5");
  CHECK(gpusText(125) == "0.125");
  CHECK(gpusText(1) == "0.001");
  CHECK(gpusText(-1500) == "-1.5");
  for (int64_t milli : {0, 1, 10, 999, 1000, 1001, 2500, 123456789}) {
    INFO(milli);
    CHECK(parseGpuAmount(gpusText(milli)).value() == milli);
  }
  // A JSON number with a fraction is an amount too.
  auto q = decodeQueue(queue(R"({"metadata":{"name":"q"},"spec":{"limit":{"gpus":1.5}}})"));
  REQUIRE(q.error.empty());
  CHECK(q.spec.limit.milli == 1500);
}

TEST_CASE("namespace decoding: the default-queue annotation", "[kube][queue]") {
  auto ns = decodeNamespace(
      queue(R"({"metadata":{"name":"ml","annotations":{"troupe.dev/default-queue":"team-a"}}})"));
  REQUIRE(ns.isOk());
  CHECK(ns.value().ns == "ml");
  CHECK(ns.value().queue == "team-a");
  ns = decodeNamespace(queue(R"({"metadata":{"name":"ml","annotations":{"Troupe.dev/Default-Queue":"x"}}})"));
  REQUIRE(ns.isOk());
  CHECK(ns.value().queue.empty());  // annotation keys are case-sensitive
  ns = decodeNamespace(queue(R"({"metadata":{"name":"ml"}})"));
  REQUIRE(ns.isOk());
  CHECK(ns.value().queue.empty());
  CHECK_FALSE(decodeNamespace(queue(R"({"metadata":{}})")).isOk());
}

TEST_CASE("queue tree: a Queue that does not decode stays as an invalid queue", "[kube][queue]") {
  std::vector<troupe::kube::DecodedQueue> decoded;
  for (const char* text : {R"({"metadata":{"name":"org"},"spec":{"guaranteed":{"gpus":16}}})",
                           R"({"metadata":{"name":"team-a"},"spec":{"parent":"org","weight":-1}})",
                           R"({"metadata":{"name":"team-a-sub"},"spec":{"parent":"team-a"}})",
                           R"({"metadata":{"name":"team-b"},"spec":{"parent":"org","weight":2}})",
                           R"({"metadata":{},"spec":{}})"}) {
    decoded.push_back(decodeQueue(queue(text)));
  }
  troupe::sched::QueueTree tree = troupe::kube::buildQueueTree(decoded, "org");
  CHECK(tree.defaultQueue() == "org");
  REQUIRE(tree.find("org") != nullptr);
  REQUIRE(tree.find("team-b") != nullptr);
  CHECK(tree.find("team-b")->weight == 2);
  CHECK(tree.find("team-a") == nullptr);
  CHECK(tree.find("team-a-sub") == nullptr);
  REQUIRE(tree.invalid().count("team-a"));
  CHECK(tree.invalid().at("team-a") == decoded[1].error);
  CHECK_THAT(tree.invalid().at("team-a"), Catch::StartsWith("queue team-a: spec.weight is -1"));
  REQUIRE(tree.invalid().count("team-a-sub"));
  CHECK_THAT(tree.invalid().at("team-a-sub"), Catch::Contains("team-a"));
  CHECK(tree.invalid().size() == 2);  // the nameless object names no queue
}
