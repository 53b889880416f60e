// Each node's narrowing value (Policy::rankValue) for the latest request shapes.
//
// With `filter: {narrowTo: best}` every filter call scores every feasible node: at 5,000 nodes
// that is most of the call. Between two calls for pods of the same shape only the nodes that
// changed (a bind, a release, new facts) score differently, so the memo keeps each node's
// value for a few recent shapes and a call scores only what is new or changed. A value is
// reused only while the node's change count, the exact request (GpuRequest ==) and the request
// mix are the same, so a remembered value is the value scoring would give.
//
// Thread-safe: filter calls share the Scheduler's lock, so the memo has its own, held only
// to read and write entries, never while scoring.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/request/request_mix.h"

namespace troupe::sched {

class ScoreMemo {
 public:
  using Score = std::function<double(const model::NodeState&)>;

  // values[i] = nodes[i]'s value: remembered, or `score(node)` (called without the memo's
  // lock; the caller keeps the nodes from changing meanwhile). Nodes are told apart by their
  // ordinal, which must be unique among live nodes and below `ordinals`.
  void values(const std::vector<const model::NodeState*>& nodes, const GpuRequest& req,
              const std::shared_ptr<const RequestMix>& mix, const Score& score, std::span<double> values);
  // A node with this ordinal is gone: its remembered values must not reach the next node
  // given the ordinal. The caller must keep the node from being scored meanwhile.
  void forget(uint32_t ordinal);

  struct Stats {
    uint64_t hits = 0, misses = 0;
  };
  Stats stats() const;

 private:
  static constexpr size_t kWays = 4;      // shapes remembered per node
  static constexpr size_t kShapes = 256;  // distinct shapes before the memo starts afresh
  struct Entry {
    uint64_t changes = 0;
    uint32_t generation = 0;  // 0: empty
    uint32_t shape = 0;
    double value = 0;
  };
  struct NodeEntries {
    std::array<Entry, kWays> ways;
    uint32_t next = 0;  // the way to replace next
  };
  // The shape's number in this generation, starting a new generation when the mix changed
  // or the shape table is full. Caller holds mu_.
  uint32_t shapeLocked(const GpuRequest& req, const std::shared_ptr<const RequestMix>& mix);

  mutable std::mutex mu_;
  std::vector<NodeEntries> nodes_;  // by ordinal
  std::shared_ptr<const RequestMix> mix_;
  std::vector<GpuRequest> shapes_;
  uint32_t generation_ = 1;
  Stats stats_;
};

}  // namespace troupe::sched
