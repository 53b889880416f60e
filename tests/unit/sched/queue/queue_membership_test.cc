// queueOf: the membership order of queue_membership.h and the errors for queues pods cannot join.
#include "troupe/sched/queue/queue_membership.h"

#include <catch2/catch.hpp>
#include <string>

namespace {

using namespace troupe::sched;

QueueSpec queue(const std::string& name, double weight = 1) {
  QueueSpec q;
  q.name = name;
  q.weight = weight;
  return q;
}

PodFacts pod(const StringMap& labels, const StringMap& annotations = {}) {
  PodFacts p;
  p.ns = "ml";
  p.name = "p";
  p.labels = labels;
  p.annotations = annotations;
  return p;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("queueOf: the first key present wins, in the documented order", "[queue]") {
  const QueueTree tree = QueueTree::build({queue("a"), queue("b"), queue("c"), queue("d")});
  const StringMap all_labels{{kQueueKey, "a"}, {kKueueQueueName, "b"}};
  auto q = [&](const PodFacts& p, const std::string& ns_default) {
    auto r = queueOf(p, tree, ns_default);
    REQUIRE(r.isOk());
    return r.value();
  };
  CHECK(q(pod(all_labels, StringMap{{kQueueKey, "c"}}), "d").queue == "c");
  CHECK(q(pod(all_labels, StringMap{{kQueueKey, "c"}}), "d").source == "annotation troupe.dev/queue");
  CHECK(q(pod(all_labels), "d").queue == "a");
  CHECK(q(pod(all_labels), "d").source == "label troupe.dev/queue");
  CHECK(q(pod(StringMap{{kKueueQueueName, "b"}}), "d").queue == "b");
  CHECK(q(pod(StringMap{{kKueueQueueName, "b"}}), "d").source == "label kueue.x-k8s.io/queue-name");
  CHECK(q(pod({}), "d").queue == "d");
  CHECK(contains(q(pod({}), "d").source, "namespace ml"));
  CHECK(q(pod({}), "").queue == "default");
  CHECK(q(pod({}), "").source == "cluster default queue");
  // A Kueue annotation (not a label) is not Kueue's contract: ignored.
  CHECK(q(pod({}, StringMap{{kKueueQueueName, "b"}}), "").queue == "default");
}

TEST_CASE("queueOf: an unknown queue is an error naming the key, the value and the fix", "[queue]") {
  const QueueTree tree = QueueTree::build({queue("team-a"), queue("team-b")});
  auto r = queueOf(pod(StringMap{{kQueueKey, "team-z"}}), tree, "");
  REQUIRE_FALSE(r.isOk());
  const std::string e = r.status().message();
  INFO(e);
  CHECK(contains(e, "label troupe.dev/queue=\"team-z\""));
  CHECK(contains(e, "create Queue \"team-z\""));
  CHECK(contains(e, "team-a"));
  // Never silently another queue: not even the default when the namespace's default is bad.
  auto ns = queueOf(pod({}), tree, "gone");
  REQUIRE_FALSE(ns.isOk());
  CHECK(contains(ns.status().message(), "troupe.dev/default-queue=\"gone\""));
  auto empty = queueOf(pod({}, StringMap{{kQueueKey, ""}}), tree, "");
  REQUIRE_FALSE(empty.isOk());
  CHECK(contains(empty.status().message(), "annotation troupe.dev/queue=\"\""));
}

TEST_CASE("queueOf: an invalid queue's pods see its validation error", "[queue]") {
  const QueueTree tree = QueueTree::build({queue("broken", 0), queue("fine")});
  auto r = queueOf(pod(StringMap{{kKueueQueueName, "broken"}}), tree, "");
  REQUIRE_FALSE(r.isOk());
  CHECK(contains(r.status().message(), "not used"));
  CHECK(contains(r.status().message(), "weight 0"));
}

TEST_CASE("queueOf: a defined-but-invalid default queue is an error too", "[queue]") {
  const QueueTree tree = QueueTree::build({queue("default", -1), queue("fine")});
  auto r = queueOf(pod({}), tree, "");
  REQUIRE_FALSE(r.isOk());
  CHECK(contains(r.status().message(), "cluster default queue=\"default\""));
  CHECK(contains(r.status().message(), "weight -1"));
}

TEST_CASE("queueOf: with queueing off every pod is in the default queue", "[queue]") {
  const QueueTree tree;
  auto r = queueOf(pod({}), tree, "");
  REQUIRE(r.isOk());
  CHECK(r.value().queue == "default");
}
