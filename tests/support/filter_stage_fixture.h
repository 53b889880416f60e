// The parts a filter stage reads and changes (filter_cycle.h), owned by a test without a
// Scheduler: each stage can be run on its own against a cycle record the test fills.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/model/node.h"
#include "troupe/model/topology_levels.h"
#include "troupe/sched/filter/filter_cycle.h"
#include "troupe/sched/gang/gang.h"

namespace troupe::testing {

struct StageFixture {
  std::chrono::steady_clock::time_point t = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  std::function<std::chrono::steady_clock::time_point()> clock = [this] { return t; };
  sched::PolicyConfig policy;
  std::vector<std::string> levels = model::defaultTopologyLevels();
  model::TopologyCatalog catalog;
  sched::PendingPods pending{1000, 1000};
  sched::RequestMixWindow mix_window;
  sched::QueueBook queues;
  sched::ReclaimBook reclaim;
  sched::ClusterState cluster;
  sched::GangBook gangs{cluster, sched::GangBookConfig{.max_timeout = std::chrono::minutes(5),
                                                       .starvation = std::chrono::minutes(2),
                                                       .active_window = std::chrono::seconds(60),
                                                       .max_gangs = 100,
                                                       .topology_levels = levels,
                                                       .clock = clock}};
  sched::ScoreMemo score_memo;
  bool narrow = false;

  sched::FilterParts parts() {
    return sched::FilterParts{policy,    levels,     std::chrono::seconds(30),
                              narrow,    true,       clock,
                              pending,   mix_window, queues,
                              reclaim,   cluster,    gangs,
                              score_memo};
  }
  void addNode(const std::string& name, int gpus, const std::string& product = "NVIDIA-H100-80GB-HBM3") {
    Result<model::NodeInfo> info = model::nodeFromFacts(gpuNode(name, gpus, product), catalog);
    REQUIRE(info.isOk());
    cluster.upsert(std::move(info).value(), cluster.size() + 1);
  }
};

}  // namespace troupe::testing
