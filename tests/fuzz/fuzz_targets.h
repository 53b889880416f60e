// Troupe's fuzz targets: one entry point per parser of untrusted input, shared by the libFuzzer
// executables (tests/fuzz/libfuzzer_main.cc, clang, TROUPE_FUZZ=ON) and by the corpus replay
// that every regular build runs as a ctest (tests/fuzz/replay_main.cc). See docs/fuzzing.md.
//
// Each entry point takes arbitrary bytes, must never crash, throw or hit undefined behaviour,
// and checks properties of what the code under test returns (FUZZ_CHECK): a failed property
// aborts, which both libFuzzer and the replay report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::fuzz {

using Entry = int (*)(const uint8_t* data, size_t size);

int jsonScanner(const uint8_t* data, size_t size);  // JsonScanner vs the JSON library
int wireFilter(const uint8_t* data, size_t size);   // ExtenderArgs -> filter, prioritize, encoders
int wireBind(const uint8_t* data, size_t size);     // ExtenderBindingArgs -> reserve, encoder
int wirePreempt(const uint8_t* data, size_t size);  // ExtenderPreemptionArgs -> preempt, encoder
int kubeObjects(const uint8_t* data, size_t size);  // API server JSON (watch/list) -> pod, node
int podContract(const uint8_t* data, size_t size);  // parseGpuRequest, parseGang, filter
int nodeFacts(const uint8_t* data, size_t size);    // nodeFromFacts: labels, annotations, matrix
int quantity(const uint8_t* data, size_t size);     // parseQuantityMilli / parseQuantityValue
int duration(const uint8_t* data, size_t size);     // parseDuration
int kubeconfig(const uint8_t* data, size_t size);   // parseKubeconfig

struct Target {
  const char* name;  // also the folder of its corpus: tests/fuzz/corpus/<name>/
  Entry entry;
  bool json;  // seeded from the kube-scheduler request bodies as well
};

inline constexpr Target kTargets[] = {
    {"json_scanner", &jsonScanner, true}, {"wire_filter", &wireFilter, true},
    {"wire_bind", &wireBind, true},       {"wire_preempt", &wirePreempt, true},
    {"kube_objects", &kubeObjects, true}, {"pod_contract", &podContract, false},
    {"node_facts", &nodeFacts, false},    {"quantity", &quantity, false},
    {"duration", &duration, false},       {"kubeconfig", &kubeconfig, false},
};

// Reports a broken property with the input's target and aborts.
[[noreturn]] void propertyFailed(const char* target, const std::string& what);

}  // namespace troupe::fuzz

#define FUZZ_CHECK(cond, target, what)                                      \
  do {                                                                      \
    if (!(cond)) ::troupe::fuzz::propertyFailed(target, std::string(what)); \
  } while (0)
