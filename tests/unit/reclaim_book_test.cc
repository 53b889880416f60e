// The reclaim in flight: one at a time, ended by its last victim, its deadline or the adapter;
// meanwhile the victims' nodes refuse pods of other queues.
#include "troupe/sched/reclaim_book.h"

#include <catch2/catch.hpp>

using namespace troupe::sched;

namespace {

using TimePoint = ReclaimBook::TimePoint;
const TimePoint kT0 = TimePoint{} + std::chrono::hours(1);

ReclaimPlan twoVictims() {
  ReclaimPlan plan;
  plan.queue = "research";
  plan.for_key = "research/train-0";
  plan.victims.push_back({"u1", "batch/a", "batch", "", "n1", 4000, 0});
  plan.victims.push_back({"u2", "batch/b", "batch", "", "n2", 4000, 0});
  plan.freed_milli = 8000;
  return plan;
}

}  // namespace

TEST_CASE("reclaim book: one plan at a time, ended by its last victim", "[reclaim]") {
  ReclaimBook book;
  CHECK_FALSE(book.inFlight(kT0));
  REQUIRE(book.start(twoVictims(), kT0, kT0 + std::chrono::minutes(2)));
  CHECK(book.inFlight(kT0));
  ReclaimPlan other = twoVictims();
  other.for_key = "research/train-1";
  CHECK_FALSE(book.start(other, kT0, kT0 + std::chrono::minutes(2)));
  REQUIRE(book.current(kT0));
  CHECK(book.current(kT0)->for_key == "research/train-0");

  book.podGone("unrelated");
  book.podGone("u1");
  CHECK(book.inFlight(kT0));
  book.podGone("u1");  // twice is once
  CHECK(book.inFlight(kT0));
  book.podGone("u2");
  CHECK_FALSE(book.inFlight(kT0));
  CHECK(book.start(other, kT0, kT0 + std::chrono::minutes(2)));
}

TEST_CASE("reclaim book: the deadline and the adapter end a plan", "[reclaim]") {
  ReclaimBook book;
  REQUIRE(book.start(twoVictims(), kT0, kT0 + std::chrono::minutes(2)));
  CHECK(book.inFlight(kT0 + std::chrono::seconds(119)));
  // A new plan after the deadline, even if nobody asked in between.
  CHECK(book.start(twoVictims(), kT0 + std::chrono::minutes(2), kT0 + std::chrono::minutes(4)));

  ReclaimPlan other = twoVictims();
  other.victims.pop_back();
  CHECK_FALSE(book.finish(other));  // not the plan in flight
  CHECK(book.inFlight(kT0 + std::chrono::minutes(3)));
  CHECK(book.finish(twoVictims()));
  CHECK_FALSE(book.inFlight(kT0 + std::chrono::minutes(3)));
  CHECK_FALSE(book.finish(twoVictims()));

  ReclaimPlan empty;
  CHECK_FALSE(book.start(empty, kT0, kT0 + std::chrono::minutes(2)));  // nothing to wait for
}

TEST_CASE("reclaim book: the victims' nodes refuse other queues while it is in flight", "[reclaim]") {
  ReclaimBook book;
  CHECK_FALSE(book.refusal("batch", "n1", kT0));
  REQUIRE(book.start(twoVictims(), kT0, kT0 + std::chrono::minutes(2)));
  std::optional<std::string> why = book.refusal("batch", "n1", kT0);
  REQUIRE(why);
  CHECK(*why ==
        "troupe: node n1 is being freed for queue research (reclaim for research/train-0); pods of queue "
        "batch may use it once the reclaim ends");
  CHECK_FALSE(book.refusal("research", "n1", kT0));  // the waiting queue may
  CHECK_FALSE(book.refusal("batch", "n3", kT0));     // other nodes are not held
  CHECK_FALSE(book.refusal("batch", "n1", kT0 + std::chrono::minutes(2)));
}
