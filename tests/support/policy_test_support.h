// Small clusters for the per-policy tests (policy_<name>_test.cc): nodes built from facts, pods
// placed on chosen GPUs, and the node a policy ranks first through chooseNode, the loop the
// simulator and the live narrowing share.
#pragma once

#include <catch2/catch.hpp>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "support/fixtures.h"
#include "troupe/model/node.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/best_node.h"
#include "troupe/sched/score/choose_node.h"

namespace troupe::testing {

inline sched::PolicyPtr builtin(std::string_view name, const sched::PolicyArgs& args = {}) {
  return sched::builtinPolicies().create(name, args).value();
}

// `gpus` GPUs of `milli_per_gpu` each, and `cpu_milli` CPU.
inline sched::GpuRequest request(int gpus, int64_t milli_per_gpu = model::kMilliPerGpu,
                                 int64_t cpu_milli = 0) {
  sched::GpuRequest r;
  r.gpus = gpus;
  r.milli_per_gpu = gpus > 0 ? milli_per_gpu : model::kMilliPerGpu;
  r.cpu_milli = cpu_milli;
  return r;
}

class SmallCluster {
 public:
  // A node of `gpus` GPUs of `product`, with `cpu` cores and `memory` ("" = untracked).
  model::NodeState& add(const std::string& name, int gpus, const std::string& product = "NVIDIA-L4",
                        const std::string& cpu = "", const std::string& memory = "") {
    model::NodeFacts facts = gpuNode(name, gpus, product);
    facts.cpu = cpu;
    facts.memory = memory;
    return nodes_.emplace_back(model::nodeFromFacts(facts, catalog_).value());
  }

  // Places a pod of `milli` per GPU on `gpus` of `node`, with `cpu_milli` CPU.
  static void use(model::NodeState& node, std::vector<int> gpus, int64_t milli = model::kMilliPerGpu,
                  int64_t cpu_milli = 0) {
    model::Allocation a;
    a.pod_uid = "pod-" + std::to_string(node.podCount()) + "-on-" + node.info().name;
    a.gpus = std::move(gpus);
    a.milli_per_gpu = milli;
    a.cpu_milli = cpu_milli;
    REQUIRE(node.add(a).isOk());
  }

  // The name of the fitting node `policy` chooses for `req` ("" when none fits), ranked by
  // rankValue with ties to the live node order, as the narrowing does.
  std::string best(const sched::Policy& policy, const sched::GpuRequest& req,
                   const sched::ScoreContext& context = {}) const {
    std::vector<const model::NodeState*> fits;
    for (const model::NodeState& n : nodes_) {
      if (sched::findMisfit(n, req) == sched::Misfit::kNone) fits.push_back(&n);
    }
    std::vector<double> values;
    for (const model::NodeState* n : fits) values.push_back(policy.rankValue(*n, req, context));
    const int i = sched::bestByValue(policy, fits, values);
    return i < 0 ? "" : fits[static_cast<size_t>(i)]->info().name;
  }

 private:
  model::TopologyCatalog catalog_;  // before nodes_: nodes point into its topologies
  std::deque<model::NodeState> nodes_;
};

}  // namespace troupe::testing
