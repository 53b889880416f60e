#include "troupe/sched/cluster/shared_node_values.h"

#include <algorithm>
#include <bit>

#include "troupe/sched/score/fragmentation.h"

namespace troupe::sched {
namespace {

uint64_t hashKey(const std::array<uint64_t, 8>& key) {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (uint64_t w : key) {
    h ^= w;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
  }
  return h;
}

}  // namespace

SharedNodeValues::SharedNodeValues(const Policy& policy, const GpuRequest& req, const ScoreContext& context)
    : policy_(policy),
      hooks_(hooksOf(policy)),
      req_(req),
      context_(context),
      shareable_(hooks_.sharesNodeValues()) {
  if (!shareable_) return;
  const RequestMix& mix = context.mix ? *context.mix : RequestMix::defaults();
  for (const TypicalRequest& m : mix.entries()) cpu_thresholds_.push_back(m.cpu_milli);
  // Without model lists in the mix every product has the same access: the product string
  // (a cache miss per node, it lives on the heap) need not be read.
  const auto& entries = mix.entries();
  products_matter_ =
      std::any_of(entries.begin(), entries.end(), [](const TypicalRequest& m) { return !m.models.empty(); });
  std::sort(cpu_thresholds_.begin(), cpu_thresholds_.end());
  cpu_thresholds_.erase(std::unique(cpu_thresholds_.begin(), cpu_thresholds_.end()), cpu_thresholds_.end());
  slots_.resize(64);
}

uint64_t SharedNodeValues::accessOf(const std::string& product) {
  for (const auto& [p, id] : access_) {
    if (p == product) return id;
  }
  const RequestMix& mix = context_.mix ? *context_.mix : RequestMix::defaults();
  std::vector<uint64_t> access = mixAccess(mix, product);
  auto it = std::find(distinct_access_.begin(), distinct_access_.end(), access);
  const uint64_t id = static_cast<uint64_t>(it - distinct_access_.begin());
  if (it == distinct_access_.end()) distinct_access_.push_back(std::move(access));
  access_.emplace_back(product, id);
  return id;
}

// fragmentation() compares CPU left only against the mix's requests (cpu_left >= m.cpu_milli):
// two amounts with the same number of thresholds at or below them compare alike with each.
uint32_t SharedNodeValues::cpuClass(int64_t cpu_left) const {
  return static_cast<uint32_t>(std::upper_bound(cpu_thresholds_.begin(), cpu_thresholds_.end(), cpu_left) -
                               cpu_thresholds_.begin());
}

bool SharedNodeValues::keyOf(const model::NodeState& node, Key& key) {
  const int gpus = node.gpuCount();
  if (gpus > kMaxKeyedGpus) return false;
  const int64_t cpu = cpuLeft(node);
  key[0] = reinterpret_cast<uintptr_t>(&node.topology());
  key[1] = products_matter_ ? accessOf(node.info().gpu_product) : 0;
  key[2] = uint64_t{cpuClass(cpu)} << 32 | cpuClass(cpu - req_.cpu_milli);
  key[3] = static_cast<uint64_t>(static_cast<uint32_t>(gpus)) << 48 |
           static_cast<uint64_t>(hooks_.shareClass(node, req_, context_) & 0xFFFF) << 32 |
           static_cast<uint32_t>(node.unknownHeld());
  // Per-GPU use, 16 bits each (at most kMilliPerGpu), four GPUs per word.
  for (int g = 0; g < gpus; ++g) {
    key[4 + static_cast<size_t>(g / 4)] |= static_cast<uint64_t>(static_cast<uint16_t>(node.gpuUsedMilli(g)))
                                           << (16 * (g % 4));
  }
  return true;
}

void SharedNodeValues::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (!s.used) continue;
    size_t i = hashKey(s.key) & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

double SharedNodeValues::value(const model::NodeState& node) {
  Key key{};
  if (!shareable_ || !keyOf(node, key)) {
    ++computed_;
    return policy_.rankValue(node, req_, context_);
  }
  const size_t mask = slots_.size() - 1;
  size_t i = hashKey(key) & mask;
  while (slots_[i].used) {
    if (slots_[i].key == key) return slots_[i].value;
    i = (i + 1) & mask;
  }
  const double v = policy_.rankValue(node, req_, context_);
  ++computed_;
  slots_[i] = Slot{key, v, true};
  if (++filled_ * 2 > slots_.size()) grow();
  return v;
}

}  // namespace troupe::sched
