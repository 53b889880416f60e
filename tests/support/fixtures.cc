#include "support/fixtures.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace troupe::testing {

std::optional<std::string> sharedDir() {
  const char* dir = std::getenv("TROUPE_SHARED_DIR");
  std::string path = dir ? dir : "../shared";
  if (!std::filesystem::exists(path + "/fixtures/kube-scheduler")) return std::nullopt;
  return path;
}

std::string sourceDir() {
  const char* dir = std::getenv("TROUPE_SOURCE_DIR");
  return dir ? dir : ".";
}

std::optional<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

model::NodeFacts gpuNode(const std::string& name, int gpus, const std::string& product, int64_t memory_mib) {
  model::NodeFacts f;
  f.name = name;
  f.labels[model::kLabelGpuProduct] = product;
  f.labels[model::kLabelGpuMemory] = std::to_string(memory_mib);
  f.labels[model::kLabelGpuCount] = std::to_string(gpus);
  f.allocatable_gpus = std::to_string(gpus);
  return f;
}

sched::PodFacts gpuPod(const std::string& name, int gpus, const sched::StringMap& annotations) {
  sched::PodFacts p;
  p.ns = "default";
  p.name = name;
  p.uid = "uid-" + name;
  p.annotations = annotations;
  sched::ContainerResources c;
  if (gpus > 0) c.limits["nvidia.com/gpu"] = std::to_string(gpus);
  p.containers.push_back(c);
  return p;
}

int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace troupe::testing
