#include "troupe/model/node.h"

#include <algorithm>
#include <bit>
#include <mutex>

#include "troupe/common/quantity.h"
#include "troupe/common/strings.h"
#include "troupe/model/pod_contract.h"

namespace troupe::model {
namespace {

const std::string* lookup(const StringMap& map, const char* key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : &it->second;
}

// The sum of what the pods on one node hold (CPU, memory) may reach this much: sixteen times
// the largest single amount, still far from overflowing in the model's arithmetic.
constexpr int64_t kMaxUsedAmount = kMaxResourceAmount * 16;

// A capacity (cpu in millicores; memory, pods as whole units): 0 to kMaxResourceAmount.
Result<int64_t> capacityField(const std::string& node, const std::string& text, const char* what,
                              bool milli) {
  Result<int64_t> v = milli ? parseQuantityMilli(text) : parseQuantityValue(text);
  if (!v.isOk()) {
    return invalidArgument("node " + node + ": " + what + ": " + v.status().message());
  }
  if (v.value() < 0 || v.value() > kMaxResourceAmount) {
    return invalidArgument("node " + node + ": " + what + " \"" + text + "\" must be from 0 to " +
                           std::to_string(kMaxResourceAmount) + (milli ? "m" : ""));
  }
  return v;
}

}  // namespace

Result<std::shared_ptr<const GpuTopology>> TopologyCatalog::profile(const std::string& name, int gpus) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(name, gpus);
  if (auto it = profiles_.find(key); it != profiles_.end()) return it->second;
  Result<GpuTopology> t = makeProfile(name, gpus);
  if (!t.isOk()) return t.status();
  auto shared = std::make_shared<const GpuTopology>(std::move(t).value());
  profiles_.emplace(key, shared);
  return shared;
}

Result<NodeInfo> nodeFromFacts(const NodeFacts& facts, TopologyCatalog& catalog) {
  NodeInfo info;
  info.name = facts.name;
  info.labels = facts.labels;
  info.unschedulable = facts.unschedulable;
  if (facts.name.empty()) return invalidArgument("node without metadata.name");

  if (!facts.allocatable_gpus.empty()) {
    Result<int64_t> v = parseQuantityValue(facts.allocatable_gpus);
    if (!v.isOk() || v.value() < 0 || v.value() > 64) {
      return invalidArgument("node " + facts.name + ": allocatable nvidia.com/gpu \"" +
                             facts.allocatable_gpus + "\" must be a whole number from 0 to 64");
    }
    info.gpu_count = static_cast<int>(v.value());
  }
  // A node without device-plugin GPUs whose GPUs a DRA driver publishes: DRA serves its
  // nvidia.com/gpu (DRAExtendedResource), and the slices say how many there are.
  const bool dra = !facts.dra_driver.empty() && info.gpu_count == 0 && facts.dra_devices > 0;
  if (dra) {
    if (facts.dra_devices > 64) {
      return invalidArgument("node " + facts.name + ": the DRA driver " + facts.dra_driver + " publishes " +
                             std::to_string(facts.dra_devices) + " GPUs; Troupe handles at most 64 per node");
    }
    info.gpu_count = facts.dra_devices;
    info.dra_driver = facts.dra_driver;
  } else if (!facts.allocatable_gpus.empty()) {
    // Device-plugin GPUs: counted above.
  } else if (const std::string* count = lookup(facts.labels, kLabelGpuCount)) {
    Result<int64_t> v = parseQuantityValue(*count);
    if (!v.isOk() || v.value() < 0 || v.value() > 64) {
      return invalidArgument("node " + facts.name + ": label nvidia.com/gpu.count=\"" + *count +
                             "\" must be a whole number from 0 to 64");
    }
    info.gpu_count = static_cast<int>(v.value());
  }
  if (const std::string* product = lookup(facts.labels, kLabelGpuProduct)) info.gpu_product = *product;
  if (const std::string* memory = lookup(facts.labels, kLabelGpuMemory)) {
    // MiB; bounded so that the bytes (MiB x 2^20) stay within kMaxResourceAmount.
    Result<int64_t> v = parseQuantityValue(*memory);
    if (!v.isOk() || v.value() < 0 || v.value() > (kMaxResourceAmount >> 20)) {
      return invalidArgument("node " + facts.name + ": label nvidia.com/gpu.memory=\"" + *memory +
                             "\" must be the GPU memory in MiB, e.g. \"81559\" (at most " +
                             std::to_string(kMaxResourceAmount >> 20) + ")");
    }
    info.gpu_memory_mib = v.value();
  }
  if (dra && !facts.dra_product.empty()) info.gpu_product = facts.dra_product;
  if (dra && facts.dra_memory_mib > 0) info.gpu_memory_mib = facts.dra_memory_mib;
  if (!facts.cpu.empty()) {
    Result<int64_t> v = capacityField(facts.name, facts.cpu, "cpu", true);
    if (!v.isOk()) return v.status();
    info.cpu_milli = v.value();
  }
  if (!facts.memory.empty()) {
    Result<int64_t> v = capacityField(facts.name, facts.memory, "memory", false);
    if (!v.isOk()) return v.status();
    info.memory_bytes = v.value();
  }
  if (!facts.pods.empty()) {
    Result<int64_t> v = capacityField(facts.name, facts.pods, "pods", false);
    if (!v.isOk()) return v.status();
    info.max_pods = v.value();
  }

  // Topology: a measured matrix wins over a named profile, which wins over the product guess.
  if (const std::string* matrix = lookup(facts.annotations, kAnnotationGpuTopology)) {
    Result<std::vector<std::vector<std::string>>> rows = parseMatrixText(*matrix);
    if (!rows.isOk()) {
      return invalidArgument("node " + facts.name +
                             ": annotation troupe.dev/gpu-topology: " + rows.status().message());
    }
    Result<GpuTopology> t = topologyFromMatrix(rows.value(), 25.0, 32.0);
    if (!t.isOk()) {
      return invalidArgument("node " + facts.name +
                             ": annotation troupe.dev/gpu-topology: " + t.status().message());
    }
    if (t.value().size() != info.gpu_count) {
      return invalidArgument("node " + facts.name + ": annotation troupe.dev/gpu-topology has " +
                             std::to_string(t.value().size()) + " rows but the node has " +
                             std::to_string(info.gpu_count) + " GPUs");
    }
    info.topology = std::make_shared<const GpuTopology>(std::move(t).value());
    return info;
  }
  std::string profile = profileForProduct(info.gpu_product, info.gpu_count);
  if (const std::string* label = lookup(facts.labels, kLabelTopologyProfile)) profile = *label;
  Result<std::shared_ptr<const GpuTopology>> shared = catalog.profile(profile, info.gpu_count);
  if (!shared.isOk()) {
    return invalidArgument("node " + facts.name +
                           ": label troupe.dev/topology-profile: " + shared.status().message());
  }
  info.topology = shared.value();
  return info;
}

NodeState::NodeState(NodeInfo info) : info_(std::move(info)) {
  // Masks are 64 bits wide and nodeFromFacts refuses more; a NodeInfo built by hand with
  // more GPUs keeps the first 64 rather than writing past the per-GPU array.
  info_.gpu_count = std::clamp(info_.gpu_count, 0, 64);
  refreshFreeMask();
}

void NodeState::updateFreeBit(int gpu) {
  const uint64_t bit = uint64_t{1} << gpu;
  free_mask_ = used_milli_[static_cast<size_t>(gpu)] == 0 ? free_mask_ | bit : free_mask_ & ~bit;
}

void NodeState::refreshFreeMask() {
  free_mask_ = 0;
  for (int g = 0; g < info_.gpu_count; ++g) updateFreeBit(g);
}

void NodeState::setInfo(NodeInfo info) {
  ++changes_;
  info_ = std::move(info);
  info_.gpu_count = std::clamp(info_.gpu_count, 0, 64);
  used_milli_.fill(0);
  unknown_held_ = 0;
  cpu_used_ = 0;
  memory_used_ = 0;
  // Re-apply what still fits the new shape; an allocation on a GPU that vanished is kept as
  // an unknown holder so its GPUs are never handed out twice.
  for (auto& [uid, a] : allocations_) {
    bool fits =
        std::all_of(a.gpus.begin(), a.gpus.end(), [&](int g) { return g >= 0 && g < info_.gpu_count; });
    if (!fits) {
      a.unknown_gpus += static_cast<int>(a.gpus.size());
      a.gpus.clear();
    }
    for (int g : a.gpus)
      used_milli_[static_cast<size_t>(g)] =
          static_cast<int16_t>(used_milli_[static_cast<size_t>(g)] + a.milli_per_gpu);
    unknown_held_ += a.unknown_gpus;
    cpu_used_ += a.cpu_milli;
    memory_used_ += a.memory_bytes;
  }
  refreshFreeMask();
}

int NodeState::wholeFreeCount() const { return std::max(0, std::popcount(fullyFreeMask()) - unknown_held_); }

int64_t NodeState::usedMilliTotal() const {
  int64_t sum = static_cast<int64_t>(unknown_held_) * kMilliPerGpu;
  for (int g = 0; g < info_.gpu_count; ++g) sum += used_milli_[static_cast<size_t>(g)];
  return std::min(sum, static_cast<int64_t>(info_.gpu_count) * kMilliPerGpu);
}

int NodeState::sharedGpuCount() const {
  return static_cast<int>(std::count_if(used_milli_.begin(), used_milli_.begin() + info_.gpu_count,
                                        [](int64_t u) { return u > 0 && u < kMilliPerGpu; }));
}

Status NodeState::add(const Allocation& a) {
  if (allocations_.count(a.pod_uid)) {
    return failedPrecondition("pod " + a.pod_key + " already holds GPUs on node " + info_.name);
  }
  for (int g : a.gpus) {
    if (g < 0 || g >= info_.gpu_count) {
      return invalidArgument("GPU index " + std::to_string(g) + " is out of range for node " + info_.name +
                             " with " + std::to_string(info_.gpu_count) + " GPUs");
    }
    if (used_milli_[static_cast<size_t>(g)] + a.milli_per_gpu > kMilliPerGpu) {
      return failedPrecondition("GPU " + std::to_string(g) + " of node " + info_.name +
                                " has no room for pod " + a.pod_key);
    }
  }
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    for (size_t j = i + 1; j < a.gpus.size(); ++j) {
      if (a.gpus[i] == a.gpus[j]) return invalidArgument("GPU index listed twice for pod " + a.pod_key);
    }
  }
  // Checked, so that the node's totals (and what placement derives from them) cannot overflow.
  if (a.cpu_milli < 0 || a.memory_bytes < 0 || a.cpu_milli > kMaxUsedAmount - cpu_used_ ||
      a.memory_bytes > kMaxUsedAmount - memory_used_) {
    return invalidArgument("pod " + a.pod_key + " holds " + std::to_string(a.cpu_milli) + "m CPU and " +
                           std::to_string(a.memory_bytes) + " bytes of memory; node " + info_.name +
                           " cannot count that much more");
  }
  ++changes_;
  for (int g : a.gpus) {
    used_milli_[static_cast<size_t>(g)] =
        static_cast<int16_t>(used_milli_[static_cast<size_t>(g)] + a.milli_per_gpu);
    updateFreeBit(g);
  }
  unknown_held_ += a.unknown_gpus;
  if (a.holdsGpus()) ++gpu_pods_;
  cpu_used_ += a.cpu_milli;
  memory_used_ += a.memory_bytes;
  allocations_.emplace(a.pod_uid, a);
  return Status::ok();
}

bool NodeState::remove(const std::string& pod_uid) {
  auto it = allocations_.find(pod_uid);
  if (it == allocations_.end()) return false;
  ++changes_;
  const Allocation& a = it->second;
  for (int g : a.gpus) {
    used_milli_[static_cast<size_t>(g)] =
        static_cast<int16_t>(used_milli_[static_cast<size_t>(g)] - a.milli_per_gpu);
    updateFreeBit(g);
  }
  unknown_held_ -= a.unknown_gpus;
  if (a.holdsGpus()) --gpu_pods_;
  cpu_used_ -= a.cpu_milli;
  memory_used_ -= a.memory_bytes;
  allocations_.erase(it);
  return true;
}

const Allocation* NodeState::find(const std::string& pod_uid) const {
  auto it = allocations_.find(pod_uid);
  return it == allocations_.end() ? nullptr : &it->second;
}

}  // namespace troupe::model
