// GPU fragmentation of a node relative to a request mix (FGD, Weng et al., ATC '23).
//
// For one typical request m, the fragment f(node, m) is the free milli-GPU that m cannot use:
// all of it when m is CPU-only, when m's models exclude the node's, or when m does not fit
// (too little CPU left, fewer than m.gpus GPUs with m's milli free); otherwise the free milli on
// the GPUs with less than m's milli free. F(node) = sum over the mix of p_m * f(node, m), in
// milli-GPU. A placement is good when it raises F little: FGD scores it
// int(100 * sigmoid((F_before - F_after) / 1000)).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/request/request_mix.h"

namespace troupe::sched {

// Bit i % 64 of word i / 64 set: typical request i of `mix` accepts GPUs of `product`. Every
// entry has its bit: a mix with GPU-model constraints has far more than 64 shapes (the openb
// pods with a third of the GPU pods constrained: about 150 at 95% coverage).
std::vector<uint64_t> mixAccess(const RequestMix& mix, const std::string& product);
// The same into `words` (at least (entries + 63) / 64 of them), without allocating: the live
// scorer does this for every candidate node.
void mixAccessInto(const RequestMix& mix, const std::string& product, std::span<uint64_t> words);

// F for a node with `cpu_left` milli-CPU and `free_milli` per GPU, `access` from mixAccess for
// the node's product. Summed per category and combined at the end, as the FGD artifact does,
// so the truncated scores agree with it.
double fragmentation(const RequestMix& mix, std::span<const uint64_t> access, int64_t cpu_left,
                     std::span<const int64_t> free_milli);

// FGD's integer score for a fragmentation change, 0..100 (50 = no change).
int fgdScore(double before, double after);

// Memo of F for one mix: F depends only on (GPU product, CPU left, multiset of free milli), and
// a cluster has few such states. Not thread-safe: one per simulation run or per caller.
class FragmentationCache {
 public:
  explicit FragmentationCache(const RequestMix& mix) : mix_(mix) {}
  const RequestMix& mix() const { return mix_; }
  double get(const std::string& product, int64_t cpu_left, std::span<const int64_t> free_milli);

 private:
  struct Key {
    uint32_t product;  // index into access_
    int64_t cpu_left;
    uint64_t packed[2];
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  const RequestMix& mix_;
  std::unordered_map<std::string, uint32_t> products_;  // product -> its mixAccess in access_
  std::vector<std::vector<uint64_t>> access_;
  std::unordered_map<Key, double, KeyHash> memo_;
};

// The free milli-GPU of each of the node's GPUs, as F reads it.
std::vector<int64_t> freeMilli(const model::NodeState& node);
// The same written into `out` (nodes have at most 64 GPUs), without allocating: scoring does
// this for thousands of nodes per request. Returns the node's part of `out`.
std::span<int64_t> freeMilliInto(const model::NodeState& node, std::span<int64_t, 64> out);
// The node's CPU left; nodes that do not track CPU count as having plenty.
int64_t cpuLeft(const model::NodeState& node);

}  // namespace troupe::sched
