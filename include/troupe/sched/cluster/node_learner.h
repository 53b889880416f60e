// Learn mode's bookkeeping: which nodes were taken from request bodies and when a request last
// carried each, so that nodes nobody sends any more are forgotten after the TTL and at most
// `max_nodes` are kept (see NodeLearning). It decides; the Scheduler adds and removes the
// nodes in its cluster model.
//
// Thread-safe: its own lock, taken before (never inside) the Scheduler's model lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "troupe/model/node.h"

namespace troupe::sched {

using Clock = std::chrono::steady_clock;

// Learn mode: nodes taken from the bodies of full-node requests (kube-scheduler's
// nodeCacheCapable: false), for a Troupe with neither --cluster nor the Kubernetes API. Off,
// request bodies never add or change a node: the facts come from --cluster or the API only.
// On, what anyone who reaches the verbs sends is believed, so it is bounded: a node not seen
// in a request for `ttl` is forgotten, and at most `max_nodes` are kept (new ones are refused
// with a reason until others expire; the ones kept are never pushed out).
struct NodeLearning {
  bool enabled = true;
  size_t max_nodes = 10000;
  std::chrono::milliseconds ttl{std::chrono::hours(1)};
};

class NodeLearner {
 public:
  explicit NodeLearner(NodeLearning config) : config_(config) {}

  bool enabled() const { return config_.enabled; }
  // True at most once a second: time to forget the expired nodes before learning more.
  bool expiryDue(Clock::time_point now);
  // Forgets the nodes not seen for the TTL; returns their names (to remove from the model).
  std::vector<std::string> expire(Clock::time_point now);
  // Notes the nodes of a request as seen now. Returns those to add or update; `refused`
  // gets each node not learned with the reason (a bad name, or the cap reached) and
  // `learn_errors` one line for all the refusals of the cap.
  std::vector<const model::NodeFacts*> admit(const std::vector<model::NodeFacts>& nodes,
                                             Clock::time_point now,
                                             std::vector<std::pair<std::string, std::string>>* refused,
                                             std::vector<std::string>* learn_errors);
  size_t size() const;

 private:
  const NodeLearning config_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Clock::time_point> learned_;  // node -> last seen in a request
  Clock::time_point next_expiry_{};
};

}  // namespace troupe::sched
