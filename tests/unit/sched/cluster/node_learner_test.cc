// NodeLearner: which request-borne nodes learn mode keeps, refuses and forgets.
#include "troupe/sched/cluster/node_learner.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace {

using troupe::sched::Clock;
using troupe::sched::NodeLearner;
using troupe::sched::NodeLearning;

NodeLearning learning(size_t max_nodes, std::chrono::milliseconds ttl) {
  NodeLearning l;
  l.max_nodes = max_nodes;
  l.ttl = ttl;
  return l;
}

}  // namespace

TEST_CASE("node learner: keeps at most max_nodes, refusing new ones with a reason; names are checked",
          "[scheduler][learn]") {
  NodeLearner learner(learning(2, std::chrono::minutes(1)));
  const Clock::time_point t0{};
  std::vector<troupe::model::NodeFacts> nodes{
      troupe::testing::gpuNode("a", 8), troupe::testing::gpuNode("", 8), troupe::testing::gpuNode("b", 8),
      troupe::testing::gpuNode("c", 8), troupe::testing::gpuNode(std::string(254, 'x'), 8)};
  std::vector<std::pair<std::string, std::string>> refused;
  std::vector<std::string> errors;
  const auto accepted = learner.admit(nodes, t0, &refused, &errors);
  REQUIRE(accepted.size() == 2);
  CHECK(accepted[0]->name == "a");
  CHECK(accepted[1]->name == "b");
  REQUIRE(refused.size() == 3);
  CHECK_THAT(refused[0].second, Catch::Contains("1 to 253 characters, this one has 0"));
  CHECK(refused[1].first == "c");
  CHECK_THAT(refused[1].second, Catch::Contains("learnedNodes.maxNodes"));
  CHECK_THAT(refused[2].second, Catch::Contains("this one has 254"));
  REQUIRE(errors.size() == 1);  // one line for all the refusals of the cap
  CHECK_THAT(errors[0], Catch::StartsWith("1 nodes of the request were not learned"));
  CHECK(learner.size() == 2);

  refused.clear();
  CHECK(learner.admit({troupe::testing::gpuNode("a", 4)}, t0, &refused, nullptr).size() == 1);  // known: kept
  CHECK(refused.empty());
}

TEST_CASE("node learner: a node not seen for the TTL is forgotten; expiry runs at most once a second",
          "[scheduler][learn]") {
  NodeLearner learner(learning(10, std::chrono::seconds(60)));
  const Clock::time_point t0{};
  std::vector<std::pair<std::string, std::string>> refused;
  learner.admit({troupe::testing::gpuNode("a", 8), troupe::testing::gpuNode("b", 8)}, t0, &refused, nullptr);
  learner.admit({troupe::testing::gpuNode("b", 8)}, t0 + std::chrono::seconds(30), &refused, nullptr);
  CHECK(learner.expire(t0 + std::chrono::seconds(59)).empty());
  CHECK(learner.expire(t0 + std::chrono::seconds(60)) == std::vector<std::string>{"a"});
  CHECK(learner.size() == 1);

  CHECK(learner.expiryDue(t0));
  CHECK_FALSE(learner.expiryDue(t0 + std::chrono::milliseconds(999)));
  CHECK(learner.expiryDue(t0 + std::chrono::seconds(1)));
}

TEST_CASE("node learner: off, it learns and forgets nothing", "[scheduler][learn]") {
  NodeLearning off;
  off.enabled = false;
  NodeLearner learner(off);
  std::vector<std::pair<std::string, std::string>> refused;
  CHECK(learner.admit({troupe::testing::gpuNode("a", 8)}, Clock::time_point{}, &refused, nullptr).empty());
  CHECK(learner.size() == 0);
  CHECK(learner.expire(Clock::time_point{} + std::chrono::hours(10)).empty());
}
