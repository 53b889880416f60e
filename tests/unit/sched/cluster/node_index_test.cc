// NodeIndex: the flat name -> node table behind filter and prioritize, against a std::map.
#include "troupe/sched/cluster/node_index.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "support/fixtures.h"

namespace {

using troupe::model::NodeState;
using troupe::sched::NodeIndex;

}  // namespace

TEST_CASE("node index: finds, replaces and erases like a map, through growth and wrap-around",
          "[scheduler][node-index]") {
  troupe::model::TopologyCatalog catalog;
  // The nodes live in an unordered_map, as in the Scheduler: addresses stay put on rehash.
  std::unordered_map<std::string, NodeState> nodes;
  std::map<std::string, const NodeState*> want;
  NodeIndex index;
  auto node = [&](const std::string& name) -> const NodeState* {
    auto it = nodes.find(name);
    if (it == nodes.end()) {
      auto info = troupe::model::nodeFromFacts(troupe::testing::gpuNode(name, 8), catalog);
      REQUIRE(info.isOk());
      it = nodes.emplace(name, NodeState(info.value())).first;
    }
    return &it->second;
  };
  CHECK(index.find("nothing") == nullptr);
  const NodeState* garbage = node("garbage");
  std::vector<const NodeState*> none(1, garbage);  // findAll must overwrite it
  index.findAll(std::vector<std::string>{"nothing"}, none);
  CHECK(none[0] == nullptr);
  CHECK_FALSE(index.erase("nothing"));

  uint64_t state = 7;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  // A small name space, so inserts, repeats and erases of the same names interleave and probe
  // runs are long; then a check of every name after each step.
  for (int step = 0; step < 4000; ++step) {
    const std::string name = "node-" + std::to_string(next(300));
    INFO("step " << step << " " << name);
    if (next(3) < 2) {
      const NodeState* n = node(name);
      index.insert(n);
      want[name] = n;
    } else {
      CHECK(index.erase(name) == (want.erase(name) == 1));
    }
    REQUIRE(index.size() == want.size());
    if (step % 50 == 0 || step > 3900) {
      std::vector<std::string> probes;
      for (int i = 0; i < 300; ++i) probes.push_back("node-" + std::to_string(i));
      std::vector<const NodeState*> batch(probes.size(), nullptr);
      index.findAll(probes, batch);
      for (int i = 0; i < 300; ++i) {
        const std::string& probe = probes[static_cast<size_t>(i)];
        auto it = want.find(probe);
        REQUIRE(index.find(probe) == (it == want.end() ? nullptr : it->second));
        REQUIRE(batch[static_cast<size_t>(i)] == index.find(probe));
      }
    }
  }
  CHECK(index.find("node-") == nullptr);
  CHECK(index.find("") == nullptr);
}
