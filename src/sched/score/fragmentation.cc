#include "troupe/sched/score/fragmentation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "troupe/common/strings.h"

namespace troupe::sched {
namespace {

// The artifact's categories, in its order; Q3 (the usable part) is not fragment.
enum Category {
  kLackBoth,
  kLackGpu,
  kSatisfied,
  kLackCpu,
  kCpuOnlyFits,
  kCpuOnlyLacksCpu,
  kNoAccess,
  kCategories
};

}  // namespace

void mixAccessInto(const RequestMix& mix, const std::string& product, std::span<uint64_t> words) {
  std::fill(words.begin(), words.end(), 0);
  const auto& entries = mix.entries();
  for (size_t i = 0; i < entries.size() && i / 64 < words.size(); ++i) {
    const auto& models = entries[i].models;
    bool ok = models.empty() || std::any_of(models.begin(), models.end(), [&](const std::string& m) {
                return equalsIgnoreCase(m, product);
              });
    if (ok) words[i / 64] |= uint64_t{1} << (i % 64);
  }
}

std::vector<uint64_t> mixAccess(const RequestMix& mix, const std::string& product) {
  std::vector<uint64_t> access((mix.entries().size() + 63) / 64, 0);
  mixAccessInto(mix, product, access);
  return access;
}

double fragmentation(const RequestMix& mix, std::span<const uint64_t> access, int64_t cpu_left,
                     std::span<const int64_t> free_milli) {
  std::array<double, kCategories> sums{};
  int64_t free_total = 0;
  for (int64_t f : free_milli) free_total += f;
  const auto& entries = mix.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const TypicalRequest& m = entries[i];
    const bool cpu_ok = cpu_left >= m.cpu_milli;
    if (m.gpus == 0) {
      sums[cpu_ok ? kCpuOnlyFits : kCpuOnlyLacksCpu] += m.probability * static_cast<double>(free_total);
      continue;
    }
    if (i / 64 >= access.size() || !(access[i / 64] >> (i % 64) & 1)) {
      sums[kNoAccess] += m.probability * static_cast<double>(free_total);
      continue;
    }
    int fitting = 0;
    int64_t too_small = 0;
    for (int64_t f : free_milli) {
      if (f >= m.milli_per_gpu) {
        ++fitting;
      } else {
        too_small += f;
      }
    }
    if (fitting >= m.gpus) {
      if (cpu_ok) {
        sums[kLackGpu] += m.probability * static_cast<double>(too_small);
        sums[kSatisfied] += m.probability * static_cast<double>(free_total - too_small);
      } else {
        sums[kLackCpu] += m.probability * static_cast<double>(free_total);
      }
    } else {
      sums[cpu_ok ? kLackGpu : kLackBoth] += m.probability * static_cast<double>(free_total);
    }
  }
  double total = 0;
  for (int c = 0; c < kCategories; ++c) {
    if (c != kSatisfied) total += sums[static_cast<size_t>(c)];
  }
  return total;
}

int fgdScore(double before, double after) {
  const double x = (before - after) / 1000.0;
  return static_cast<int>(100.0 / (1.0 + std::exp(-x)));
}

size_t FragmentationCache::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.product * 0x9E3779B97F4A7C15ULL;
  h ^= static_cast<uint64_t>(k.cpu_left) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  h ^= k.packed[0] + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  h ^= k.packed[1] + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

double FragmentationCache::get(const std::string& product, int64_t cpu_left,
                               std::span<const int64_t> free_milli) {
  auto [slot, added] = products_.try_emplace(product, static_cast<uint32_t>(access_.size()));
  if (added) access_.push_back(mixAccess(mix_, product));
  const std::vector<uint64_t>& access = access_[slot->second];
  // Up to 12 GPUs, 10 bits each, sorted: the multiset is the key. Larger nodes are computed.
  if (free_milli.size() > 12) return fragmentation(mix_, access, cpu_left, free_milli);
  std::array<int64_t, 12> sorted{};
  std::copy(free_milli.begin(), free_milli.end(), sorted.begin());
  std::sort(sorted.begin(), sorted.begin() + static_cast<long>(free_milli.size()));
  Key key{slot->second, cpu_left, {free_milli.size(), 0}};
  for (size_t i = 0; i < free_milli.size(); ++i) {
    key.packed[i / 6] =
        key.packed[i / 6] << 10 | static_cast<uint64_t>(std::clamp<int64_t>(sorted[i], 0, 1023));
  }
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  double f = fragmentation(mix_, access, cpu_left, free_milli);
  if (memo_.size() > 2000000) memo_.clear();  // bound memory on unusual clusters
  memo_.emplace(key, f);
  return f;
}

std::span<int64_t> freeMilliInto(const model::NodeState& node, std::span<int64_t, 64> buffer) {
  std::span<int64_t> out = buffer.first(static_cast<size_t>(node.gpuCount()));
  for (int g = 0; g < node.gpuCount(); ++g) out[static_cast<size_t>(g)] = node.gpuFreeMilli(g);
  // GPUs held by pods whose indices are unknown are not free, whichever they are.
  int unknown = node.unknownHeld();
  for (size_t g = 0; g < out.size() && unknown > 0; ++g) {
    if (out[g] == model::kMilliPerGpu) {
      out[g] = 0;
      --unknown;
    }
  }
  return out;
}

std::vector<int64_t> freeMilli(const model::NodeState& node) {
  std::array<int64_t, 64> buffer;
  const std::span<int64_t> free = freeMilliInto(node, buffer);
  return {free.begin(), free.end()};
}

int64_t cpuLeft(const model::NodeState& node) {
  if (node.info().cpu_milli <= 0) return std::numeric_limits<int64_t>::max() / 4;
  return node.info().cpu_milli - node.cpuUsed();
}

}  // namespace troupe::sched
