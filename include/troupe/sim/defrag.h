// A defragmentation advisor: which running pods to move so the cluster can take more of its
// usual requests.
//
// "What the cluster can still allocate" is measured as FGD does (fragmentation.h): a node's
// fragmented GPUs are its free GPU share that the typical requests (the mix) cannot use,
// weighted by how often each asks. Moves never change how many GPUs are free, so the gain of a
// move is the fall in fragmented GPUs: the same number of GPUs that become usable by the mix.
// An operator reads it as "moving pod A from X to Y makes 0.9 more GPUs usable by the requests
// this cluster sees"; the whole-node case (two half-empty 8-GPU nodes) shows as a gain of
// nearly the GPUs freed, since an empty node fragments nothing for requests that fit it.
//
// Greedy: each step makes the single move (a pod off its node onto another node where it fits,
// its GPUs there chosen by the policy) that lowers the fragmented total most, and stops when no
// move lowers it. Pure: works on the caller's nodes, no I/O.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/score/fragmentation.h"

namespace troupe::sim {

struct DefragMove {
  std::string pod_uid;
  size_t from = 0;  // node indices into the caller's vector
  size_t to = 0;
  std::vector<int> gpus;  // the GPUs the pod takes on `to`
  double gain_milli = 0;  // fall of the fragmented total, milli-GPU
};

struct DefragPlan {
  std::vector<DefragMove> moves;  // in the order made
  double before_milli = 0;        // fragmented total before any move
  double after_milli = 0;         // ... after all of them
};

struct DefragInput {
  const sched::Policy* policy = nullptr;
  sched::ScoreContext policy_context;  // what the policy scores targets with
  // The measure: F against this cache's mix (usually the trace's typical pods).
  sched::FragmentationCache* measure = nullptr;
  // The request a running pod would make again (its GPU-model constraint included).
  std::function<sched::GpuRequest(const model::Allocation&)> request_of;
  int max_moves = 0;
  // Each step tries moving only the pods whose leaving lowers their node's fragmentation most
  // (this many), to every node; 0 = every pod. On the openb trace a cut to 32 found almost no
  // move (the gain there comes from the target side), so the simulator tries every pod.
  size_t candidate_pods = 0;
};

// Fragmented milli-GPU of `nodes` against `measure`'s mix: the sum of F over the nodes.
double fragmentedMilli(const std::vector<model::NodeState>& nodes, sched::FragmentationCache& measure);

// Makes up to input.max_moves moves on `nodes` (in place) and says which. Pods of a gang and
// pods whose GPU indices are unknown stay where they are.
DefragPlan planDefrag(std::vector<model::NodeState>& nodes, const DefragInput& input);

}  // namespace troupe::sim
