#include "troupe/model/gpu_selection.h"

#include <bit>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace troupe::model {

struct GpuTopology::SelectionMemo {
  std::mutex mu;
  std::unordered_map<uint64_t, std::optional<GpuSet>> sets;  // key: mask | k << 64-8 | domain bit
};

std::shared_ptr<GpuTopology::SelectionMemo> newSelectionMemo() {
  return std::make_shared<GpuTopology::SelectionMemo>();
}

namespace {

constexpr double kEpsilon = 1e-9;

// Lexicographic order of the sorted index lists: the set holding the lowest differing index
// comes first.
bool lexLess(uint64_t a, uint64_t b) {
  uint64_t diff = a ^ b;
  if (diff == 0) return false;
  return (a & (diff & (~diff + 1))) != 0;
}

// Calls fn(subset) for every k-subset of `pool` (Gosper's hack over the pool's positions).
template <typename Fn>
void forEachSubset(uint64_t pool, int k, Fn&& fn) {
  std::vector<int> idx = maskToIndices(pool);
  const int n = static_cast<int>(idx.size());
  if (k <= 0 || k > n) return;
  uint64_t comb = (uint64_t{1} << k) - 1;
  const uint64_t limit = n >= 64 ? 0 : uint64_t{1} << n;
  while (limit == 0 ? comb != 0 : comb < limit) {
    uint64_t mask = 0;
    for (int i = 0; i < n; ++i) {
      if (comb >> i & 1) mask |= uint64_t{1} << idx[static_cast<size_t>(i)];
    }
    fn(mask);
    uint64_t c = comb & (~comb + 1);
    uint64_t r = comb + c;
    if (r == 0) break;
    comb = (((r ^ comb) >> 2) / c) | r;
  }
}

double bestWithin(const GpuTopology& t, uint64_t pool, int k) {
  if (std::popcount(pool) < k) return 0.0;
  if (binomial(std::popcount(pool), k) > static_cast<int64_t>(kExhaustiveLimit)) {
    return t.bottleneck(pool);  // a lower bound, good enough to rank leftovers
  }
  double best = 0.0;
  forEachSubset(pool, k, [&](uint64_t m) { best = std::max(best, t.bottleneck(m)); });
  return best;
}

// How useful the GPUs left free are: best bottleneck for 2, 4 and 8 GPUs, relative to the
// node's best link, averaged over the sizes that still fit.
double leftoverQuality(const GpuTopology& t, uint64_t remaining) {
  double sum = 0.0;
  int sizes = 0;
  for (int s : {2, 4, 8}) {
    if (s > t.size()) break;
    ++sizes;
    if (std::popcount(remaining) >= s && t.maxBandwidth() > 0) {
      sum += bestWithin(t, remaining, s) / t.maxBandwidth();
    }
  }
  return sizes == 0 ? 1.0 : sum / sizes;
}

struct Candidate {
  uint64_t mask = 0;
  double bottleneck = -1;
  double leftover = -1;
  double internal = -1;
};

bool better(const Candidate& a, const Candidate& b) {
  if (a.bottleneck > b.bottleneck + kEpsilon) return true;
  if (a.bottleneck < b.bottleneck - kEpsilon) return false;
  if (a.leftover > b.leftover + kEpsilon) return true;
  if (a.leftover < b.leftover - kEpsilon) return false;
  if (a.internal > b.internal + kEpsilon) return true;
  if (a.internal < b.internal - kEpsilon) return false;
  return lexLess(a.mask, b.mask);
}

// Greedy growth for pools too large to enumerate: seed with each GPU, add the GPU that keeps
// the bottleneck highest (then internal bandwidth), keep the best grown set.
uint64_t greedy(const GpuTopology& t, uint64_t pool, int k) {
  Candidate best;
  for (int seed : maskToIndices(pool)) {
    uint64_t set = uint64_t{1} << seed;
    while (std::popcount(set) < k) {
      int pick = -1;
      double pick_b = -1, pick_i = -1;
      for (int g : maskToIndices(pool & ~set)) {
        uint64_t grown = set | uint64_t{1} << g;
        double b = t.bottleneck(grown), in = t.internalBandwidth(grown);
        if (b > pick_b + kEpsilon || (b > pick_b - kEpsilon && in > pick_i + kEpsilon)) {
          pick = g;
          pick_b = b;
          pick_i = in;
        }
      }
      set |= uint64_t{1} << pick;
    }
    Candidate c{set, t.bottleneck(set), 0.0, t.internalBandwidth(set)};
    if (best.mask == 0 || better(c, best)) best = c;
  }
  return best.mask;
}

}  // namespace

std::vector<int> maskToIndices(uint64_t mask) {
  std::vector<int> out;
  while (mask) {
    out.push_back(std::countr_zero(mask));
    mask &= mask - 1;
  }
  return out;
}

uint64_t indicesToMask(const std::vector<int>& gpus) {
  uint64_t mask = 0;
  for (int g : gpus) mask |= uint64_t{1} << g;
  return mask;
}

// Exact where the result fits int64 (every n <= 64), saturating at INT64_MAX beyond: r * m / i
// is split as (r / i) * m + (r % i) * m / i so the intermediate product cannot overflow.
int64_t binomial(int n, int k) {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t r = 1;
  for (int i = 1; i <= k; ++i) {
    const int64_t m = n - k + i;
    const int64_t q = r / i, rem = (r % i) * m / i;
    if (q > (kMax - rem) / m) return kMax;
    r = q * m + rem;
  }
  return r;
}

std::optional<GpuSet> searchWholeGpus(const GpuTopology& t, uint64_t free_mask, int k, bool one_domain) {
  if (k <= 0 || std::popcount(free_mask) < k) return std::nullopt;
  std::vector<uint64_t> pools;
  if (one_domain) {
    for (uint64_t d : t.nvlinkDomains()) {
      if (std::popcount(d & free_mask) >= k) pools.push_back(d & free_mask);
    }
  } else {
    pools.push_back(free_mask);
  }
  Candidate best;
  for (uint64_t pool : pools) {
    if (binomial(std::popcount(pool), k) > static_cast<int64_t>(kExhaustiveLimit)) {
      uint64_t m = greedy(t, pool, k);
      Candidate c{m, t.bottleneck(m), leftoverQuality(t, free_mask & ~m), t.internalBandwidth(m)};
      if (best.mask == 0 || better(c, best)) best = c;
      continue;
    }
    // Two passes: the bottleneck first, the costly leftover score only for the ties.
    double top = -1;
    forEachSubset(pool, k, [&](uint64_t m) { top = std::max(top, t.bottleneck(m)); });
    if (top < best.bottleneck - kEpsilon) continue;
    forEachSubset(pool, k, [&](uint64_t m) {
      double b = t.bottleneck(m);
      if (b < top - kEpsilon) return;
      Candidate c{m, b, leftoverQuality(t, free_mask & ~m), t.internalBandwidth(m)};
      if (best.mask == 0 || better(c, best)) best = c;
    });
  }
  if (best.mask == 0) return std::nullopt;
  GpuSet set;
  set.mask = best.mask;
  set.bottleneck = best.bottleneck;
  double ideal = t.bestBottleneck(k);
  set.quality = ideal > 0 ? std::min(1.0, best.bottleneck / ideal) : 1.0;
  set.leftover = best.leftover;
  return set;
}

std::optional<GpuSet> chooseWholeGpus(const GpuTopology& t, uint64_t free_mask, int k, bool one_domain) {
  if (t.size() > 56) return searchWholeGpus(t, free_mask, k, one_domain);
  const uint64_t key = free_mask | static_cast<uint64_t>(k) << 56 | (one_domain ? 1ULL << 63 : 0);
  GpuTopology::SelectionMemo& memo = t.memo();
  {
    std::lock_guard<std::mutex> lock(memo.mu);
    if (auto it = memo.sets.find(key); it != memo.sets.end()) return it->second;
  }
  std::optional<GpuSet> set = searchWholeGpus(t, free_mask, k, one_domain);
  std::lock_guard<std::mutex> lock(memo.mu);
  if (memo.sets.size() > 100000) memo.sets.clear();  // bound memory on odd topologies
  memo.sets.emplace(key, set);
  return set;
}

}  // namespace troupe::model
