// Kubernetes objects (v1.Pod, v1.Node) decoded from JSON into the core's facts. Both the
// extender wire (a pod or node inside a kube-scheduler request) and the API watch read the
// same objects, so the decoding lives here, where either adapter may use it, and reads keys
// as Go's decoder does (an exact match first, else a case-insensitive one).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::adapters {

// Insertion-ordered: answers keep Go's struct field order, and objects handed back keep the
// order they came in, so bodies match kube-scheduler's own bytes.
using Json = nlohmann::ordered_json;

// The member of `object` named `name`: an exact match first, else a case-insensitive one
// (Go's rule). nullptr when absent or when `object` is not an object.
const Json* field(const Json& object, std::string_view name);

// The string `v` holds; "" when it is absent or not a string.
std::string textOf(const Json* v);

// A Kubernetes quantity as text. It may arrive as a string ("8") or, from hand-written
// clients, a number; an unsigned number keeps its value (18446744073709551615 is not "-1").
// "" when absent or of another type.
std::string quantityText(const Json* v);

// The pod's identity, GPU-relevant resources, priority, node and phase. Errors name the field
// (Pod.metadata.name, Pod.spec.containers[0].resources.requests["..."]).
Result<sched::PodFacts> podFromJson(const Json& pod);
// The node's name, labels, annotations, unschedulable flag and allocatable GPUs (capacity
// when allocatable is absent). CPU, memory and pods are left to the caller.
Result<model::NodeFacts> nodeFromJson(const Json& node);

}  // namespace troupe::adapters
