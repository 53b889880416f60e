#include "cluster.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <utility>

namespace troupe::bench {
namespace {

using http::Json;

// splitmix64: a fixed, well-mixed pseudo-random value per (index, salt).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string hex(uint64_t v, int digits) {
  static const char* kDigits = "0123456789abcdef";
  std::string out(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kDigits[v & 15];
  return out;
}

std::string uuid(uint64_t a, uint64_t b) {
  return hex(a >> 32, 8) + "-" + hex(a >> 16, 4) + "-4" + hex(a, 3) + "-8" + hex(b >> 48, 3) + "-" +
         hex(b, 12);
}

struct KindSpec {
  const char* product;
  const char* instance;
  const char* family;
  const char* memory_mib;
  const char* compute_major;
  const char* compute_minor;
  const char* cpu;
  const char* cpu_allocatable;
  const char* memory;
  const char* memory_allocatable;
};

const KindSpec& spec(NodeKind kind) {
  static const KindSpec kH100{
      "NVIDIA-H100-80GB-HBM3", "p5.48xlarge", "hopper", "81559", "9", "0", "192", "191450m",
      "2113511644Ki",          "2100825308Ki"};
  static const KindSpec kL40S{"NVIDIA-L40S", "g6e.48xlarge", "ada-lovelace", "46068",        "8",
                              "9",           "192",          "191450m",      "1584861180Ki", "1572174844Ki"};
  static const KindSpec kA100{
      "NVIDIA-A100-SXM4-80GB", "p4de.24xlarge", "ampere", "81920", "8", "0", "96", "95690m",
      "1176329776Ki",          "1163643440Ki"};
  switch (kind) {
    case NodeKind::kH100: return kH100;
    case NodeKind::kL40S: return kL40S;
    case NodeKind::kA100: return kA100;
  }
  return kH100;
}

Json condition(const char* type, const char* status, const char* reason, const char* message) {
  return Json{{"type", type},
              {"status", status},
              {"lastHeartbeatTime", "2025-06-10T09:13:55Z"},
              {"lastTransitionTime", "2025-03-02T17:41:02Z"},
              {"reason", reason},
              {"message", message}};
}

Json image(std::initializer_list<const char*> names, int64_t size) {
  Json list = Json::array();
  for (const char* n : names) list.push_back(n);
  return Json{{"names", std::move(list)}, {"sizeBytes", size}};
}

// The fixture's pod (filter-full-nodes.json), compact: what kube-scheduler 1.33 sends.
constexpr const char* kPodTemplate =
    R"({"metadata":{"name":"llm-pretrain-7b-0-x8q4t","generateName":"llm-pretrain-7b-0-","namespace":"ml-training","uid":"3c9a6f1e-7b2d-4e8a-9f10-2a6b5c4d8e71","resourceVersion":"48213377","creationTimestamp":"2025-06-10T09:14:07Z","labels":{"app.kubernetes.io/name":"llm-pretrain-7b","batch.kubernetes.io/controller-uid":"5f0c3b7e-2d4a-4c1e-9b8a-6e2f1d7c9a10","batch.kubernetes.io/job-completion-index":"0","batch.kubernetes.io/job-name":"llm-pretrain-7b","controller-uid":"5f0c3b7e-2d4a-4c1e-9b8a-6e2f1d7c9a10","job-name":"llm-pretrain-7b"},"annotations":{"batch.kubernetes.io/job-completion-index":"0","example.com/gang-min-available":"4","example.com/gang-name":"ml-training/llm-pretrain-7b"},"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"llm-pretrain-7b","uid":"5f0c3b7e-2d4a-4c1e-9b8a-6e2f1d7c9a10","controller":true,"blockOwnerDeletion":true}],"finalizers":["batch.kubernetes.io/job-tracking"],"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2025-06-10T09:14:07Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:batch.kubernetes.io/job-completion-index":{}},"f:finalizers":{".":{},"v:\"batch.kubernetes.io/job-tracking\"":{}},"f:generateName":{}}}}]},"spec":{"volumes":[{"name":"dshm","emptyDir":{"medium":"Memory","sizeLimit":"64Gi"}},{"name":"kube-api-access-7wz5k","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}}],"defaultMode":420}}],"containers":[{"name":"trainer","image":"nvcr.io/nvidia/pytorch:25.04-py3","command":["torchrun"],"args":["--nnodes=4","--nproc-per-node=4","train.py","--config=configs/7b.yaml"],"env":[{"name":"NCCL_DEBUG","value":"WARN"},{"name":"JOB_COMPLETION_INDEX","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.labels['batch.kubernetes.io/job-completion-index']"}}}],"resources":{"limits":{"cpu":"48","memory":"480Gi","nvidia.com/gpu":"4"},"requests":{"cpu":"48","memory":"480Gi","nvidia.com/gpu":"4"}},"volumeMounts":[{"name":"dshm","mountPath":"/dev/shm"},{"name":"kube-api-access-7wz5k","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","nodeSelector":{"nvidia.com/gpu.present":"true"},"serviceAccountName":"default","serviceAccount":"default","securityContext":{},"hostname":"llm-pretrain-7b-0","subdomain":"llm-pretrain-7b","schedulerName":"gpu-scheduler","tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"},{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priorityClassName":"training-high","priority":100000,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Pending","qosClass":"Guaranteed"}})";

[[noreturn]] void die(const std::string& message) {
  std::cerr << "troupe_bench: " << message << "\n";
  std::exit(1);
}

}  // namespace

NodeKind kindOf(int index) {
  const uint64_t r = mix(static_cast<uint64_t>(index) * 2 + 1) % 100;
  if (r < 70) return NodeKind::kH100;
  if (r < 90) return NodeKind::kL40S;
  return NodeKind::kA100;
}

const char* kindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kH100: return "H100 (HGX, NVSwitch)";
    case NodeKind::kL40S: return "L40S (PCIe)";
    case NodeKind::kA100: return "A100 (HGX, NVSwitch)";
  }
  return "?";
}

std::string nodeName(int index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-node-%05d", index);
  return buf;
}

Json makeNodeObject(int index) {
  const KindSpec& k = spec(kindOf(index));
  const std::string name = nodeName(index);
  const uint64_t h1 = mix(static_cast<uint64_t>(index) << 8);
  const uint64_t h2 = mix(h1);
  const std::string uid = uuid(h1, h2);
  const std::string instance = "i-0" + hex(h2, 16).substr(0, 16);
  const std::string zone = std::string("us-east-1") + static_cast<char>('a' + index % 4);
  char cidr[32], ip[32];
  std::snprintf(cidr, sizeof cidr, "10.%d.%d.0/24", 64 + index / 256, index % 256);
  std::snprintf(ip, sizeof ip, "10.0.%d.%d", index / 250, 4 + index % 250);
  const std::string rv = std::to_string(48200000 + static_cast<int>(h1 % 13000));

  // Labels as kubelet, the cloud provider and GPU feature discovery set them (Go sorts map keys).
  Json labels = {{"beta.kubernetes.io/arch", "amd64"},
                 {"beta.kubernetes.io/instance-type", k.instance},
                 {"beta.kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"kubernetes.io/hostname", name},
                 {"kubernetes.io/os", "linux"},
                 {"node.kubernetes.io/instance-type", k.instance},
                 {"nvidia.com/cuda.driver.major", "570"},
                 {"nvidia.com/cuda.driver.minor", "133"},
                 {"nvidia.com/cuda.driver.rev", "20"},
                 {"nvidia.com/cuda.runtime.major", "12"},
                 {"nvidia.com/cuda.runtime.minor", "8"},
                 {"nvidia.com/gfd.timestamp", "1749546835"},
                 {"nvidia.com/gpu.compute.major", k.compute_major},
                 {"nvidia.com/gpu.compute.minor", k.compute_minor},
                 {"nvidia.com/gpu.count", "8"},
                 {"nvidia.com/gpu.family", k.family},
                 {"nvidia.com/gpu.machine", k.instance},
                 {"nvidia.com/gpu.memory", k.memory_mib},
                 {"nvidia.com/gpu.mode", "compute"},
                 {"nvidia.com/gpu.present", "true"},
                 {"nvidia.com/gpu.product", k.product},
                 {"nvidia.com/gpu.replicas", "1"},
                 {"nvidia.com/mig.capable", kindOf(index) == NodeKind::kL40S ? "false" : "true"},
                 {"topology.kubernetes.io/region", "us-east-1"},
                 {"topology.kubernetes.io/zone", zone}};
  Json annotations = {{"csi.volume.kubernetes.io/nodeid", "{\"ebs.csi.aws.com\":\"" + instance + "\"}"},
                      {"node.alpha.kubernetes.io/ttl", "0"},
                      {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}};

  // managedFields: kubelet's status heartbeat and GPU feature discovery's labels.
  Json gfd_labels = Json::object();
  for (auto it = labels.begin(); it != labels.end(); ++it) {
    if (it.key().rfind("nvidia.com/", 0) == 0) gfd_labels["f:" + it.key()] = Json::object();
  }
  Json managed = Json::array();
  managed.push_back(
      {{"manager", "kubelet"},
       {"operation", "Update"},
       {"apiVersion", "v1"},
       {"time", "2025-06-10T09:13:55Z"},
       {"fieldsType", "FieldsV1"},
       {"fieldsV1",
        {{"f:status",
          {{"f:conditions", {{"k:{\"type\":\"Ready\"}", {{"f:lastHeartbeatTime", Json::object()}}}}}}}}},
       {"subresource", "status"}});
  managed.push_back({{"manager", "gpu-feature-discovery"},
                     {"operation", "Update"},
                     {"apiVersion", "v1"},
                     {"time", "2025-06-10T09:13:55Z"},
                     {"fieldsType", "FieldsV1"},
                     {"fieldsV1", {{"f:metadata", {{"f:labels", std::move(gfd_labels)}}}}}});

  Json meta = {{"name", name},
               {"uid", uid},
               {"resourceVersion", rv},
               {"creationTimestamp", "2025-03-02T17:40:11Z"},
               {"labels", std::move(labels)},
               {"annotations", std::move(annotations)},
               {"managedFields", std::move(managed)}};
  Json spec_json = {
      {"podCIDR", cidr},
      {"podCIDRs", Json::array({cidr})},
      {"providerID", "aws:///" + zone + "/" + instance},
      {"taints",
       Json::array({Json{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}})}};
  Json capacity = {{"cpu", k.cpu},         {"ephemeral-storage", "3750537192Ki"},
                   {"hugepages-1Gi", "0"}, {"hugepages-2Mi", "0"},
                   {"memory", k.memory},   {"nvidia.com/gpu", "8"},
                   {"pods", "110"}};
  Json allocatable = {{"cpu", k.cpu_allocatable},
                      {"ephemeral-storage", "3456546880497"},
                      {"hugepages-1Gi", "0"},
                      {"hugepages-2Mi", "0"},
                      {"memory", k.memory_allocatable},
                      {"nvidia.com/gpu", "8"},
                      {"pods", "110"}};
  Json conditions = Json::array(
      {condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                 "kubelet has sufficient memory available"),
       condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
       condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
       condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")});
  Json status = {
      {"capacity", std::move(capacity)},
      {"allocatable", std::move(allocatable)},
      {"conditions", std::move(conditions)},
      {"addresses", Json::array({Json{{"type", "InternalIP"}, {"address", ip}},
                                 Json{{"type", "Hostname"}, {"address", name}}})},
      {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
      {"nodeInfo",
       {{"machineID", hex(h1, 16) + hex(h2, 16)},
        {"systemUUID", "ec2" + uid.substr(3)},
        {"bootID", uuid(h2, h1)},
        {"kernelVersion", "6.8.0-1024-aws"},
        {"osImage", "Ubuntu 22.04.5 LTS"},
        {"containerRuntimeVersion", "containerd://1.7.27"},
        {"kubeletVersion", "v1.33.1"},
        {"kubeProxyVersion", ""},
        {"operatingSystem", "linux"},
        {"architecture", "amd64"}}},
      {"images",
       Json::array(
           {image({"nvcr.io/nvidia/"
                   "pytorch@sha256:5b2e6f0d1c9a8b7e6d5c4b3a29180f7e6d5c4b3a2918f0e7d6c5b4a392817f6e",
                   "nvcr.io/nvidia/pytorch:25.04-py3"},
                  10684737522),
            image(
                {"nvcr.io/nvidia/"
                 "k8s-device-plugin@sha256:1b5a8d3c7e9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b",
                 "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"},
                219663852),
            image({"registry.k8s.io/"
                   "pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
                   "registry.k8s.io/pause:3.10"},
                  320368)})},
      {"runtimeHandlers",
       Json::array({Json{{"name", "nvidia"},
                         {"features", {{"recursiveReadOnlyMounts", true}, {"userNamespaces", true}}}},
                    Json{{"name", ""},
                         {"features", {{"recursiveReadOnlyMounts", true}, {"userNamespaces", true}}}}})},
      {"features", {{"supplementalGroupsPolicy", true}}}};
  return Json{{"metadata", std::move(meta)}, {"spec", std::move(spec_json)}, {"status", std::move(status)}};
}

Json makePodObject(const std::string& name, const std::string& uid, int gpus, bool nvlink) {
  static const Json kTemplate = Json::parse(kPodTemplate);
  Json pod = kTemplate;
  pod["metadata"]["name"] = name;
  pod["metadata"]["uid"] = uid;
  if (nvlink) pod["metadata"]["annotations"]["troupe.dev/gpu-topology"] = "nvlink";
  Json& resources = pod["spec"]["containers"][0]["resources"];
  resources["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  resources["requests"]["nvidia.com/gpu"] = std::to_string(gpus);
  return pod;
}

Cluster makeCluster(int nodes, bool with_objects) {
  // kube-scheduler lists candidates in its node tree's zone-interleaved order from a rotating
  // start, not sorted by name: a fixed shuffle stands in for that.
  std::vector<int> order(static_cast<size_t>(nodes));
  for (int i = 0; i < nodes; ++i) order[static_cast<size_t>(i)] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[mix(i * 2654435761ULL) % i]);
  Cluster c;
  c.names.reserve(static_cast<size_t>(nodes));
  if (with_objects) c.node_json.reserve(static_cast<size_t>(nodes));
  for (int i : order) {
    c.names.push_back(nodeName(i));
    if (with_objects) c.node_json.push_back(makeNodeObject(i).dump());
  }
  return c;
}

void learnNodes(sched::Scheduler& scheduler, int nodes) {
  for (int i = 0; i < nodes; ++i) {
    Result<model::NodeFacts> facts = adapters::nodeFromJson(makeNodeObject(i));
    if (!facts.isOk()) die("node " + nodeName(i) + ": " + facts.status().message());
    if (Status s = scheduler.upsertNode(facts.value()); !s.isOk()) die(s.message());
  }
}

FillStats populate(sched::Scheduler& scheduler, int nodes) {
  // Per node: two in eight empty, two in eight full, four in eight half full in various shapes.
  static const std::vector<std::vector<int>> kPatterns = {{},  {},     {8},       {8},
                                                          {4}, {2, 2}, {2, 1, 1}, {1, 1, 1, 1}};
  FillStats stats;
  for (int i = 0; i < nodes; ++i) {
    const std::string node = nodeName(i);
    const auto& pattern = kPatterns[mix(static_cast<uint64_t>(i) * 7919 + 17) % kPatterns.size()];
    stats.gpus += 8;
    for (size_t p = 0; p < pattern.size(); ++p) {
      sched::PodFacts pod;
      pod.ns = "batch";
      pod.name = "bg-" + std::to_string(i) + "-" + std::to_string(p);
      pod.uid = uuid(mix(static_cast<uint64_t>(i) << 4 | p), mix(static_cast<uint64_t>(i) * 31 + p));
      sched::ContainerResources c;
      c.requests["nvidia.com/gpu"] = std::to_string(pattern[p]);
      c.limits["nvidia.com/gpu"] = std::to_string(pattern[p]);
      pod.containers.push_back(std::move(c));
      sched::FilterResult r = scheduler.filter(pod, {node});
      if (r.passed.size() != 1) die("background pod " + pod.name + " does not fit " + node);
      Result<model::Allocation> a = scheduler.reserve(pod.uid, pod.ns, pod.name, node);
      if (!a.isOk()) die("background pod " + pod.name + ": " + a.status().message());
      ++stats.pods;
      stats.gpus_used += pattern[p];
    }
  }
  return stats;
}

std::string namesBody(const std::string& pod_json, const std::vector<std::string>& names) {
  std::string body;
  size_t size = pod_json.size() + 64;
  for (const std::string& n : names) size += n.size() + 3;
  body.reserve(size);
  body += "{\"Pod\":";
  body += pod_json;
  body += ",\"Nodes\":null,\"NodeNames\":[";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) body += ',';
    body += '"';
    body += names[i];  // plain DNS names: nothing to escape
    body += '"';
  }
  body += "]}";
  return body;
}

std::string fullBody(const std::string& pod_json, const std::vector<std::string>& node_json) {
  std::string body;
  size_t size = pod_json.size() + 96;
  for (const std::string& n : node_json) size += n.size() + 1;
  body.reserve(size);
  body += "{\"Pod\":";
  body += pod_json;
  body += ",\"Nodes\":{\"metadata\":{},\"items\":[";
  for (size_t i = 0; i < node_json.size(); ++i) {
    if (i) body += ',';
    body += node_json[i];
  }
  body += "]},\"NodeNames\":null}";
  return body;
}

}  // namespace troupe::bench
