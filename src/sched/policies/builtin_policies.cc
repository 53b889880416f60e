// The policies Troupe ships. A new policy: its file in this folder (defining its entry
// function), its declaration below and its name in the list; docs/extending.md has a worked
// example.
#include "troupe/sched/policies/policy_registry.h"

namespace troupe::sched {

PolicyEntry troupePolicy();
PolicyEntry fgdPolicy();
PolicyEntry bestFitPolicy();
PolicyEntry dotProductPolicy();
PolicyEntry gpuPackingPolicy();
PolicyEntry gpuClusteringPolicy();
PolicyEntry randomPolicy();
PolicyEntry kubePolicy();
PolicyEntry binpackPolicy();
PolicyEntry spreadPolicy();

const PolicyRegistry& builtinPolicies() {
  // Built once, on first use (thread-safe), and never changed: no mutable global state.
  static const PolicyRegistry registry = [] {
    PolicyRegistry r;
    // The order is --help's and the error's for an unknown name. A duplicate here is refused
    // and caught by policy_registry_test, which expects every name once.
    for (PolicyEntry (*entry)() :
         {troupePolicy, fgdPolicy, bestFitPolicy, dotProductPolicy, gpuPackingPolicy, gpuClusteringPolicy,
          randomPolicy, kubePolicy, binpackPolicy, spreadPolicy}) {
      (void)r.add(entry());
    }
    return r;
  }();
  return registry;
}

}  // namespace troupe::sched
