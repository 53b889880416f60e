// The Go math/rand port: the values below are what Go prints for
// rand.New(rand.NewSource(42)) making the same calls in the same order.
#include <catch2/catch.hpp>
#include <utility>
#include <vector>

#include "troupe/sim/go_random.h"

TEST_CASE("GoRandom draws what Go's math/rand draws for seed 42") {
  troupe::sim::GoRandom r(42);
  CHECK(r.int63() == 3440579354231278675);
  CHECK(r.int63() == 608747136543856411);
  CHECK(r.intn(8152) == 4996);
  CHECK(r.intn(1000) == 750);
  CHECK(r.perm(10) == std::vector<int>{6, 5, 0, 8, 2, 1, 3, 7, 9, 4});
  std::vector<int> a{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  r.shuffle(10, [&](int i, int j) { std::swap(a[static_cast<size_t>(i)], a[static_cast<size_t>(j)]); });
  CHECK(a == std::vector<int>{2, 3, 1, 0, 8, 9, 7, 5, 4, 6});
  CHECK(r.int63() == 2094832826273809275);
}

TEST_CASE("the derived seeding table has Go's first words") {
  // rngCooked[0..1] in Go's rng.go; the table here is derived, not copied.
  const auto& t = troupe::sim::GoRandom::cookedTable();
  CHECK(t[0] == -4181792142133755926);
  CHECK(t[1] == -4576982950128230565);
}
