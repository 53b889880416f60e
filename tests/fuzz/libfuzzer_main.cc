// The libFuzzer entry point of one target; TROUPE_FUZZ_ENTRY names it (tests/fuzz/CMakeLists.txt).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return TROUPE_FUZZ_ENTRY(data, size);
}
