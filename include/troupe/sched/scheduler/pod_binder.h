// The bind verb's seam: who turns "bind pod P to node N" into a bound pod. In standalone mode
// the HTTP adapter reserves the GPUs with Scheduler::bind and is done; in Kubernetes mode the
// kube adapter's Binder also reads the pod and creates the Binding through the API server.
// The HTTP adapter calls this interface and never knows which one it has.
//
// Contract: bindAsync answers through `done` exactly once, on any thread, and may answer
// before it returns. On success the allocation is what the pod holds; on failure no GPU is
// held for it, unless the binder says otherwise in the message (an unconfirmed Binding). A
// gang member's answer may wait until its gang is complete, so callers must not block on it.
#pragma once

#include <functional>
#include <string>

#include "troupe/common/status.h"
#include "troupe/model/node.h"

namespace troupe::sched {

// Which pod goes where: kube-scheduler's ExtenderBindingArgs, decoded.
struct BindRequest {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};

class PodBinder {
 public:
  using Done = std::function<void(Result<model::Allocation>)>;
  virtual ~PodBinder() = default;
  virtual void bindAsync(const BindRequest& request, Done done) = 0;
};

}  // namespace troupe::sched
