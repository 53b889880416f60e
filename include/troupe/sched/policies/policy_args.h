// The typed arguments of the policies that take any, as the config states them. A policy
// without arguments needs nothing here.
#pragma once

#include <string>
#include <vector>

namespace troupe::sched {

// troupe's tie-break blend (config policy.weights): how much smaller nodes first (pack), the
// chosen GPUs' connection (topology), intact NVLink domains (domains) and a node's CPU and
// GPUs running out together (balance) count; and how many
// score points a unit of model pressure costs a request that could use another GPU model
// (scarcity; model_pressure.h).
struct TroupeArgs {
  double pack_weight = 0.5;       // >= 0
  double topology_weight = 0.4;   // >= 0
  double domain_weight = 0.1;     // >= 0; at least one of the three > 0
  double balance_weight = 1.0;    // >= 0; 0 = ignore how CPU and GPUs run out together
  double scarcity_weight = 50.0;  // >= 0; 0 = ignore scarce models
};
// Every problem, with its field path ("policy.weights.pack: must be >= 0, got -1").
std::vector<std::string> validateTroupeArgs(const TroupeArgs& args);

// Every policy's arguments; each factory reads its own member.
struct PolicyArgs {
  TroupeArgs troupe;
};

// What the config chooses: a policy by name (policy.name) and the arguments (policy.weights).
struct PolicyChoice {
  std::string name = "troupe";
  PolicyArgs args;
};

}  // namespace troupe::sched
