// Gangs and network topology levels: packed into the fewest zones, blocks and racks;
// troupe.dev/topology-required keeps a gang inside one domain or does not admit it;
// troupe.dev/topology-preferred falls back to the fewest domains of the next wider level.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "support/fixtures.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

struct Place {
  std::string name, zone, block, rack;
  int used = 0;  // GPUs already taken (of 8)
};

// An 8-GPU node per entry, labelled with its zone/block/rack (an empty value: no label), with
// `used` GPUs held by another pod.
void addFleet(Scheduler& s, const std::vector<Place>& fleet) {
  for (const Place& p : fleet) {
    model::NodeFacts f = gpuNode(p.name, 8);
    if (!p.zone.empty()) f.labels["topology.kubernetes.io/zone"] = p.zone;
    if (!p.block.empty()) f.labels["troupe.dev/block"] = p.block;
    if (!p.rack.empty()) f.labels["troupe.dev/rack"] = p.rack;
    REQUIRE(s.upsertNode(f).isOk());
    if (p.used == 0) continue;
    model::Allocation a;
    a.pod_uid = "other-" + p.name;
    a.pod_key = "default/other-" + p.name;
    a.node = p.name;
    for (int g = 0; g < p.used; ++g) a.gpus.push_back(g);
    REQUIRE(s.recordAllocation(a).isOk());
  }
}

std::vector<std::string> names(const std::vector<Place>& fleet) {
  std::vector<std::string> out;
  for (const Place& p : fleet) out.push_back(p.name);
  return out;
}

PodFacts member(const std::string& gang, int index, int gpus, int size, const StringMap& extra = {}) {
  StringMap annotations{{kGangName, gang}, {kGangSize, std::to_string(size)}};
  annotations.insert(extra.begin(), extra.end());
  return gpuPod(gang + "-" + std::to_string(index), gpus, annotations);
}

// Filters every member once; returns the node each was steered to (empty when none passed)
// and the first member's result.
std::vector<std::string> planMembers(Scheduler& s, const std::vector<std::string>& candidates,
                                     const std::string& gang, int gpus, int size, const StringMap& extra,
                                     FilterResult* first = nullptr) {
  std::vector<std::string> out;
  for (int i = 0; i < size; ++i) {
    FilterResult r = s.filter(member(gang, i, gpus, size, extra), candidates);
    if (i == 0 && first) *first = r;
    out.push_back(r.passed.size() == 1 ? r.passed[0] : "");
  }
  return out;
}

std::set<std::string> domainsOf(const std::vector<std::string>& nodes, const std::vector<Place>& fleet,
                                std::string Place::*level) {
  std::set<std::string> out;
  for (const std::string& n : nodes) {
    for (const Place& p : fleet) {
      if (p.name == n) out.insert(p.*level);
    }
  }
  return out;
}

int heldGpus(Scheduler& s) { return s.summary().gangs.held_gpus; }

const StringMap kRequiredRack{{kAnnotationTopologyRequired, "rack"}};
const StringMap kPreferredRack{{kAnnotationTopologyPreferred, "rack"}};

}  // namespace

TEST_CASE("gang topology: one rack when one fits, even if another rack has more GPUs spread thin",
          "[gang][topology]") {
  // r1: two nodes with 4 free GPUs each (8 free). r2: three nodes with 4, 5 and 6 free (15).
  // The node-by-node order (fullest first, then name) would take n1 (r2) and n3 (r1).
  const std::vector<Place> fleet = {{"n1", "z", "b", "r2", 4},
                                    {"n2", "z", "b", "r2", 3},
                                    {"n3", "z", "b", "r1", 4},
                                    {"n4", "z", "b", "r1", 4},
                                    {"n5", "z", "b", "r2", 2}};
  for (const StringMap& annotation : {kRequiredRack, kPreferredRack}) {
    Scheduler s(SchedulerConfig{});
    addFleet(s, fleet);
    std::vector<std::string> placed = planMembers(s, names(fleet), "train", 4, 2, annotation);
    INFO(annotation.begin()->first);
    CHECK(std::set<std::string>(placed.begin(), placed.end()) == std::set<std::string>{"n3", "n4"});
    CHECK(heldGpus(s) == 8);
  }
  SECTION("without levels configured the same gang is spread by node order") {
    SchedulerConfig config;
    config.topology_levels.clear();
    Scheduler s(config);
    addFleet(s, fleet);
    std::vector<std::string> placed = planMembers(s, names(fleet), "train", 4, 2, {});
    CHECK(domainsOf(placed, fleet, &Place::rack) == std::set<std::string>{"r1", "r2"});
  }
}

TEST_CASE("gang topology: required rack with no rack big enough is never admitted, nothing held",
          "[gang][topology]") {
  const std::vector<Place> fleet = {
      {"n1", "", "b1", "r1"}, {"n2", "", "b1", "r1"}, {"n3", "", "b1", "r2"}, {"n4", "", "b1", "r2"}};
  Scheduler s(SchedulerConfig{});
  addFleet(s, fleet);
  FilterResult r = s.filter(member("big", 0, 8, 3, kRequiredRack), names(fleet));
  CHECK(r.passed.empty());
  REQUIRE(r.unresolvable.size() == 4);  // no rack can ever hold it: preemption would not help
  const std::string& reason = r.unresolvable.at("n1");
  CHECK_THAT(reason,
             Catch::Contains("needs 3 pods of 8 GPUs in one rack (troupe.dev/topology-required=rack)"));
  CHECK_THAT(reason, Catch::Contains("the largest rack can hold only 2 even when empty"));
  CHECK(heldGpus(s) == 0);
  CHECK(s.summary().gangs.planned == 0);

  SECTION("without the annotation the cluster as a whole takes it") {
    std::vector<std::string> placed = planMembers(s, names(fleet), "loose", 8, 3, {});
    CHECK(std::count(placed.begin(), placed.end(), "") == 0);
    CHECK(domainsOf(placed, fleet, &Place::rack).size() == 2);
  }
}

TEST_CASE("gang topology: required rack waits while only GPUs across racks are free", "[gang][topology]") {
  // 16 GPUs are free, enough for two 8-GPU members, but one node in each rack.
  const std::vector<Place> fleet = {
      {"n1", "", "b1", "r1", 4}, {"n2", "", "b1", "r1"}, {"n3", "", "b1", "r2"}, {"n4", "", "b1", "r2", 4}};
  Scheduler s(SchedulerConfig{});
  addFleet(s, fleet);
  FilterResult r = s.filter(member("pair", 0, 8, 2, kRequiredRack), names(fleet));
  CHECK(r.passed.empty());
  CHECK(r.unresolvable.empty());  // it would fit once GPUs free up: kube-scheduler may retry
  REQUIRE(r.failed.size() == 4);
  CHECK(r.failed.at("n2") ==
        "troupe: gang default/pair waits for capacity in one rack (troupe.dev/topology-required=rack): the "
        "best "
        "rack, r1, holds 1 of 2 members now (12 GPUs free), 8 more GPUs must free up there (all-or-nothing)");
  CHECK(heldGpus(s) == 0);

  SECTION("once a rack frees up, the gang goes there") {
    REQUIRE(s.release("other-n4"));
    std::vector<std::string> placed = planMembers(s, names(fleet), "pair", 8, 2, kRequiredRack);
    CHECK(std::set<std::string>(placed.begin(), placed.end()) == std::set<std::string>{"n3", "n4"});
  }
}

TEST_CASE("gang topology: preferred rack falls back to two racks of one block, not two blocks",
          "[gang][topology]") {
  // No rack holds three 8-GPU members. Block b1 (racks r1, r2) holds exactly three; block b2
  // holds four but only across its racks. Node order alone would take n1, n2 (b1) and n3 (b2).
  const std::vector<Place> fleet = {{"n1", "z", "b1", "r1"}, {"n2", "z", "b1", "r2"}, {"n3", "z", "b2", "r3"},
                                    {"n4", "z", "b2", "r3"}, {"n5", "z", "b1", "r2"}, {"n6", "z", "b2", "r4"},
                                    {"n7", "z", "b2", "r4"}};
  Scheduler s(SchedulerConfig{});
  addFleet(s, fleet);
  std::vector<std::string> placed = planMembers(s, names(fleet), "pref", 8, 3, kPreferredRack);
  CHECK(std::count(placed.begin(), placed.end(), "") == 0);
  CHECK(domainsOf(placed, fleet, &Place::block) == std::set<std::string>{"b1"});
  CHECK(domainsOf(placed, fleet, &Place::rack) == std::set<std::string>{"r1", "r2"});

  SECTION("preferred block: the best-fitting block, even with a bigger block free") {
    Scheduler t(SchedulerConfig{});
    addFleet(t, fleet);
    std::vector<std::string> p2 =
        planMembers(t, names(fleet), "blk", 8, 3, {{kAnnotationTopologyPreferred, "troupe.dev/block"}});
    CHECK(domainsOf(p2, fleet, &Place::block) == std::set<std::string>{"b1"});
  }
  SECTION("required block with preferred rack: inside one block") {
    Scheduler t(SchedulerConfig{});
    addFleet(t, fleet);
    std::vector<std::string> p2 =
        planMembers(t, names(fleet), "both", 8, 4,
                    {{kAnnotationTopologyRequired, "block"}, {kAnnotationTopologyPreferred, "rack"}});
    CHECK(std::count(p2.begin(), p2.end(), "") == 0);
    CHECK(domainsOf(p2, fleet, &Place::block) == std::set<std::string>{"b2"});  // b1 holds only 3
  }
  SECTION("no block holds it: preferred still admits it on the fewest blocks") {
    Scheduler t(SchedulerConfig{});
    addFleet(t, fleet);
    std::vector<std::string> p2 = planMembers(t, names(fleet), "wide", 8, 6, kPreferredRack);
    CHECK(std::count(p2.begin(), p2.end(), "") == 0);
    CHECK(domainsOf(p2, fleet, &Place::block).size() == 2);
  }
}

TEST_CASE("gang topology: unannotated gangs are packed top-down; unlabelled nodes form no rack",
          "[gang][topology]") {
  // No zone or block labels: racks still group nodes. Node order alone would take n1 (r2) and
  // n2 (r1); nodes without a rack label (n4, n5) come after the racks.
  const std::vector<Place> fleet = {{"n1", "", "", "r2"}, {"n2", "", "", "r1"}, {"n3", "", "", "r1"},
                                    {"n4", "", "", ""},   {"n5", "", "", ""},   {"n6", "", "", "", 4}};
  Scheduler s(SchedulerConfig{});
  addFleet(s, fleet);
  std::vector<std::string> placed = planMembers(s, names(fleet), "plain", 8, 2, {});
  CHECK(std::set<std::string>(placed.begin(), placed.end()) == std::set<std::string>{"n2", "n3"});

  SECTION("required rack ignores nodes without the label") {
    Scheduler t(SchedulerConfig{});
    addFleet(t, {{"u1", "", "", ""}, {"u2", "", "", ""}, {"r", "", "", "r9"}});
    FilterResult r = t.filter(member("req", 0, 8, 2, kRequiredRack), {"u1", "u2", "r"});
    REQUIRE(r.unresolvable.contains("u1"));
    CHECK_THAT(r.unresolvable.at("u1"), Catch::Contains("the largest rack can hold only 1 even when empty"));
    Scheduler none(SchedulerConfig{});
    addFleet(none, {{"u1", "", "", ""}, {"u2", "", "", ""}});
    r = none.filter(member("req", 0, 8, 2, kRequiredRack), {"u1", "u2"});
    REQUIRE(r.unresolvable.contains("u1"));
    CHECK_THAT(r.unresolvable.at("u1"),
               Catch::Contains("no node that matches its request has the label troupe.dev/rack"));
  }
}

TEST_CASE("gang topology: full Node objects in filter requests bring their rack labels", "[gang][topology]") {
  std::vector<model::NodeFacts> nodes;
  for (auto [name, rack] : {std::pair{"f1", "r1"}, {"f2", "r2"}, {"f3", "r2"}}) {
    model::NodeFacts f = gpuNode(name, 8);
    f.labels["troupe.dev/rack"] = rack;
    nodes.push_back(f);
  }
  Scheduler s(SchedulerConfig{});
  std::vector<std::string> steered;
  for (int i = 0; i < 2; ++i) {
    FilterResult r = s.filterNodes(member("full", i, 8, 2, kRequiredRack), nodes, nullptr);
    REQUIRE(r.passed.size() == 1);
    steered.push_back(r.passed[0]);
  }
  CHECK(std::set<std::string>(steered.begin(), steered.end()) == std::set<std::string>{"f2", "f3"});
}

TEST_CASE("gang topology: bad level names reject the pod with the configured levels named",
          "[gang][topology]") {
  Scheduler s(SchedulerConfig{});
  addFleet(s, {{"n1", "", "", "r1"}});
  FilterResult r = s.filter(member("bad", 0, 8, 1, {{kAnnotationTopologyRequired, "shelf"}}), {"n1"});
  REQUIRE(r.unresolvable.contains("n1"));
  CHECK(
      r.unresolvable.at("n1") ==
      "troupe: annotation troupe.dev/topology-required=\"shelf\" is invalid: expected one of the configured "
      "topology levels, by short name or label key: zone (topology.kubernetes.io/zone), block "
      "(troupe.dev/block), rack (troupe.dev/rack)");
  CHECK(r.categories.at("invalid-pod") == 1);

  SECTION("a pod on its own with a valid level is placed as usual") {
    FilterResult single = s.filter(gpuPod("solo", 8, kRequiredRack), {"n1"});
    CHECK(single.passed == std::vector<std::string>{"n1"});
  }
}

TEST_CASE("gang topology: a gang that fits one domain takes the best-fitting one, bigger ones stay whole",
          "[gang][topology]") {
  // Zone a has two empty nodes, zone b one. A gang of two 1-GPU members fits either zone;
  // it goes to b (fewest free GPUs), leaving zone a's 16 GPUs for a larger gang.
  const std::vector<Place> fleet = {{"n1", "a", "", ""}, {"n2", "a", "", ""}, {"n3", "b", "", ""}};
  Scheduler s(SchedulerConfig{});
  addFleet(s, fleet);
  std::vector<std::string> placed = planMembers(s, names(fleet), "small", 1, 2, {});
  CHECK(placed == std::vector<std::string>{"n3", "n3"});
  std::vector<std::string> pair = planMembers(s, names(fleet), "pair", 8, 2, {});
  CHECK(std::set<std::string>(pair.begin(), pair.end()) == std::set<std::string>{"n1", "n2"});
}

TEST_CASE("gang topology: a changed topology annotation re-plans a waiting gang", "[gang][topology]") {
  const std::vector<Place> fleet = {{"n1", "", "", "r1"}, {"n2", "", "", "r2"}};
  Scheduler s(SchedulerConfig{});
  addFleet(s, fleet);
  FilterResult first = s.filter(member("g", 0, 8, 2), names(fleet));
  REQUIRE(first.passed.size() == 1);  // planned over both racks, all 16 GPUs held
  CHECK(heldGpus(s) == 16);
  // The job is resubmitted with required: rack, which no rack can hold: the old plan goes.
  FilterResult again = s.filter(member("g", 0, 8, 2, kRequiredRack), names(fleet));
  CHECK(again.passed.empty());
  REQUIRE(again.unresolvable.contains("n1"));
  CHECK_THAT(again.unresolvable.at("n1"),
             Catch::Contains("the largest rack can hold only 1 even when empty"));
  CHECK(heldGpus(s) == 0);
}
