// Pods Kueue controls. Kueue admits whole workloads against its quotas and holds their pods
// behind scheduling gates until then (kueue.x-k8s.io/admission for plain pods,
// kueue.x-k8s.io/topology for topology-aware scheduling, TAS). With TAS it also picks each
// pod's node or domain itself and pins it there with a nodeSelector before lifting the gate.
//
// Troupe's answer to each:
//   gated (any spec.schedulingGates, Kueue's or not): not demand yet. Not pending in its queue,
//     not in a gang's waiting line, not in the request mix; counted once the gate goes.
//   placed by Kueue TAS (kueuePlaced below): filtered as a pod on its own on the nodes
//     kube-scheduler offers (already restricted by the selector). Troupe picks its GPUs but
//     plans no gang and applies no topology annotation (they would fight Kueue's assignment)
//     and does not hold it back for its queue's limit or fair share (Kueue's quota admitted
//     it); its GPUs still count in its queue.
#pragma once

#include <string>
#include <vector>

#include "troupe/model/pod_contract.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

// spec.schedulingGates is not empty: kube-scheduler does not schedule the pod yet.
bool schedulingGated(const PodFacts& pod);

// Kueue's TAS fixed where the pod runs: it has the label kueue.x-k8s.io/tas: "true" and a
// spec.nodeSelector on kubernetes.io/hostname, on one of `levels`, or on a key of a topology
// preset (model/topology_presets.h), since Kueue's own Topology may list levels Troupe's
// config does not. The label alone is not enough: it is set before the assignment is.
bool kueuePlaced(const PodFacts& pod, const std::vector<std::string>& levels);

}  // namespace troupe::sched
