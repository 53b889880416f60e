// Waking pending pods (wake_planner.h, Scheduler::planWakes): the planner on its own (order,
// the room each woken pod takes, gangs whole, the round cap, backoff), checked against a model
// on random inputs; then each trigger through the Scheduler: a raised queue limit, a released
// reclaim hold, a deleted competing gang, and nothing woken while nothing changed.
#include "troupe/sched/scheduler/wake_planner.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

using PClock = WakePlanner::Clock;
const PClock::time_point kT0 = PClock::time_point{} + std::chrono::hours(1);

WakeCandidate cand(const std::string& uid, const std::string& queue, int64_t milli, int64_t priority = 0,
                   uint64_t seq = 0, const std::string& gang = "") {
  return {uid, "default/" + uid, queue, gang, milli, priority, seq};
}

std::vector<std::string> uids(const std::vector<WakeCandidate>& v) {
  std::vector<std::string> out;
  for (const WakeCandidate& c : v) out.push_back(c.uid);
  return out;
}

// A queue with `room` thousandths left: a pod fits when it and those before it fit the room.
WakePlanner::Fits roomPerQueue(std::map<std::string, int64_t> room) {
  return [room](const WakeCandidate& c, int64_t before) {
    auto it = room.find(c.queue);
    return it != room.end() && before + c.milli <= it->second;
  };
}

}  // namespace

TEST_CASE("wake planner: only as many as the room, by priority then age", "[wake]") {
  WakePlanner p;
  std::vector<WakeCandidate> refused;
  for (int i = 0; i < 1000; ++i) refused.push_back(cand("p" + std::to_string(i), "a", 1000, 0, 1000 - i));
  refused.push_back(cand("urgent", "a", 1000, 10, 5000));
  const std::vector<WakeCandidate> woken = p.plan(refused, roomPerQueue({{"a", 4000}}), kT0, 1'000'000);
  // The high-priority pod first, then the three that waited longest (lowest seq).
  CHECK(uids(woken) == std::vector<std::string>{"urgent", "p999", "p998", "p997"});
}

TEST_CASE("wake planner: a woken pod keeps its room until it is filtered again", "[wake]") {
  WakePlanner p;
  std::vector<WakeCandidate> refused;
  for (int i = 0; i < 8; ++i)
    refused.push_back(cand("p" + std::to_string(i), "a", 1000, 0, static_cast<uint64_t>(i)));
  const auto room = roomPerQueue({{"a", 4000}});
  CHECK(uids(p.plan(refused, room, kT0, 100000)) == std::vector<std::string>{"p0", "p1", "p2", "p3"});
  // A second round before kube-scheduler retried them: the room is theirs, nobody else is woken.
  CHECK(p.plan(refused, room, kT0 + std::chrono::seconds(1), 100000).empty());
  // Filtered again and refused again (their records changed): the room is offered again.
  for (int i = 0; i < 4; ++i) refused[static_cast<size_t>(i)].seq += 100;
  CHECK(uids(p.plan(refused, room, kT0 + std::chrono::seconds(2), 100000)) ==
        std::vector<std::string>{"p4", "p5", "p6", "p7"});
}

TEST_CASE("wake planner: the cluster's free GPUs bound the round too", "[wake]") {
  WakePlanner p;
  std::vector<WakeCandidate> refused = {cand("big", "a", 8000, 0, 1), cand("s1", "a", 1000, 0, 2),
                                        cand("s2", "a", 1000, 0, 3), cand("s3", "a", 1000, 0, 4)};
  // 2 GPUs free: the 8-GPU pod is skipped, two small ones behind it are woken.
  CHECK(uids(p.plan(refused, roomPerQueue({{"a", 100000}}), kT0, 2000)) ==
        std::vector<std::string>{"s1", "s2"});
}

TEST_CASE("wake planner: a gang is asked once and woken whole", "[wake]") {
  WakePlanner p;
  int asked = 0;
  auto fits = [&](const WakeCandidate& c, int64_t) {
    ++asked;
    return c.gang == "default/g";
  };
  std::vector<WakeCandidate> refused = {
      cand("g-0", "", 1000, 0, 1, "default/g"), cand("h-0", "", 1000, 0, 2, "default/h"),
      cand("g-1", "", 1000, 0, 3, "default/g"), cand("h-1", "", 1000, 0, 4, "default/h")};
  CHECK(uids(p.plan(refused, fits, kT0, 100000)) == std::vector<std::string>{"g-0", "g-1"});
  CHECK(asked == 2);
}

TEST_CASE("wake planner: backoff per pod, doubling, forgotten once gone", "[wake]") {
  WakeOptions o;
  o.first_backoff = std::chrono::seconds(5);
  o.max_backoff = std::chrono::seconds(12);
  WakePlanner p(o);
  const std::vector<WakeCandidate> refused = {cand("x", "", 1000)};
  auto yes = [](const WakeCandidate&, int64_t) { return true; };
  using std::chrono::seconds;
  CHECK(p.plan(refused, yes, kT0, 8000).size() == 1);
  CHECK(p.plan(refused, yes, kT0 + seconds(4), 8000).empty());  // resting 5 s
  CHECK(p.plan(refused, yes, kT0 + seconds(5), 8000).size() == 1);
  CHECK(p.plan(refused, yes, kT0 + seconds(14), 8000).empty());  // 10 s after the second wake
  CHECK(p.plan(refused, yes, kT0 + seconds(15), 8000).size() == 1);
  CHECK(p.plan(refused, yes, kT0 + seconds(26), 8000).empty());  // capped at 12 s
  CHECK(p.plan(refused, yes, kT0 + seconds(27), 8000).size() == 1);
  CHECK(p.remembered() == 1);
  // Passed a filter (or bound): still remembered for the longest backoff, so a pod bouncing
  // between passing and being refused keeps its backoff; then forgotten.
  CHECK(p.plan({}, yes, kT0 + seconds(28), 8000).empty());
  CHECK(p.remembered() == 1);
  CHECK(p.plan(refused, yes, kT0 + seconds(28), 8000).empty());  // resting until 27 + 12
  CHECK(p.plan({}, yes, kT0 + seconds(39), 8000).empty());
  CHECK(p.remembered() == 0);
  CHECK(p.plan(refused, yes, kT0 + seconds(39), 8000).size() == 1);
}

TEST_CASE("wake planner: the round cap leaves the rest for the next round", "[wake]") {
  WakeOptions o;
  o.max_per_round = 3;
  WakePlanner p(o);
  std::vector<WakeCandidate> refused;
  for (int i = 0; i < 7; ++i)
    refused.push_back(cand("p" + std::to_string(i), "", 1000, 0, static_cast<uint64_t>(i)));
  auto yes = [](const WakeCandidate&, int64_t) { return true; };
  CHECK(uids(p.plan(refused, yes, kT0, 100000)) == std::vector<std::string>{"p0", "p1", "p2"});
  CHECK(uids(p.plan(refused, yes, kT0, 100000)) == std::vector<std::string>{"p3", "p4", "p5"});
  CHECK(uids(p.plan(refused, yes, kT0, 100000)) == std::vector<std::string>{"p6"});
}

TEST_CASE("wake planner: random rounds agree with a greedy model", "[wake]") {
  std::mt19937 rng(20261204);
  for (int round = 0; round < 200; ++round) {
    std::uniform_int_distribution<int> n_pods(0, 60), n_queues(1, 4), milli_pick(0, 3), prio(0, 2);
    const int nq = n_queues(rng);
    std::map<std::string, int64_t> room;
    for (int q = 0; q < nq; ++q)
      room["q" + std::to_string(q)] = std::uniform_int_distribution<int>(0, 12)(rng) * 500;
    const int64_t free_milli = std::uniform_int_distribution<int>(0, 40)(rng) * 500;
    std::vector<WakeCandidate> refused;
    const int64_t sizes[] = {250, 1000, 2000, 4000};
    const int n = n_pods(rng);
    for (int i = 0; i < n; ++i) {
      refused.push_back(cand("p" + std::to_string(i),
                             "q" + std::to_string(std::uniform_int_distribution<int>(0, nq)(rng)),
                             sizes[milli_pick(rng)], prio(rng), static_cast<uint64_t>(rng() % 1000)));
    }
    std::shuffle(refused.begin(), refused.end(), rng);
    WakeOptions o;
    o.max_per_round = std::uniform_int_distribution<size_t>(1, 80)(rng);
    WakePlanner p(o);
    const std::vector<WakeCandidate> woken = p.plan(refused, roomPerQueue(room), kT0, free_milli);

    // The model: kube-scheduler's order, each pod charged against its queue and the cluster.
    std::vector<WakeCandidate> order = refused;
    std::stable_sort(order.begin(), order.end(), [](const WakeCandidate& a, const WakeCandidate& b) {
      return a.priority != b.priority ? a.priority > b.priority : a.seq < b.seq;
    });
    std::map<std::string, int64_t> taken;
    int64_t left = free_milli;
    std::multiset<std::string> want;
    for (const WakeCandidate& c : order) {
      if (want.size() >= o.max_per_round) break;
      auto it = room.find(c.queue);
      if (c.milli > left || it == room.end() || taken[c.queue] + c.milli > it->second) continue;
      taken[c.queue] += c.milli;
      left -= c.milli;
      want.insert(c.uid);
    }
    const std::vector<std::string> got_list = uids(woken);
    INFO("round " << round);
    CHECK(std::multiset<std::string>(got_list.begin(), got_list.end()) == want);
    // Whatever the order, never more than a queue's room or the free GPUs.
    std::map<std::string, int64_t> sum;
    int64_t total = 0;
    for (const WakeCandidate& c : woken) {
      sum[c.queue] += c.milli;
      total += c.milli;
    }
    for (const auto& [q, m] : sum) CHECK(m <= room[q]);
    CHECK(total <= free_milli);
  }
}

// ---- triggers through the Scheduler ----------------------------------------------------------

namespace {

const std::string kH100 = "NVIDIA-H100-80GB-HBM3";

QueueSpec limited(const std::string& name, int64_t limit_milli) {
  QueueSpec q;
  q.name = name;
  if (limit_milli > 0) q.limit.milli = limit_milli;
  return q;
}

struct Cluster {
  Clock::time_point t = Clock::time_point{} + std::chrono::hours(1);
  std::unique_ptr<Scheduler> s;
  std::vector<std::string> nodes;
  explicit Cluster(int n_nodes = 3) {
    SchedulerConfig c;
    c.clock = [this] { return t; };
    s = std::make_unique<Scheduler>(c);
    for (int i = 0; i < n_nodes; ++i) {
      nodes.push_back("h" + std::to_string(i));
      REQUIRE(s->upsertNode(gpuNode(nodes.back(), 8, kH100)).isOk());
    }
  }
  // Filters the pod; binds it on the first passing node if any. Whether it was bound.
  bool offer(const PodFacts& p) {
    FilterResult r = s->filter(p, nodes);
    if (r.passed.empty()) return false;
    REQUIRE(s->reserve(p.uid, p.ns, p.name, r.passed.front()).isOk());
    return true;
  }
};

}  // namespace

TEST_CASE("wake trigger: a raised queue limit wakes as many pods as it lets in", "[wake][scheduler]") {
  Cluster c(200);  // 1,600 GPUs: the queue's limit, not the cluster, holds the pods back
  c.s->setQueues(QueueTree::build({limited("team", 4000)}));
  int bound = 0;
  std::vector<PodFacts> pods;
  for (int i = 0; i < 1000; ++i) {
    pods.push_back(gpuPod("p" + std::to_string(i), 1, {{kQueueKey, "team"}}));
    bound += c.offer(pods.back()) ? 1 : 0;
  }
  CHECK(bound == 4);
  WakePlanner planner;
  CHECK(c.s->planWakes(planner).empty());  // nothing changed: nothing to wake

  c.s->setQueues(QueueTree::build({limited("team", 8000)}));
  const std::vector<WakeCandidate> woken = c.s->planWakes(planner);
  // The four that waited longest (filtered first), no more.
  CHECK(uids(woken) == std::vector<std::string>{"uid-p4", "uid-p5", "uid-p6", "uid-p7"});
  CHECK(woken.front().key == "default/p4");
  CHECK(woken.front().queue == "team");
  CHECK(c.s->planWakes(planner).empty());  // woken, not yet retried: nobody else takes their room
  // kube-scheduler retries them: each passes and binds; the rest stay refused and unwoken.
  for (int i = 4; i < 8; ++i) CHECK(c.offer(pods[static_cast<size_t>(i)]));
  CHECK(c.s->planWakes(planner).empty());
  // No limit at all: the round cap (200) bounds a round; the next round takes the next 200.
  c.s->setQueues(QueueTree::build({limited("team", 0)}));
  CHECK(c.s->planWakes(planner).size() == 200);
}

TEST_CASE("wake trigger: a released reclaim hold wakes the pods it kept out", "[wake][scheduler]") {
  Cluster c(2);
  c.t += std::chrono::minutes(1);
  QueueSpec research = limited("research", 0);
  research.guaranteed.milli = 8000;
  c.s->setQueues(QueueTree::build({limited("batch", 0), research}));
  std::vector<PodFacts> batch;
  for (int i = 0; i < 4; ++i) {
    batch.push_back(gpuPod("b" + std::to_string(i), 4, {{kQueueKey, "batch"}}));
    REQUIRE(c.offer(batch.back()));
  }
  c.t += std::chrono::minutes(10);
  PodFacts big = gpuPod("big", 8, {{kQueueKey, "research"}});
  REQUIRE_FALSE(c.offer(big));
  c.t += std::chrono::seconds(2);
  c.s->tick();
  std::optional<ReclaimPlan> plan = c.s->planReclaim();
  REQUIRE(plan);
  REQUIRE(plan->victims.size() == 2);
  // One victim is gone: 4 GPUs free, but held for research; a batch pod is refused.
  REQUIRE(c.s->release(plan->victims[0].uid));
  c.s->forgetPod(plan->victims[0].uid);
  PodFacts late = gpuPod("late", 4, {{kQueueKey, "batch"}});
  REQUIRE_FALSE(c.offer(late));
  WakePlanner planner;
  CHECK(c.s->planWakes(planner).empty());
  // The other victim's eviction is refused: the plan, and its hold, end.
  c.s->reclaimFinished(*plan, false, "a PodDisruptionBudget refused the eviction");
  CHECK(uids(c.s->planWakes(planner)) == std::vector<std::string>{"uid-late"});
}

TEST_CASE("wake trigger: a deleted competing gang wakes the gang it kept out", "[wake][scheduler]") {
  Cluster c(2);  // 16 GPUs
  auto member = [](const std::string& gang, int i, int gpus, int size) {
    return gpuPod(gang + "-" + std::to_string(i), gpus,
                  {{kGangName, gang}, {kGangSize, std::to_string(size)}});
  };
  // Gang a (2 x 8) is planned on both nodes; gang b (2 x 4) finds no room.
  FilterResult ra = c.s->filter(member("a", 0, 8, 2), c.nodes);
  REQUIRE(ra.passed.size() == 1);
  for (int i = 0; i < 2; ++i) CHECK(c.s->filter(member("b", i, 4, 2), c.nodes).passed.empty());
  WakePlanner planner;
  CHECK(c.s->planWakes(planner).empty());
  // a's only member is deleted: the gang ends and its plan's GPUs are free.
  c.s->forgetPod(member("a", 0, 8, 2).uid);
  CHECK(uids(c.s->planWakes(planner)) == std::vector<std::string>{"uid-b-0", "uid-b-1"});
}

TEST_CASE("wake trigger: a pod that holds its GPUs or is gone is not woken", "[wake][scheduler]") {
  Cluster c(1);
  c.s->setQueues(QueueTree::build({limited("team", 1000)}));
  const PodFacts first = gpuPod("first", 1, {{kQueueKey, "team"}});
  REQUIRE(c.offer(first));
  const PodFacts second = gpuPod("second", 1, {{kQueueKey, "team"}});
  const PodFacts third = gpuPod("third", 1, {{kQueueKey, "team"}});
  REQUIRE_FALSE(c.offer(second));
  REQUIRE_FALSE(c.offer(third));
  c.s->forgetPod(second.uid);  // deleted while it waited
  c.s->setQueues(QueueTree::build({limited("team", 8000)}));
  WakePlanner planner;
  CHECK(uids(c.s->planWakes(planner)) == std::vector<std::string>{"uid-third"});
}
