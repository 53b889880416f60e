#include "fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz_targets.h"

namespace troupe::fuzz {

void propertyFailed(const char* target, const std::string& what) {
  std::fprintf(stderr, "troupe fuzz target %s: property failed: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

void forEachLine(std::string_view text, const std::function<void(std::string_view, std::string_view)>& line) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view l = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t space = l.find(' ');
    line(l.substr(0, space), space == std::string_view::npos ? std::string_view() : l.substr(space + 1));
  }
}

std::pair<std::string, std::string> keyValue(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) return {std::string(text), std::string()};
  return {std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

sched::PodFacts podFromLines(std::string_view text) {
  sched::PodFacts pod;
  pod.ns = "fuzz";
  pod.name = "pod";
  pod.uid = "uid-pod";
  // Which container the r and m lines go to: (list, index); none until the first one.
  std::vector<sched::ContainerResources>* list = nullptr;
  auto last = [&]() -> sched::ContainerResources& {
    if (!list || list->empty()) {
      list = &pod.containers;
      if (list->empty()) list->emplace_back();
    }
    return list->back();
  };
  forEachLine(text, [&](std::string_view tag, std::string_view rest) {
    if (tag == "a") {
      pod.annotations.insert_or_assign(keyValue(rest).first, keyValue(rest).second);
    } else if (tag == "l") {
      pod.labels.insert_or_assign(keyValue(rest).first, keyValue(rest).second);
    } else if (tag == "c" || tag == "i" || tag == "s") {
      list = tag == "c" ? &pod.containers : &pod.init_containers;
      list->emplace_back().restartable_init = tag == "s";
    } else if (tag == "r") {
      last().requests.insert_or_assign(keyValue(rest).first, keyValue(rest).second);
    } else if (tag == "m") {
      last().limits.insert_or_assign(keyValue(rest).first, keyValue(rest).second);
    } else if (tag == "n") {
      pod.name = rest;
    } else if (tag == "ns") {
      pod.ns = rest;
    } else if (tag == "u") {
      pod.uid = rest;
    } else if (tag == "p") {
      pod.priority = static_cast<int64_t>(rest.size()) * (rest.empty() || rest[0] != '-' ? 1000 : -1000);
    }
  });
  return pod;
}

model::NodeFacts nodeFromLines(std::string_view text) {
  model::NodeFacts node;
  node.name = "node";
  forEachLine(text, [&](std::string_view tag, std::string_view rest) {
    if (tag == "n") {
      node.name = rest;
    } else if (tag == "l") {
      node.labels.insert_or_assign(keyValue(rest).first, keyValue(rest).second);
    } else if (tag == "a") {
      node.annotations.insert_or_assign(keyValue(rest).first, keyValue(rest).second);
    } else if (tag == "g") {
      node.allocatable_gpus = rest;
    } else if (tag == "c") {
      node.cpu = rest;
    } else if (tag == "m") {
      node.memory = rest;
    } else if (tag == "p") {
      node.pods = rest;
    } else if (tag == "u") {
      node.unschedulable = true;
    }
  });
  return node;
}

namespace {

model::NodeFacts gpuNode(const std::string& name, int gpus, const std::string& product) {
  model::NodeFacts f;
  f.name = name;
  f.labels[model::kLabelGpuProduct] = product;
  f.labels[model::kLabelGpuMemory] = "81559";
  f.labels["topology.kubernetes.io/zone"] = "z1";
  f.allocatable_gpus = std::to_string(gpus);
  return f;
}

}  // namespace

std::vector<std::string> fleetNames() { return {"h100-0", "h100-1", "a10-0", "v100-0", "mat-0"}; }

std::unique_ptr<sched::Scheduler> fleet() {
  auto s = std::make_unique<sched::Scheduler>(sched::SchedulerConfig{});
  model::NodeFacts a10 = gpuNode("a10-0", 4, "NVIDIA-A10");
  a10.cpu = "32";
  a10.memory = "256Gi";
  a10.pods = "110";
  model::NodeFacts mat = gpuNode("mat-0", 2, "NVIDIA-L40S");
  mat.annotations[model::kAnnotationGpuTopology] = R"([["X","NV4:100"],["NV4:100","X"]])";
  for (const model::NodeFacts& n :
       {gpuNode("h100-0", 8, "NVIDIA-H100-80GB-HBM3"), gpuNode("h100-1", 8, "NVIDIA-H100-80GB-HBM3"), a10,
        gpuNode("v100-0", 8, "Tesla-V100-SXM2-32GB"), mat}) {
    if (!s->upsertNode(n).isOk()) propertyFailed("fleet", "the fixed fleet does not load: " + n.name);
  }
  // Pods that hold GPUs: preemption candidates (uid-v1..v3) and a shared GPU.
  auto hold = [&](const std::string& uid, const std::string& node, std::vector<int> gpus, int64_t milli) {
    model::Allocation a;
    a.pod_uid = uid;
    a.pod_key = "fuzz/" + uid;
    a.node = node;
    a.gpus = std::move(gpus);
    a.milli_per_gpu = milli;
    if (!s->recordAllocation(a).isOk()) propertyFailed("fleet", "the fixed fleet's pods do not load: " + uid);
  };
  hold("uid-v1", "h100-0", {0, 1, 2, 3}, 1000);
  hold("uid-v2", "h100-1", {0}, 1000);
  hold("uid-v3", "a10-0", {1}, 500);
  return s;
}

void checkJson(const char* target, const std::string& encoded, const char* what) {
  FUZZ_CHECK(nlohmann::json::accept(encoded), target, std::string(what) + " is not valid JSON: " + encoded);
}

}  // namespace troupe::fuzz
