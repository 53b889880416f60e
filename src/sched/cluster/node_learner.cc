#include "troupe/sched/cluster/node_learner.h"

namespace troupe::sched {

bool NodeLearner::expiryDue(Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (now < next_expiry_) return false;
  next_expiry_ = now + std::chrono::seconds(1);
  return true;
}

std::vector<std::string> NodeLearner::expire(Clock::time_point now) {
  std::vector<std::string> gone;
  if (!config_.enabled) return gone;
  std::lock_guard lock(mu_);
  for (auto it = learned_.begin(); it != learned_.end();) {
    if (now - it->second >= config_.ttl) {
      gone.push_back(it->first);
      it = learned_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

std::vector<const model::NodeFacts*> NodeLearner::admit(
    const std::vector<model::NodeFacts>& nodes, Clock::time_point now,
    std::vector<std::pair<std::string, std::string>>* refused, std::vector<std::string>* learn_errors) {
  // Kubernetes names a node with a DNS subdomain: at most 253 characters.
  constexpr size_t kMaxNodeName = 253;
  std::vector<const model::NodeFacts*> accepted;
  if (!config_.enabled) return accepted;
  accepted.reserve(nodes.size());
  size_t over_cap = 0;
  {
    std::lock_guard lock(mu_);
    for (const model::NodeFacts& facts : nodes) {
      if (facts.name.empty() || facts.name.size() > kMaxNodeName) {
        refused->emplace_back(facts.name, "troupe: a node name must have 1 to 253 characters, this one has " +
                                              std::to_string(facts.name.size()) +
                                              "; the node was not learned");
        continue;
      }
      auto it = learned_.find(facts.name);
      if (it == learned_.end()) {
        if (learned_.size() >= config_.max_nodes) {
          ++over_cap;
          refused->emplace_back(facts.name,
                                "troupe: node not learned: Troupe already keeps the most nodes it learns "
                                "from requests (" +
                                    std::to_string(config_.max_nodes) +
                                    ", learnedNodes.maxNodes); nodes not seen for learnedNodes.ttlSeconds "
                                    "are forgotten");
          continue;
        }
        it = learned_.emplace(facts.name, now).first;
      }
      it->second = now;
      accepted.push_back(&facts);
    }
  }
  if (over_cap > 0 && learn_errors) {
    learn_errors->push_back(std::to_string(over_cap) +
                            " nodes of the request were not learned: " + std::to_string(config_.max_nodes) +
                            " learned nodes are kept at most (learnedNodes.maxNodes)");
  }
  return accepted;
}

size_t NodeLearner::size() const {
  std::lock_guard lock(mu_);
  return learned_.size();
}

}  // namespace troupe::sched
