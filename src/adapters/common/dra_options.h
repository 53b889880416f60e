// Which DRA drivers and device classes are GPUs (Kubernetes mode, docs/dra.md): one struct, read
// from the config file's dra section (adapters/yaml) and taken as it is by the kube adapter's
// DraSync, so the two never drift apart.
#pragma once

#include <string>
#include <vector>

#include "troupe/model/node.h"

namespace troupe::adapters {

struct DraOptions {
  std::vector<std::string> gpu_drivers{model::kDefaultDraGpuDriver};         // ResourceSlice drivers
  std::vector<std::string> gpu_device_classes{model::kDefaultDraGpuDriver};  // DeviceClasses of claims
};

}  // namespace troupe::adapters
