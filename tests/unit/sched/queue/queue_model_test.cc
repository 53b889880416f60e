// Model-based randomized test of queue admission through the Scheduler: random queue trees
// with limits and weights, pods arriving (filter, then reserve on a passing node) and leaving
// (release, forgetPod), ticks. After every step: no queue or ancestor holds more than its
// limit; the book's allocation per queue equals what the test saw bound; every queue refusal
// names the pod's queue.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

const std::vector<std::string> kProducts{"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"};

struct BoundPod {
  std::string queue, product;
  int64_t milli = 0;
};

struct Model {
  std::mt19937 rng;
  Clock::time_point t = Clock::time_point{} + std::chrono::hours(1);
  Scheduler s{config()};
  std::vector<std::string> nodes;
  std::map<std::string, std::string> node_product;
  QueueTree tree;
  std::vector<std::string> queue_names;
  std::map<std::string, BoundPod> bound;  // uid -> what the test saw reserved
  std::vector<std::string> pending;       // filtered, never bound
  int next = 0, refusals = 0, binds = 0;

  explicit Model(uint32_t seed) : rng(seed) {}
  SchedulerConfig config() {
    SchedulerConfig c;
    c.clock = [this] { return t; };
    return c;
  }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

  void setUp() {
    const int n = pick(2, 6);
    for (int i = 0; i < n; ++i) {
      const std::string name = "n" + std::to_string(i);
      const std::string& product = kProducts[static_cast<size_t>(pick(0, 1))];
      REQUIRE(s.upsertNode(gpuNode(name, 8, product)).isOk());
      nodes.push_back(name);
      node_product[name] = product;
    }
    std::vector<QueueSpec> specs;
    const int nq = pick(2, 6);
    for (int i = 0; i < nq; ++i) {
      QueueSpec q;
      q.name = "q" + std::to_string(i);
      q.weight = pick(1, 3);
      if (i > 0 && pick(0, 2) == 0) q.parent = "q" + std::to_string(pick(0, i - 1));
      if (pick(0, 1)) q.limit.milli = pick(1, 24) * 500;
      if (pick(0, 2) == 0)
        q.limit.product_milli[kProducts[static_cast<size_t>(pick(0, 1))]] = pick(0, 16) * 500;
      specs.push_back(q);
      queue_names.push_back(q.name);
    }
    tree = QueueTree::build(specs);
    s.setQueues(tree);
  }

  PodFacts newPod() {
    const std::string name = "p" + std::to_string(next++);
    const int kind = pick(0, 9);
    // Mostly valid queues; sometimes none (the default queue) or one that does not exist.
    StringMap annotations;
    if (kind > 0)
      annotations[kQueueKey] =
          kind == 1 ? "missing"
                    : queue_names[static_cast<size_t>(pick(0, static_cast<int>(queue_names.size()) - 1))];
    if (pick(0, 4) == 0) {
      annotations[kAnnotationGpuMilli] = std::to_string(pick(1, 4) * 250);
      return gpuPod(name, 0, annotations);
    }
    return gpuPod(name, pick(1, 4), annotations);
  }

  std::string queueOfPod(const PodFacts& p) const {
    auto it = p.annotations.find(kQueueKey);
    return it == p.annotations.end() ? kDefaultQueueName : it->second;
  }

  void arrive() {
    const PodFacts p = newPod();
    const std::string queue = queueOfPod(p);
    FilterResult r = s.filter(p, nodes);
    const int refused = r.categories.count("queue") ? r.categories.at("queue") : 0;
    int named = 0;
    for (const NodeReasons* reasons : {&r.failed, &r.unresolvable}) {
      for (const auto& [node, reason] : *reasons) {
        if (reason.rfind("troupe: queue", 0) != 0) continue;
        INFO(reason);
        CHECK(reason.find(queue) != std::string::npos);
        ++named;
      }
    }
    CHECK(named == refused);
    refusals += refused;
    if (r.passed.empty() || pick(0, 5) == 0) {
      pending.push_back(p.uid);
      return;
    }
    const std::string node = r.passed[static_cast<size_t>(pick(0, static_cast<int>(r.passed.size()) - 1))];
    Result<model::Allocation> a = s.reserve(p.uid, p.ns, p.name, node);
    INFO(a.status().message());
    REQUIRE(a.isOk());
    const int64_t milli = a.value().milli_per_gpu * static_cast<int64_t>(a.value().gpus.size());
    bound[p.uid] = {queue, node_product[node], milli};
    ++binds;
  }

  void leave() {
    if (bound.empty()) return;
    auto it = bound.begin();
    std::advance(it, pick(0, static_cast<int>(bound.size()) - 1));
    if (pick(0, 1)) {
      CHECK(s.release(it->first));
    } else {
      s.forgetPod(it->first);  // deleted: the book forgets it at once, the GPUs go with release
      CHECK(s.release(it->first));
    }
    bound.erase(it);
  }

  void forgetPending() {
    if (pending.empty()) return;
    const size_t i = static_cast<size_t>(pick(0, static_cast<int>(pending.size()) - 1));
    s.forgetPod(pending[i]);
    pending.erase(pending.begin() + static_cast<long>(i));
  }

  void check() {
    // What the test saw bound, per queue with its ancestors.
    std::map<std::string, std::map<std::string, int64_t>> expect;
    std::map<std::string, int64_t> expect_total;
    for (const auto& [uid, b] : bound) {
      for (const std::string& q : tree.lineage(b.queue)) {
        expect[q][b.product] += b.milli;
        expect_total[q] += b.milli;
      }
    }
    for (const QueueStatus& st : s.queueStatuses()) {
      if (!st.invalid.empty()) continue;
      INFO("queue " << st.spec.name);
      CHECK(st.allocated_milli == expect_total[st.spec.name]);
      for (const std::string& product : kProducts) {
        const int64_t held = st.allocated.count(product) ? st.allocated.at(product) : 0;
        CHECK(held == expect[st.spec.name][product]);
        if (st.spec.limit.product_milli.count(product))
          CHECK(held <= st.spec.limit.product_milli.at(product));
      }
      if (st.spec.limit.milli) CHECK(st.allocated_milli <= *st.spec.limit.milli);
    }
  }
};

}  // namespace

TEST_CASE("queue model: limits hold and accounting matches under random arrivals and departures",
          "[queue][model]") {
  int refusals = 0, binds = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    Model m(seed);
    m.setUp();
    for (int step = 0; step < 150; ++step) {
      INFO("step " << step);
      const int action = m.pick(0, 9);
      if (action < 5) {
        m.arrive();
      } else if (action < 8) {
        m.leave();
      } else if (action < 9) {
        m.forgetPending();
      } else {
        m.t += std::chrono::milliseconds(m.pick(100, 2500));
        m.s.tick();
      }
      m.check();
    }
    refusals += m.refusals;
    binds += m.binds;
  }
  // The runs exercise both sides of admission.
  CHECK(refusals > 100);
  CHECK(binds > 500);
}
