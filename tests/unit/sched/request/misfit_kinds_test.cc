// Misfit kinds: kMisfitKinds follows the enum (Misfit::kEnd), so the per-kind arrays the filter
// keeps (Scheduler::filterSingleLocked) hold every kind, and every kind has its words.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "troupe/sched/score/placement.h"

namespace {

using troupe::sched::Misfit;

TEST_CASE("misfit kinds: the count is the enum's, and every kind is categorised", "[misfit]") {
  static_assert(troupe::sched::kMisfitKinds == static_cast<size_t>(Misfit::kNeedsDra) + 1,
                "a new Misfit goes above kEnd");
  CHECK(std::string(troupe::sched::categoryOf(Misfit::kNone)).empty());
  CHECK(troupe::sched::fitOf(Misfit::kNone) == troupe::sched::Fit::kFits);
  std::set<std::string> categories;
  for (size_t m = 1; m < troupe::sched::kMisfitKinds; ++m) {
    const auto misfit = static_cast<Misfit>(m);
    INFO("misfit " << m);
    CHECK_FALSE(std::string(troupe::sched::categoryOf(misfit)).empty());
    CHECK(troupe::sched::fitOf(misfit) != troupe::sched::Fit::kFits);
    categories.insert(troupe::sched::categoryOf(misfit));
  }
  CHECK(categories ==
        std::set<std::string>{"busy", "count", "dra", "memory", "model", "no-gpus", "resources", "topology"});
}

}  // namespace
