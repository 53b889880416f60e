// Helpers shared by the fuzz targets: the bytes as text, a small line format for pods and
// nodes, a fixed fleet to run the scheduler on, and property checks on encoded answers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::fuzz {

inline std::string_view asText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Calls `line(tag, rest)` for each line "TAG REST" of `text` (TAG up to the first space).
void forEachLine(std::string_view text, const std::function<void(std::string_view, std::string_view)>& line);
// "key=value" split at the first '='; the value is empty when there is none.
std::pair<std::string, std::string> keyValue(std::string_view text);

// A pod from lines (docs/fuzzing.md):
//   a KEY=VALUE  annotation        l KEY=VALUE  label
//   c            a new app container, i a new init container, s a new sidecar
//   r RES=QTY    request of the last container (an app container if there is none)
//   m RES=QTY    limit of the last container
//   n NAME / ns NAMESPACE / u UID / p PRIORITY
sched::PodFacts podFromLines(std::string_view text);
// A node from lines (docs/fuzzing.md):
//   n NAME, l KEY=VALUE, a KEY=VALUE, g ALLOCATABLE_GPUS, c CPU, m MEMORY, p PODS, u (cordoned)
model::NodeFacts nodeFromLines(std::string_view text);

// A scheduler with a small fixed fleet: two HGX H100 nodes, a 4-GPU A10 node with CPU and
// memory tracked, a DGX-1, a 2-GPU node with a link matrix; a few pods hold GPUs.
std::unique_ptr<sched::Scheduler> fleet();
std::vector<std::string> fleetNames();

// The encoded answer must be JSON the library accepts.
void checkJson(const char* target, const std::string& encoded, const char* what);

}  // namespace troupe::fuzz
