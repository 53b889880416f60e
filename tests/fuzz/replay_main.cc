// Replays every file of the fuzz corpus through the fuzz targets' entry points, without
// libFuzzer: a ctest of every regular build (and of the sanitizer builds), so the seeds and
// every crasher ever found stay fixed. Usage:
//   troupe_fuzz_replay CORPUS_ROOT [JSON_SEED_DIR...]
// CORPUS_ROOT/<target>/ holds each target's files (it must not be empty); the JSON seed dirs
// (the recorded kube-scheduler bodies, the shared fixtures) go through the JSON targets too.
// A seed dir that does not exist is skipped with a message.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_targets.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> filesUnder(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

size_t replay(const troupe::fuzz::Target& t, const fs::path& dir) {
  size_t n = 0;
  for (const fs::path& file : filesUnder(dir)) {
    const std::string bytes = readAll(file);
    // Printed first, so a crash names the file.
    std::fprintf(stderr, "%s < %s\n", t.name, file.c_str());
    t.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT [JSON_SEED_DIR...]\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  std::vector<fs::path> seeds;
  for (int i = 2; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      seeds.emplace_back(argv[i]);
    } else {
      std::printf("skipping seed dir %s: not there (the shared fixtures are optional)\n", argv[i]);
    }
  }
  int failures = 0;
  size_t total = 0;
  for (const troupe::fuzz::Target& t : troupe::fuzz::kTargets) {
    const fs::path own = root / t.name;
    size_t n = fs::is_directory(own) ? replay(t, own) : 0;
    if (n == 0) {
      std::printf("FAIL %s: no corpus in %s\n", t.name, own.c_str());
      ++failures;
      continue;
    }
    if (t.json) {
      for (const fs::path& dir : seeds) n += replay(t, dir);
    }
    std::printf("%-13s %5zu inputs replayed\n", t.name, n);
    total += n;
  }
  std::printf("%zu inputs replayed through %zu targets, %d failures\n", total,
              std::size(troupe::fuzz::kTargets), failures);
  return failures == 0 ? 0 : 1;
}
