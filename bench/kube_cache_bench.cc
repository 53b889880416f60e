// kube_cache_bench: the memory and time Troupe's Kubernetes caches need for a large cluster.
//
// Feeds N nodes and M pods, as the API server's JSON (full objects with managedFields,
// volumes, env, probes, conditions, images: ~4.5 KB per node, ~3.5 KB per pod), through the
// same path troupe serve uses: Watcher (paged LIST, limit 500, then a WATCH stream) ->
// parseKubeJson -> ClusterSync -> Scheduler. No network: an in-process KubeTransport serves
// the pages, generated one at a time so the input itself is never all in memory.
//
// The default pod mix per 8-GPU node: one 4-GPU pod, one 2-GPU pod and one 1-GPU pod with
// troupe.dev/gpus, eight pods sharing GPU 7 (troupe.dev/gpu-milli 125), and nine pods without
// GPUs (daemon sets, services): 5,000 nodes -> 55,000 GPU pods + 45,000 others = 100,000.
// Every tenth node's 1-GPU pod has no annotation (bound by someone else: unknown indices).
//
// Reports VmRSS before, after the node list, after the pod list, after a stream of watch
// events, and VmHWM (the peak, which includes the transient JSON of one page).
//
//   kube_cache_bench [--nodes 5000] [--pods-per-node 20] [--events 20000] [--json FILE]
#include <malloc.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "adapters/kube/watch/watcher.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using Clock = std::chrono::steady_clock;
using troupe::kube::ApiErrorKind;
using troupe::kube::ApiReply;

double procStatusMiB(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') {
      return std::stod(line.substr(n + 1)) / 1024.0;  // kB
    }
  }
  return -1;
}
double rss() { return procStatusMiB("VmRSS"); }
double hwm() { return procStatusMiB("VmHWM"); }
double cpuSeconds() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
void resetHwm() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// A node as the API server sends it (shaped like shared/fixtures' GPU nodes).
const char* const kNode =
    R"({"metadata":{"name":"@NAME@","uid":"@UID@","resourceVersion":"@RV@","creationTimestamp":"2025-06-01T08:00:00Z","labels":{"beta.kubernetes.io/arch":"amd64","beta.kubernetes.io/os":"linux","kubernetes.io/arch":"amd64","kubernetes.io/hostname":"@NAME@","kubernetes.io/os":"linux","node.kubernetes.io/instance-type":"p5.48xlarge","topology.kubernetes.io/region":"us-east-1","topology.kubernetes.io/zone":"us-east-1a","nvidia.com/cuda.driver.major":"550","nvidia.com/cuda.driver.minor":"90","nvidia.com/gfd.timestamp":"1717580000","nvidia.com/gpu.compute.major":"9","nvidia.com/gpu.compute.minor":"0","nvidia.com/gpu.count":"8","nvidia.com/gpu.family":"hopper","nvidia.com/gpu.machine":"p5.48xlarge","nvidia.com/gpu.memory":"81559","nvidia.com/gpu.present":"true","nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","nvidia.com/gpu.replicas":"1","nvidia.com/mig.capable":"false"},"annotations":{"node.alpha.kubernetes.io/ttl":"0","volumes.kubernetes.io/controller-managed-attach-detach":"true","nfd.node.kubernetes.io/feature-labels":"cpu-cpuid.ADX,cpu-cpuid.AESNI,cpu-cpuid.AVX,cpu-cpuid.AVX2,cpu-cpuid.AVX512BW","csi.volume.kubernetes.io/nodeid":"{\"ebs.csi.aws.com\":\"i-0abc\"}"},"managedFields":[{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2025-06-10T09:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}},"f:status":{"f:allocatable":{"f:nvidia.com/gpu":{}},"f:capacity":{"f:nvidia.com/gpu":{}},"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:status":{}}}}}},{"manager":"gpu-feature-discovery","operation":"Update","apiVersion":"v1","time":"2025-06-10T09:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:nvidia.com/gpu.count":{},"f:nvidia.com/gpu.family":{},"f:nvidia.com/gpu.memory":{},"f:nvidia.com/gpu.product":{}}}}}]},"spec":{"providerID":"aws:///us-east-1a/i-0abc"},"status":{"capacity":{"cpu":"192","ephemeral-storage":"3750000000Ki","hugepages-1Gi":"0","hugepages-2Mi":"0","memory":"2097152000Ki","nvidia.com/gpu":"8","pods":"110"},"allocatable":{"cpu":"191450m","ephemeral-storage":"3455999999Ki","hugepages-1Gi":"0","hugepages-2Mi":"0","memory":"2090000000Ki","nvidia.com/gpu":"8","pods":"110"},"conditions":[{"type":"MemoryPressure","status":"False","lastHeartbeatTime":"2025-06-10T09:14:00Z","lastTransitionTime":"2025-06-01T08:01:00Z","reason":"KubeletHasSufficientMemory","message":"kubelet has sufficient memory available"},{"type":"DiskPressure","status":"False","lastHeartbeatTime":"2025-06-10T09:14:00Z","lastTransitionTime":"2025-06-01T08:01:00Z","reason":"KubeletHasNoDiskPressure","message":"kubelet has no disk pressure"},{"type":"PIDPressure","status":"False","lastHeartbeatTime":"2025-06-10T09:14:00Z","lastTransitionTime":"2025-06-01T08:01:00Z","reason":"KubeletHasSufficientPID","message":"kubelet has sufficient PID available"},{"type":"Ready","status":"True","lastHeartbeatTime":"2025-06-10T09:14:00Z","lastTransitionTime":"2025-06-01T08:02:00Z","reason":"KubeletReady","message":"kubelet is posting ready status"}],"addresses":[{"type":"InternalIP","address":"10.0.1.17"},{"type":"InternalDNS","address":"ip-10-0-1-17.ec2.internal"},{"type":"Hostname","address":"ip-10-0-1-17.ec2.internal"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}},"nodeInfo":{"machineID":"ec2abc","systemUUID":"ec2abc","bootID":"9b1c","kernelVersion":"5.10.217-205.860.amzn2.x86_64","osImage":"Amazon Linux 2","containerRuntimeVersion":"containerd://1.7.11","kubeletVersion":"v1.30.0","kubeProxyVersion":"v1.30.0","operatingSystem":"linux","architecture":"amd64"},"images":[{"names":["nvcr.io/nvidia/pytorch@sha256:0d1f","nvcr.io/nvidia/pytorch:24.05-py3"],"sizeBytes":9876543210},{"names":["nvcr.io/nvidia/k8s-device-plugin@sha256:1a2b","nvcr.io/nvidia/k8s-device-plugin:v0.15.0"],"sizeBytes":123456789},{"names":["nvcr.io/nvidia/gpu-feature-discovery@sha256:3c4d","nvcr.io/nvidia/gpu-feature-discovery:v0.8.2"],"sizeBytes":98765432},{"names":["registry.k8s.io/pause@sha256:7031","registry.k8s.io/pause:3.9"],"sizeBytes":321520}],"runtimeHandlers":[{"name":"nvidia","features":{"recursiveReadOnlyMounts":true}},{"name":"runc","features":{"recursiveReadOnlyMounts":true}}]}})";

// A running pod as the API server sends it.
const char* const kPod =
    R"({"metadata":{"name":"@NAME@","generateName":"@GEN@-","namespace":"ml-training","uid":"@UID@","resourceVersion":"@RV@","creationTimestamp":"2025-06-10T09:14:07Z","labels":{"app.kubernetes.io/name":"@GEN@","batch.kubernetes.io/controller-uid":"5f0c3b7e-2d4a-4c1e-9b8a-6e2f1d7c9a10","batch.kubernetes.io/job-completion-index":"0","batch.kubernetes.io/job-name":"@GEN@","controller-uid":"5f0c3b7e-2d4a-4c1e-9b8a-6e2f1d7c9a10","job-name":"@GEN@"},"annotations":{"batch.kubernetes.io/job-completion-index":"0"@ANN@},"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"@GEN@","uid":"5f0c3b7e-2d4a-4c1e-9b8a-6e2f1d7c9a10","controller":true,"blockOwnerDeletion":true}],"finalizers":["batch.kubernetes.io/job-tracking"],"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2025-06-10T09:14:07Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:batch.kubernetes.io/job-completion-index":{}},"f:finalizers":{".":{},"v:\"batch.kubernetes.io/job-tracking\"":{}},"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:job-name":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"5f0c3b7e\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"trainer\"}":{".":{},"f:args":{},"f:command":{},"f:env":{},"f:image":{},"f:resources":{}}}}}},{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2025-06-10T09:15:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}},"subresource":"status"}]},"spec":{"volumes":[{"name":"dshm","emptyDir":{"medium":"Memory","sizeLimit":"64Gi"}},{"name":"kube-api-access-7wz5k","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}}],"defaultMode":420}}],"containers":[{"name":"trainer","image":"nvcr.io/nvidia/pytorch:24.05-py3","command":["torchrun"],"args":["--nnodes=4","--nproc-per-node=4","train.py","--config=configs/7b.yaml"],"env":[{"name":"NCCL_DEBUG","value":"WARN"},{"name":"NCCL_IB_DISABLE","value":"0"},{"name":"MASTER_PORT","value":"29500"},{"name":"JOB_COMPLETION_INDEX","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.labels['batch.kubernetes.io/job-completion-index']"}}}],"resources":@RES@,"volumeMounts":[{"name":"dshm","mountPath":"/dev/shm"},{"name":"kube-api-access-7wz5k","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","nodeSelector":{"nvidia.com/gpu.present":"true"},"serviceAccountName":"default","serviceAccount":"default","nodeName":"@NODE@","securityContext":{},"schedulerName":"troupe-scheduler","tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"},{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":100000,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Running","conditions":[{"type":"PodReadyToStartContainers","status":"True","lastProbeTime":null,"lastTransitionTime":"2025-06-10T09:14:12Z"},{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":"2025-06-10T09:14:08Z"},{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2025-06-10T09:15:00Z"},{"type":"ContainersReady","status":"True","lastProbeTime":null,"lastTransitionTime":"2025-06-10T09:15:00Z"},{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2025-06-10T09:14:08Z"}],"hostIP":"10.0.1.17","hostIPs":[{"ip":"10.0.1.17"}],"podIP":"10.244.3.21","podIPs":[{"ip":"10.244.3.21"}],"startTime":"2025-06-10T09:14:08Z","containerStatuses":[{"name":"trainer","state":{"running":{"startedAt":"2025-06-10T09:14:59Z"}},"lastState":{},"ready":true,"restartCount":0,"image":"nvcr.io/nvidia/pytorch:24.05-py3","imageID":"nvcr.io/nvidia/pytorch@sha256:0d1f","containerID":"containerd://4c1e9b8a6e2f1d7c","started":true}],"qosClass":"Burstable"}})";

struct Mix {
  int nodes = 5000;
  int pods_per_node = 20;  // 11 GPU pods + 9 others
};

std::string nodeName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-node-%05d", i);
  return buf;
}

std::string uid(char kind, int64_t i) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%c%07llx-7b2d-4e8a-9f10-2a6b5c4d8e71", kind, static_cast<long long>(i));
  return buf;
}

std::string nodeJson(int i, int64_t rv) {
  std::string s = replaceAll(kNode, "@NAME@", nodeName(i));
  s = replaceAll(s, "@UID@", uid('n', i));
  return replaceAll(s, "@RV@", std::to_string(rv));
}

// Pod j of node i: 0 -> 4 GPUs "0,1,2,3"; 1 -> 2 GPUs "4,5"; 2 -> 1 GPU "6" (unannotated on
// every tenth node); 3..10 -> 125/1000 of GPU 7; 11.. -> no GPU.
std::string podJson(int i, int j, int64_t rv) {
  std::string res = R"({"limits":{"cpu":"4","memory":"32Gi"},"requests":{"cpu":"2","memory":"16Gi"}})";
  std::string ann;
  if (j == 0 || j == 1 || j == 2) {
    const int g = j == 0 ? 4 : j == 1 ? 2 : 1;
    res = R"({"limits":{"cpu":"48","memory":"480Gi","nvidia.com/gpu":")" + std::to_string(g) +
          R"("},"requests":{"cpu":"48","memory":"480Gi","nvidia.com/gpu":")" + std::to_string(g) + R"("}})";
    const char* gpus = j == 0 ? "0,1,2,3" : j == 1 ? "4,5" : "6";
    if (!(j == 2 && i % 10 == 0)) ann = std::string(R"(,"troupe.dev/gpus":")") + gpus + "\"";
  } else if (j <= 10) {
    ann = R"(,"troupe.dev/gpu-milli":"125","troupe.dev/gpus":"7")";
  }
  const std::string name = nodeName(i) + "-p" + std::to_string(j);
  std::string s = replaceAll(kPod, "@NAME@", name);
  s = replaceAll(s, "@GEN@", "job-" + std::to_string(j));
  s = replaceAll(s, "@UID@", uid('p', static_cast<int64_t>(i) * 100 + j));
  s = replaceAll(s, "@RV@", std::to_string(rv));
  s = replaceAll(s, "@NODE@", nodeName(i));
  s = replaceAll(s, "@ANN@", ann);
  return replaceAll(s, "@RES@", res);
}

// Serves list pages and one watch stream, generated on demand.
class GeneratedApi final : public troupe::kube::KubeTransport {
 public:
  explicit GeneratedApi(Mix mix) : mix_(mix) {}
  uint64_t bytes = 0;
  int watch_events = 0;  // the next stream: pods finishing (DELETED), replaced (ADDED), updated (MODIFIED)

  ApiReply request(const std::string& method, const std::string& path, const std::string&,
                   const std::string&) override {
    if (method != "GET") return troupe::kube::replyFromHttp(201, "{}");
    const bool nodes = path.rfind("/api/v1/nodes", 0) == 0;
    const int64_t total = nodes ? mix_.nodes : static_cast<int64_t>(mix_.nodes) * mix_.pods_per_node;
    int64_t start = 0;
    if (size_t c = path.find("continue="); c != std::string::npos) start = std::stoll(path.substr(c + 9));
    const int64_t end = std::min(total, start + 500);
    std::string body = nodes ? R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1000")"
                             : R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1000")";
    if (end < total) body += ",\"continue\":\"" + std::to_string(end) + "\"";
    body += "},\"items\":[";
    for (int64_t k = start; k < end; ++k) {
      if (k > start) body += ',';
      body += nodes ? nodeJson(static_cast<int>(k), 10 + k)
                    : podJson(static_cast<int>(k / mix_.pods_per_node),
                              static_cast<int>(k % mix_.pods_per_node), 10 + k);
    }
    body += "]}";
    bytes += body.size();
    return troupe::kube::replyFromHttp(200, std::move(body));
  }

  ApiReply stream(const std::string&, std::chrono::seconds, const std::function<bool(std::string&)>& on_line,
                  troupe::kube::StopSignal&) override {
    // Generated one line at a time, like a real stream: the input is never all in memory.
    for (int e = 0; e < watch_events; ++e) {
      const int i = ((e / 3) * 7919) % mix_.nodes;  // delete, re-add, then update one node's pods
      const int j = e % 3 == 2 ? 15 % mix_.pods_per_node : 0;
      const char* type = e % 3 == 0 ? "DELETED" : e % 3 == 1 ? "ADDED" : "MODIFIED";
      std::string line =
          std::string(R"({"type":")") + type + R"(","object":)" + podJson(i, j, 2000 + e) + "}";
      bytes += line.size();
      if (!on_line(line)) break;
    }
    watch_events = 0;
    return troupe::kube::replyFromHttp(200, "");
  }

 private:
  Mix mix_;
};

}  // namespace

int main(int argc, char** argv) {
  Mix mix;
  int events = 20000;
  std::string json_out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--nodes")
      mix.nodes = std::stoi(next());
    else if (a == "--pods-per-node")
      mix.pods_per_node = std::stoi(next());
    else if (a == "--events")
      events = std::stoi(next());
    else if (a == "--json")
      json_out = next();
    else {
      std::cerr << "usage: kube_cache_bench [--nodes N] [--pods-per-node N] [--events N] [--json FILE]\n";
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  const int64_t pods = static_cast<int64_t>(mix.nodes) * mix.pods_per_node;

  std::ostringstream sink;  // logs are not the point here
  troupe::adapters::Logger logger(sink, troupe::adapters::LogLevel::kWarn);
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  troupe::kube::ClusterSync sync(scheduler, logger);
  GeneratedApi api(mix);
  troupe::kube::StopSignal stop;
  auto uniform = [] { return 0.5; };

  malloc_trim(0);
  resetHwm();
  const double rss0 = rss();

  troupe::kube::WatchConfig nc{"nodes", "/api/v1/nodes", "", 500, 300, {}, {}, {}};
  troupe::kube::Watcher nodes_w(api, nc, sync.nodeHandler(), logger, uniform);
  auto t0 = Clock::now();
  if (!nodes_w.step(stop)) return 1;
  const double nodes_s = std::chrono::duration<double>(Clock::now() - t0).count();
  malloc_trim(0);
  const double rss_nodes = rss();

  troupe::kube::WatchConfig pc{
      "pods", "/api/v1/pods", "status.phase!=Succeeded,status.phase!=Failed", 500, 300, {}, {}, {}};
  troupe::kube::Watcher pods_w(api, pc, sync.podHandler(), logger, uniform);
  const uint64_t bytes_before_pods = api.bytes;
  t0 = Clock::now();
  double cpu0 = cpuSeconds();
  if (!pods_w.step(stop)) return 1;
  const double pods_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double pods_cpu = cpuSeconds() - cpu0;
  const uint64_t pod_bytes = api.bytes - bytes_before_pods;
  malloc_trim(0);
  const double rss_pods = rss();
  const double hwm_list = hwm();
  const troupe::kube::ClusterSync::Stats st = sync.stats();

  // A stream of watch events: a 4-GPU pod finishing (DELETED) and its replacement (ADDED),
  // then a status update of a pod without GPUs (MODIFIED), node after node.
  api.watch_events = events;
  t0 = Clock::now();
  cpu0 = cpuSeconds();
  pods_w.step(stop);
  const double events_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double events_cpu = cpuSeconds() - cpu0;
  malloc_trim(0);
  const double rss_events = rss();
  const double hwm_all = hwm();
  const troupe::sched::ClusterSummary summary = scheduler.summary();
  int free_gpus = 0, total_gpus = 0;
  for (const auto& r : summary.by_product) {
    free_gpus += r.whole_free;
    total_gpus += r.gpus;
  }

  std::printf(
      "kube_cache_bench: %d nodes, %lld pods (%zu GPU pods, %zu of them at unknown indices), %d watch "
      "events\n",
      mix.nodes, static_cast<long long>(pods), st.gpu_pods, st.unknown_pods, events);
  std::printf("  JSON read: %.0f MiB nodes+pods (%.1f KB per pod)\n",
              static_cast<double>(api.bytes) / (1 << 20),
              static_cast<double>(pod_bytes) / 1024.0 / static_cast<double>(pods));
  std::printf(
      "  list+sync: nodes %.2f s; pods %.2f s wall, %.2f s CPU (%.0f pods per CPU second, generating the\n"
      "             JSON included); watch events %.2f s wall, %.2f s CPU (%.0f events per CPU second)\n",
      nodes_s, pods_s, pods_cpu, static_cast<double>(pods) / pods_cpu, events_s, events_cpu,
      events / std::max(1e-9, events_cpu));
  std::printf(
      "  VmRSS: start %.1f MiB, after nodes %.1f MiB (+%.1f), after pods %.1f MiB (+%.1f), after events %.1f "
      "MiB\n",
      rss0, rss_nodes, rss_nodes - rss0, rss_pods, rss_pods - rss_nodes, rss_events);
  std::printf(
      "  caches (nodes + pods, steady): %.1f MiB, %.0f bytes per pod; peak VmHWM %.1f MiB (lists), %.1f MiB "
      "(all)\n",
      rss_pods - rss0, (rss_pods - rss_nodes) * 1048576.0 / static_cast<double>(pods), hwm_list, hwm_all);
  std::printf("  model: %d GPUs, %d whole GPUs free, %d GPU pods in the core\n", total_gpus, free_gpus,
              summary.pods);
  if (!json_out.empty()) {
    std::ofstream out(json_out);
    out << "{\"nodes\":" << mix.nodes << ",\"pods\":" << pods << ",\"gpu_pods\":" << st.gpu_pods
        << ",\"events\":" << events << ",\"rss_start_mib\":" << rss0 << ",\"rss_nodes_mib\":" << rss_nodes
        << ",\"rss_pods_mib\":" << rss_pods << ",\"rss_events_mib\":" << rss_events
        << ",\"hwm_mib\":" << hwm_list << ",\"hwm_all_mib\":" << hwm_all << ",\"list_nodes_s\":" << nodes_s
        << ",\"list_pods_s\":" << pods_s << ",\"list_pods_cpu_s\":" << pods_cpu
        << ",\"events_s\":" << events_s << ",\"events_cpu_s\":" << events_cpu
        << ",\"json_mib\":" << static_cast<double>(api.bytes) / (1 << 20) << "}\n";
  }
  return 0;
}
