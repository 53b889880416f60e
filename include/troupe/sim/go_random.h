// Go's math/rand (Go 1.19 semantics), so that a replay with seed 42 draws exactly the numbers the
// FGD artifact drew: the 607-word additive lagged-Fibonacci source and the Int63, Intn, Perm and
// Shuffle methods on top of it (Shuffle bounds its draws differently from Intn and Perm).
//
// The seeding table ("rngCooked" in Go) is not copied: it is regenerated from its definition in
// Go's gen_cooked.go (the generator seeded with 1, after 7.8e12 steps) by polynomial jump-ahead.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace troupe::sim {

class GoRandom {
 public:
  static constexpr int kLength = 607;
  static constexpr int kTap = 273;

  explicit GoRandom(int64_t seed);

  int64_t int63();
  uint32_t uint32() { return static_cast<uint32_t>(int63() >> 31); }
  int32_t int31() { return static_cast<int32_t>(int63() >> 32); }
  int64_t int63n(int64_t n);
  int32_t int31n(int32_t n);
  int intn(int n);  // n in 1..2^31-1
  // Uniform in [0, n) by Lemire's multiply-shift: what Shuffle uses, a different method from intn.
  int32_t boundedForShuffle(int32_t n);
  std::vector<int> perm(int n);
  template <typename Swap>
  void shuffle(int n, Swap&& swap) {
    for (int i = n - 1; i > 0; --i) swap(i, static_cast<int>(boundedForShuffle(i + 1)));
  }

  // The seeding table, derived once (see the file comment).
  static const std::array<int64_t, kLength>& cookedTable();

 private:
  int tap_ = 0;
  int feed_ = kLength - kTap;
  std::array<int64_t, kLength> vec_{};
};

}  // namespace troupe::sim
