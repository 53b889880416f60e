// The openb trace format (Alibaba GPU cluster trace v2023, as replayed by the FGD paper).
//
//   nodes: sn,cpu_milli,memory_mib,gpu,model
//   pods:  name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
//          deletion_time,scheduled_time]
//
// Columns are found by header name, so extra columns and the 5-column variants both work.
// Errors name the file, the line, the column and what is expected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/common/status.h"

namespace troupe::sim {

struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;  // GPU type, e.g. "G2", "T4", "V100M32"
};

struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int64_t gpu_milli = 0;  // per GPU, clamped to 1000 as the artifact's converter does
  std::string gpu_spec;   // allowed models, '|'-separated; "" = any
  // Seconds, when the file has the column and the cell is not empty; -1 otherwise. Only the
  // queueing simulation (tenants.h) reads them: the FGD replay ignores time.
  int64_t creation_time = -1;
  int64_t deletion_time = -1;
  int64_t scheduled_time = -1;  // empty in the trace for pods that never started

  int64_t gpuRequestMilli() const { return num_gpu * gpu_milli; }
};

// `text` is the file's contents; `file` only names it in errors.
Result<std::vector<TraceNode>> parseNodeCsv(std::string_view text, const std::string& file);
Result<std::vector<TracePod>> parsePodCsv(std::string_view text, const std::string& file);

}  // namespace troupe::sim
