#include "troupe/sched/cluster/cluster_state.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string_view>

namespace troupe::sched {

// Every field of the facts in a fixed order, each string's hash and length mixed in, maps
// preceded by their size. 64 bits: a collision (a changed node taken for unchanged) is not a
// practical risk.
uint64_t factsFingerprint(const model::NodeFacts& facts) {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  auto mix = [&h](std::string_view text) {
    h ^= std::hash<std::string_view>{}(text) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h ^= text.size() * 0xBF58476D1CE4E5B9ULL;
    h *= 0x94D049BB133111EBULL;
  };
  auto mixMap = [&](const model::StringMap& map) {
    mix(std::to_string(map.size()));
    for (const auto& [key, value] : map) {
      mix(key);
      mix(value);
    }
  };
  mix(facts.name);
  mixMap(facts.labels);
  mixMap(facts.annotations);
  mix(facts.allocatable_gpus);
  mix(facts.cpu);
  mix(facts.memory);
  mix(facts.pods);
  mix(facts.unschedulable ? "1" : "0");
  mix(facts.dra_driver);
  mix(std::to_string(facts.dra_devices));
  mix(facts.dra_product);
  mix(std::to_string(facts.dra_memory_mib));
  return h == 0 ? 1 : h;  // 0 means "never built"
}

const model::NodeState* ClusterState::find(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

model::NodeState* ClusterState::find(const std::string& name) {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

bool ClusterState::unchanged(const std::string& name, uint64_t fingerprint) const {
  const model::NodeState* node = find(name);
  return node && node->factsFingerprint() == fingerprint;
}

void CpuPerGpu::add(const model::NodeInfo& node, int sign) {
  if (node.gpu_count == 0 || node.cpu_milli <= 0) return;  // CPU not tracked: unknown
  cpu_milli_ += sign * node.cpu_milli;
  gpus_ += sign * node.gpu_count;
}

double CpuPerGpu::value() const {
  if (gpus_ <= 0) return 0.0;
  return static_cast<double>(cpu_milli_) / (static_cast<double>(gpus_) * model::kMilliPerGpu);
}

void ClusterState::upsert(model::NodeInfo info, uint64_t fingerprint) {
  const std::string name = info.name;
  auto it = nodes_.find(name);
  if (it != nodes_.end()) cpu_per_gpu_.add(it->second.info(), -1);
  if (it == nodes_.end()) {
    it = nodes_.emplace(name, model::NodeState(std::move(info))).first;
    index_.insert(&it->second);
    if (free_ordinals_.empty()) {
      it->second.setOrdinal(next_ordinal_++);
    } else {
      it->second.setOrdinal(free_ordinals_.back());
      free_ordinals_.pop_back();
    }
    const uint32_t ordinal = it->second.ordinal();
    if (ordinal_births_.size() <= ordinal) ordinal_births_.resize(ordinal + 1, 0);
    ordinal_births_[ordinal] = ++births_;
  } else {
    it->second.setInfo(std::move(info));
  }
  cpu_per_gpu_.add(it->second.info());
  it->second.setFactsFingerprint(fingerprint);
}

std::optional<uint32_t> ClusterState::remove(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  for (const auto& [uid, a] : it->second.allocations()) pod_node_.erase(uid);
  cpu_per_gpu_.add(it->second.info(), -1);
  index_.erase(name);
  const uint32_t ordinal = it->second.ordinal();
  free_ordinals_.push_back(ordinal);
  nodes_.erase(it);
  return ordinal;
}

bool ClusterState::bornBy(const model::NodeState& node, uint64_t births) const {
  const uint32_t ordinal = node.ordinal();
  return ordinal < ordinal_births_.size() && ordinal_births_[ordinal] <= births;
}

const std::string* ClusterState::nodeOf(const std::string& pod_uid) const {
  auto held = pod_node_.find(pod_uid);
  return held == pod_node_.end() ? nullptr : &held->second;
}

std::optional<model::Allocation> ClusterState::allocationOf(const std::string& pod_uid) const {
  const std::string* node_name = nodeOf(pod_uid);
  const model::NodeState* node = node_name ? find(*node_name) : nullptr;
  const model::Allocation* a = node ? node->find(pod_uid) : nullptr;
  if (!a) return std::nullopt;
  return *a;
}

Status ClusterState::checkRecord(const model::Allocation& allocation) const {
  if (!find(allocation.node)) return notFound("node " + allocation.node + " is unknown to Troupe");
  if (const std::string* held = nodeOf(allocation.pod_uid)) {
    return failedPrecondition("pod " + allocation.pod_key + " already holds GPUs on node " + *held);
  }
  return Status::ok();
}

Status ClusterState::record(const model::Allocation& allocation) {
  if (Status s = checkRecord(allocation); !s.isOk()) return s;
  if (Status s = find(allocation.node)->add(allocation); !s.isOk()) return s;
  pod_node_[allocation.pod_uid] = allocation.node;
  return Status::ok();
}

bool ClusterState::release(const std::string& pod_uid) {
  auto held = pod_node_.find(pod_uid);
  if (held == pod_node_.end()) return false;
  model::NodeState* node = find(held->second);
  const bool removed = node && node->remove(pod_uid);
  pod_node_.erase(held);
  return removed;
}

Status ClusterState::hold(const model::Allocation& allocation) {
  model::NodeState* node = find(allocation.node);
  if (!node) return notFound("node " + allocation.node + " is unknown to Troupe");
  return node->add(allocation);
}

void ClusterState::unhold(const std::string& node_name, const std::string& hold_uid) {
  if (model::NodeState* node = find(node_name)) node->remove(hold_uid);
}

void ClusterState::summarize(ClusterSummary& s, size_t max_node_rows) const {
  std::map<std::string, ClusterSummary::Row> rows;
  for (const auto& [name, node] : nodes_) {
    if (node.gpuCount() == 0) continue;
    const std::string product = node.info().gpu_product.empty() ? "unknown" : node.info().gpu_product;
    ClusterSummary::Row& r = rows[product];
    r.product = product;
    ++r.nodes;
    r.gpus += node.gpuCount();
    r.used_milli += node.usedMilliTotal();
    r.shared_gpus += node.sharedGpuCount();
    int free = node.wholeFreeCount();
    r.whole_free += free;
    if (free >= 8) ++r.nodes_with_free_8;
    if (!s.node_rows_omitted && s.by_node.size() == max_node_rows) {
      s.node_rows_omitted = true;
      s.by_node = {};  // frees what was built; no rows from here on
    }
    if (!s.node_rows_omitted) {
      s.by_node.push_back({name, product, node.gpuCount(), node.usedMilliTotal(), node.sharedGpuCount()});
    }
    s.pods += node.gpuPodCount();
    // Free GPUs stranded below the node's largest power-of-two request size.
    int largest = 1;
    while (largest * 2 <= std::min(8, node.gpuCount())) largest *= 2;
    s.fragmented_gpus += free % largest;
  }
  for (auto& [p, r] : rows) s.by_product.push_back(r);
  std::sort(
      s.by_node.begin(), s.by_node.end(),
      [](const ClusterSummary::NodeRow& a, const ClusterSummary::NodeRow& b) { return a.node < b.node; });
}

}  // namespace troupe::sched
