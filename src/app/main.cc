// troupe: the one binary. Composition root: the only place that sees every adapter.
#include <iostream>
#include <string>
#include <vector>

#include "app/commands.h"

namespace {

constexpr const char* kHelp = R"(troupe - GPU topology and gang scheduling for the stock kube-scheduler

Troupe is a kube-scheduler extender: kube-scheduler calls it over HTTP for every pod that
requests nvidia.com/gpu, and Troupe filters and ranks nodes by GPU model, memory, free GPUs
and how well the GPUs it would assign are connected (NVSwitch > NVLink > PCIe > cross-socket).

Usage:
  troupe serve [flags]      run the extender (see: troupe help serve)
  troupe simulate [flags]   replay a GPU cluster trace and compare policies (see: troupe help simulate)
  troupe version            print the version
  troupe help [COMMAND]     this text, or a command's flags

Quick start (no cluster needed):
  troupe serve --listen 127.0.0.1:8888 --cluster examples/cluster.yaml
  curl -s -XPOST 127.0.0.1:8888/filter -d @examples/requests/filter-8gpu-nvlink.json

Pods tell Troupe what they need with annotations:
  troupe.dev/gpu-model: NVIDIA-H100-80GB-HBM3   allowed GPU products (comma-separated)
  troupe.dev/gpu-memory: 40Gi                   minimum memory per GPU
  troupe.dev/gpu-topology: nvlink               all GPUs in one NVLink domain (or preferred, none)
  troupe.dev/gpu-milli: 500                     half of one GPU, shared with other pods
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() >= 2 && args[0] == "help" && args[1] == "serve") {
      std::cout << troupe::app::kServeHelp;
      return 0;
    }
    if (args.size() >= 2 && args[0] == "help" && args[1] == "simulate") {
      std::cout << troupe::app::kSimulateHelp;
      return 0;
    }
    std::cout << kHelp;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "serve") return troupe::app::serveCommand(args);
  if (command == "simulate") return troupe::app::simulateCommand(args);
  if (command == "version" || command == "--version") {
    std::cout << "troupe " << TROUPE_VERSION << "\n";
    return 0;
  }
  std::cerr << "troupe: unknown command \"" << command << "\"; run 'troupe help' for the list\n";
  return 2;
}
