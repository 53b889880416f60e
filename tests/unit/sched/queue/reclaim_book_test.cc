// The reclaim in flight: one at a time, ended by its last victim, its deadline or the adapter;
// meanwhile the victims' nodes refuse pods of other queues.
#include "troupe/sched/queue/reclaim_book.h"

#include <catch2/catch.hpp>
#include <set>

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
  CHECK_FALSE(book.holding(kT0));
  REQUIRE(book.start(twoVictims(), kT0, kT0 + std::chrono::minutes(2)));
  CHECK(book.holding(kT0));
  CHECK_FALSE(book.holding(kT0 + std::chrono::minutes(2)));
  std::optional<std::string> why = book.refusal("batch", "n1", kT0);
  REQUIRE(why);
  CHECK(*why ==
        "troupe: node n1 is being freed for queue research (reclaim for research/train-0); pods of queue "
        "batch may use it once the reclaim ends");
  CHECK_FALSE(book.refusal("research", "n1", kT0));  // the waiting queue may
  CHECK_FALSE(book.refusal("batch", "n3", kT0));     // other nodes are not held
  CHECK_FALSE(book.refusal("batch", "n1", kT0 + std::chrono::minutes(2)));
}

TEST_CASE("reclaim book: a round is held until its victims are gone and its pods bound", "[reclaim]") {
  ReclaimBook book;
  ReclaimPlan plan = twoVictims();
  ReclaimServed a;
  a.key = "research/train-0";
  a.uids = {"w0"};
  a.nodes = {"n1"};
  a.evicts = true;
  ReclaimServed g;
  g.key = "research/gang";
  g.gang = true;
  g.uids = {"w1", "w2"};
  g.nodes = {"n2", "n2"};
  g.evicts = true;
  plan.served = {a, g};
  REQUIRE(book.start(plan, kT0, kT0 + std::chrono::minutes(2)));
  CHECK(book.waitingPods() == std::set<std::string>{"w0", "w1", "w2"});
  book.podGone("u1");
  book.podGone("u2");
  // Victims gone, nothing bound yet: the freed nodes stay with research.
  CHECK(book.inFlight(kT0));
  CHECK(book.refusal("batch", "n1", kT0));
  book.podBound("w0");
  book.podBound("u9");  // not the plan's: nothing changes
  book.podBound("w1");
  CHECK(book.inFlight(kT0));
  CHECK(book.refusal("batch", "n2", kT0));
  book.podGone("w2");  // deleted while waiting: nothing left to wait for
  CHECK_FALSE(book.inFlight(kT0));
  CHECK_FALSE(book.refusal("batch", "n2", kT0));
  CHECK(book.waitingPods().empty());

  // The deadline ends a round whose pods never bind.
  REQUIRE(book.start(plan, kT0, kT0 + std::chrono::minutes(2)));
  book.podGone("u1");
  book.podGone("u2");
  CHECK(book.inFlight(kT0 + std::chrono::seconds(119)));
  CHECK_FALSE(book.inFlight(kT0 + std::chrono::minutes(2)));
}

TEST_CASE("reclaim book: a round is settled once its queue holds what it was for, whichever pods bound",
          "[reclaim]") {
  ReclaimBook book;
  ReclaimPlan plan = twoVictims();
  plan.held_milli = 1000;
  ReclaimServed a;
  a.key = "research/train-0";
  a.milli = 4000;
  a.uids = {"w0"};
  a.nodes = {"n1"};
  ReclaimServed b = a;
  b.key = "research/train-1";
  b.uids = {"w1"};
  plan.served = {a, b};
  REQUIRE(book.start(plan, kT0, kT0 + std::chrono::minutes(2)));
  book.podGone("u1");
  book.podGone("u2");
  book.queueHolds("research", 8000);  // 1 + 8 needed
  book.queueHolds("batch", 20000);    // another queue's holding settles nothing
  CHECK(book.inFlight(kT0));
  // kube-scheduler bound train-7 and train-8 of research rather than train-0 and train-1.
  book.queueHolds("research", 9000);
  CHECK_FALSE(book.inFlight(kT0));
}
