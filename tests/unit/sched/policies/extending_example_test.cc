// docs/extending.md's worked example, compiled and registered here so the docs cannot rot: the
// document's copy is checked byte for byte, the README's excerpt line by line (test cases below).
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "support/policy_test_support.h"

// --- docs/extending.md: src/sched/policies/fewest_pods.cc ---
// fewest-pods: the node hosting the fewest pods wins.
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {
namespace {

class FewestPodsPolicy final : public Policy {
 public:
  std::string_view name() const override { return "fewest-pods"; }

  NodeScore score(const model::NodeState& node, const GpuRequest& req, const ScoreContext&) const override {
    return paperScore(node, req, emptiness(node));  // the FGD paper's GPU choice on the node
  }

  double unitScore(const model::NodeState& node, const GpuRequest&, const Placement&,
                   const ScoreContext&) const override {
    return emptiness(node);
  }

 private:
  // 1 for an empty node, 1/2 with one pod, 1/3 with two: higher wins, already on 0..1.
  static double emptiness(const model::NodeState& node) { return 1.0 / (1 + node.podCount()); }
};

}  // namespace

PolicyEntry fewestPodsPolicy() {
  return {"fewest-pods", [](const PolicyArgs&) -> PolicyPtr { return std::make_shared<FewestPodsPolicy>(); }};
}

}  // namespace troupe::sched
// --- end of the example ---

namespace {

namespace tt = troupe::testing;

TEST_CASE("extending: the example policy registers and ranks as documented", "[policy][extending]") {
  troupe::sched::PolicyRegistry registry;
  REQUIRE(registry.add(troupe::sched::fewestPodsPolicy()).isOk());
  auto made = registry.create("fewest-pods");
  REQUIRE(made.isOk());
  const troupe::sched::Policy& policy = *made.value();
  tt::SmallCluster c;
  tt::SmallCluster::use(c.add("busy", 4), {0});
  tt::SmallCluster::use(c.add("busier", 4), {0, 1});
  troupe::model::NodeState& idle = c.add("idle", 4);
  CHECK(c.best(policy, tt::request(1)) == "idle");
  CHECK(policy.score(idle, tt::request(2), {}).placement.gpus == std::vector<int>{0, 1});
  CHECK(policy.unitScore(idle, tt::request(2), {}, {}) == 1.0);
}

// The example as this file compiles it: the text between the markers above.
std::string compiledExample() {
  const auto self = troupe::testing::readFile(troupe::testing::sourceDir() +
                                              "/tests/unit/sched/policies/extending_example_test.cc");
  REQUIRE(self);
  const std::string begin = "// --- docs/extending.md: src/sched/policies/fewest_pods.cc ---\n";
  const size_t from = self->find(begin);
  REQUIRE(from != std::string::npos);
  const size_t to = self->find("// --- end of the example ---", from);
  REQUIRE(to != std::string::npos);
  return self->substr(from + begin.size(), to - from - begin.size());
}

// The document shows the compiled example unchanged.
TEST_CASE("extending: docs/extending.md shows the compiled example", "[policy][extending][docs]") {
  const auto doc = troupe::testing::readFile(troupe::testing::sourceDir() + "/docs/extending.md");
  REQUIRE(doc);
  CHECK(doc->find("```cpp\n" + compiledExample() + "```") != std::string::npos);
}

// The README shows an excerpt: its lines must be lines of the compiled example, in order.
TEST_CASE("extending: the README's excerpt is taken from the compiled example", "[policy][extending][docs]") {
  const auto readme = troupe::testing::readFile(troupe::testing::sourceDir() + "/README.md");
  REQUIRE(readme);
  const size_t section = readme->find("## Extending Troupe");
  REQUIRE(section != std::string::npos);
  const size_t from = readme->find("```cpp\n", section);
  REQUIRE(from != std::string::npos);
  const size_t to = readme->find("```", from + 7);
  REQUIRE(to != std::string::npos);
  std::istringstream excerpt(readme->substr(from + 7, to - from - 7));
  std::istringstream code(compiledExample());
  std::string want, have;
  int matched = 0;
  while (std::getline(excerpt, want)) {
    bool found = false;
    while (!found && std::getline(code, have)) found = have == want;
    INFO("README line not in the compiled example (or out of order): " << want);
    CHECK(found);
    matched += found ? 1 : 0;
  }
  CHECK(matched >= 5);
}

}  // namespace
