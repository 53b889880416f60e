// QueueBook: accounting, limit admission (queue and ancestors, in all and per product), the
// fair-share hold-back and the statuses with their explanation.
#include "troupe/sched/queue/queue_book.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

using namespace troupe::sched;

QueueSpec queue(const std::string& name, double weight = 1, const std::string& parent = "") {
  QueueSpec q;
  q.name = name;
  q.weight = weight;
  q.parent = parent;
  return q;
}

QueuedPod pod(const std::string& uid, const std::string& queue, int64_t milli, const std::string& node = "",
              const std::string& product = "") {
  QueuedPod p;
  p.uid = uid;
  p.key = "ns/" + uid;
  p.queue = queue;
  p.milli = milli;
  p.node = node;
  p.product = product;
  return p;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const QueueStatus& statusOf(const std::vector<QueueStatus>& all, const std::string& name) {
  for (const QueueStatus& s : all) {
    if (s.spec.name == name) return s;
  }
  FAIL("no status for " << name);
  return all.front();
}

const std::function<bool(const QueuedPod&)> kAllFit = [](const QueuedPod&) { return true; };
const std::function<bool(const QueuedPod&)> kNoneFit = [](const QueuedPod&) { return false; };

}  // namespace

TEST_CASE("QueueBook: without queues every pod is admitted", "[queue][book]") {
  QueueBook book;
  CHECK_FALSE(book.enabled());
  book.upsertPod(pod("p", "default", 1000, "n", "H100"));
  CHECK_FALSE(book.admit("default", 1000000, "H100"));
  book.setQueues(QueueTree::build({queue("a")}));
  CHECK(book.enabled());
  book.setQueues(QueueTree{});
  CHECK_FALSE(book.enabled());
}

TEST_CASE("QueueBook: accounting follows upserts and removals", "[queue][book]") {
  QueueBook book;
  QueueSpec a = queue("a");
  a.limit.milli = 4000;
  book.setQueues(QueueTree::build({a}));
  book.upsertPod(pod("p1", "a", 2000));  // pending: holds nothing yet
  CHECK_FALSE(book.admit("a", 4000, "H100"));
  book.upsertPod(pod("p1", "a", 2000, "n1", "H100"));  // bound
  CHECK(book.admit("a", 3000, "H100"));
  CHECK_FALSE(book.admit("a", 2000, "H100"));
  book.upsertPod(pod("p1", "a", 0, "n1", "H100"));  // holds and asks nothing: removed
  CHECK_FALSE(book.pod("p1"));
  CHECK_FALSE(book.admit("a", 4000, "H100"));
  book.upsertPod(pod("p2", "a", 4000, "n1", "H100"));
  REQUIRE(book.pod("p2"));
  CHECK(book.pods().size() == 1);
  book.removePod("p2");
  CHECK(book.pods().empty());
  CHECK_FALSE(book.admit("a", 4000, "H100"));
}

TEST_CASE("QueueBook: the limit of the queue and of every ancestor, in all and per product",
          "[queue][book]") {
  QueueSpec org = queue("org");
  org.limit.product_milli["H100"] = 4000;
  QueueSpec x = queue("x", 1, "org");
  x.limit.milli = 6000;
  QueueBook book;
  book.setQueues(QueueTree::build({org, x, queue("y", 1, "org")}));
  book.upsertPod(pod("p1", "x", 2500, "n1", "H100"));
  book.upsertPod(pod("p2", "y", 1500, "n2", "H100"));
  // org holds 4 H100 (x 2.5, y 1.5): no more H100 for either child.
  std::optional<std::string> r = book.admit("x", 1000, "H100");
  REQUIRE(r);
  CHECK(r->rfind("troupe: queue x: its parent queue org is at its limit of 4 H100 GPUs", 0) == 0);
  CHECK(contains(*r, "it holds 4 and this pod needs 1 more"));
  CHECK(book.admit("y", 500, "H100"));
  // Other products are free of org's limit, but x's limit in all still counts.
  CHECK_FALSE(book.admit("x", 3500, "A100"));
  r = book.admit("x", 4000, "A100");
  REQUIRE(r);
  CHECK(*r == "troupe: queue x is at its limit: it holds 2.5 of 6 GPUs and this pod needs 4 more");
  CHECK_FALSE(book.admit("y", 8000, "A100"));
}

TEST_CASE("QueueBook: a gang's held GPUs are not counted twice", "[queue][book]") {
  QueueSpec a = queue("a");
  a.limit.milli = 8000;
  QueueBook book;
  book.setQueues(QueueTree::build({a}));
  QueuedPod m1 = pod("m1", "a", 2000, "n1", "H100");
  m1.gang = "ns/g";
  book.upsertPod(m1);
  book.upsertPod(pod("solo", "a", 2000, "n2", "H100"));
  // The gang of 4 x 2 GPUs: one member holds 2 already, so it needs 6 more: 4 + 6 > 8.
  std::optional<std::string> r = book.admit("a", 8000, "H100", "ns/g");
  REQUIRE(r);
  CHECK(contains(*r, "gang ns/g needs 6 more"));
  book.removePod("solo");
  CHECK_FALSE(book.admit("a", 8000, "H100", "ns/g"));
}

TEST_CASE("QueueBook: beyond its fair share a queue waits while another has pods that fit", "[queue][book]") {
  QueueBook book;
  book.setQueues(QueueTree::build({queue("a"), queue("b")}));
  const ProductMilli cap{{"H100", 8000}, {"A100", 8000}};
  book.upsertPod(pod("a1", "a", 6000, "n1", "H100"));
  book.upsertPod(pod("a2", "a", 2000));  // pending
  QueuedPod b1 = pod("b1", "b", 4000);
  b1.models = {"h100"};  // accepts only H100 (any case)
  book.upsertPod(b1);
  SECTION("someone waiting: the queue above its share is held back on that product only") {
    book.refresh(cap, kAllFit);
    const auto st = book.statuses();
    // a asks 8 (6 held + 2 spread over both products), b 4 H100: on H100 both rise at the same
    // pace (b at weight x 4000 / 0.5) until b is satisfied.
    CHECK(statusOf(st, "b").fair_share.share.at("H100") == 4000);
    std::optional<std::string> r = book.admit("a", 1000, "H100");
    REQUIRE(r);
    INFO(*r);
    // a's share: 4 of the contested H100 and the 1 A100 it asks for; with the pod it holds 7.
    CHECK(statusOf(book.statuses(), "a").fair_share.total_milli == 5000);
    CHECK(r->rfind(
              "troupe: queue a is above its fair share: with this pod it would hold 7 GPUs, its fair share "
              "is 5 GPUs",
              0) == 0);
    CHECK(contains(*r, "queue b holds 0 of its fair share of 4 GPUs and has pending pods that fit"));
    CHECK_FALSE(book.admit("a", 1000, "A100"));  // nobody waits for A100
    CHECK_FALSE(book.admit("b", 4000, "H100"));
    // Once b holds its share it no longer waits (even before the next refresh).
    book.upsertPod(pod("b1", "b", 4000, "n2", "H100"));
    CHECK_FALSE(book.admit("a", 1000, "H100"));
  }
  SECTION("nobody's pending pods fit: the spare GPUs are used (work conserving)") {
    book.refresh(cap, kNoneFit);
    CHECK_FALSE(book.admit("a", 1000, "H100"));
    const auto st = book.statuses();
    CHECK_FALSE(statusOf(st, "b").pending_fits);
  }
  SECTION("before the first refresh there are no fair shares and nobody is held back") {
    CHECK_FALSE(book.admit("a", 1000, "H100"));
  }
}

TEST_CASE("QueueBook: refresh asks once per shape, in priority then arrival order", "[queue][book]") {
  QueueBook book;
  book.setQueues(QueueTree::build({queue("a")}));
  for (int i = 0; i < 50; ++i) {
    QueuedPod p = pod("p" + std::to_string(i), "a", 1000);
    p.since = QueueClock::time_point{} + std::chrono::seconds(i);
    book.upsertPod(p);
  }
  QueuedPod urgent = pod("urgent", "a", 2000);
  urgent.priority = 10;
  urgent.since = QueueClock::time_point{} + std::chrono::seconds(100);
  book.upsertPod(urgent);
  std::vector<std::string> asked;
  book.refresh({{"H100", 8000}}, [&](const QueuedPod& p) {
    asked.push_back(p.uid);
    return false;
  });
  CHECK(asked == std::vector<std::string>{"urgent", "p0"});
  asked.clear();
  book.refresh({{"H100", 8000}}, [&](const QueuedPod& p) {
    asked.push_back(p.uid);
    return p.milli == 2000;
  });
  CHECK(asked == std::vector<std::string>{"urgent"});
  CHECK(book.statuses().at(0).pending_fits);
}

TEST_CASE("QueueBook: statuses explain the numbers", "[queue][book]") {
  QueueSpec a = queue("a", 2);
  a.limit.milli = 20000;
  QueueBook book;
  book.setQueues(QueueTree::build({a, queue("b", 1), queue("c", 1), queue("broken", 0)}));
  const ProductMilli cap{{"H100", 32000}};
  for (int i = 0; i < 6; ++i) book.upsertPod(pod("a-run" + std::to_string(i), "a", 2000, "n", "H100"));
  book.upsertPod(pod("a-p1", "a", 4000));
  book.upsertPod(pod("a-p2", "a", 2000));
  book.upsertPod(pod("a-p3", "a", 2000));
  book.upsertPod(pod("b-p", "b", 32000));
  book.upsertPod(pod("c-p", "c", 32000));
  book.refresh(cap, kAllFit);
  book.countEviction("b", "reclaim");
  const auto st = book.statuses();
  REQUIRE(st.size() == 5);  // sorted by name, the invalid one and the implicit default too
  CHECK(st[0].spec.name == "a");
  CHECK(st[1].spec.name == "b");
  CHECK(st[2].spec.name == "broken");
  const QueueStatus& sa = statusOf(st, "a");
  CHECK(sa.allocated_milli == 12000);
  CHECK(sa.running_pods == 6);
  CHECK(sa.pending_pods == 3);
  CHECK(sa.pending_milli == 8000);
  CHECK(sa.fair_share.total_milli == 16000);
  CHECK_FALSE(sa.above_fair_share);
  CHECK(sa.dominant_share == Approx(12.0 / 32));
  CHECK(sa.explanation ==
        "fair share 16 GPUs: weight 2 of 4 among 3 queues with demand on 32 contested H100 GPUs; limit 20 "
        "GPUs; "
        "holds 12; 3 pods pending (8 GPUs)");
  CHECK(statusOf(st, "b").evictions.at("reclaim") == 1);
  CHECK(statusOf(st, "default").explanation ==
        "fair share 0 GPUs: no demand; holds 0; 0 pods pending (0 GPUs)");
  const QueueStatus& broken = statusOf(st, "broken");
  CHECK(contains(broken.invalid, "weight 0"));
  CHECK(contains(broken.explanation, "not used"));
}

TEST_CASE("QueueBook: below its guarantee and children in the parent's numbers", "[queue][book]") {
  QueueSpec org = queue("org");
  org.guaranteed.milli = 8000;
  QueueSpec x = queue("x", 1, "org");
  x.guaranteed.milli = 4000;
  QueueBook book;
  book.setQueues(QueueTree::build({org, x, queue("y", 1, "org")}));
  book.upsertPod(pod("x1", "x", 1000, "n", "H100"));
  book.upsertPod(pod("x2", "x", 2000));
  book.upsertPod(pod("y1", "y", 3000, "n", "H100"));
  book.refresh({{"H100", 16000}}, kAllFit);
  const auto st = book.statuses();
  CHECK(statusOf(st, "x").below_guaranteed);
  CHECK_FALSE(statusOf(st, "y").below_guaranteed);
  CHECK(statusOf(st, "org").allocated_milli == 4000);
  CHECK(statusOf(st, "org").running_pods == 2);
  CHECK(statusOf(st, "org").pending_pods == 1);
  CHECK(statusOf(st, "org").below_guaranteed);
  CHECK(contains(statusOf(st, "x").explanation, "among 2 queues with demand on 6 contested H100 GPUs"));
  CHECK(contains(statusOf(st, "x").explanation, "4 guaranteed"));
}

TEST_CASE("QueueBook: two queues below their shares never hold each other back", "[queue][book]") {
  // 8 GPUs, shares 4 and 4; each queue holds 3 and its next pod asks for 2. Neither pod keeps
  // its queue within its share, so neither queue may hold the other back: both would wait for
  // ever with 2 GPUs idle.
  QueueBook book;
  book.setQueues(QueueTree::build({queue("a"), queue("b")}));
  book.upsertPod(pod("a1", "a", 3000, "n1", "H100"));
  book.upsertPod(pod("b1", "b", 3000, "n1", "H100"));
  book.upsertPod(pod("a2", "a", 2000));
  book.upsertPod(pod("b2", "b", 2000));
  book.refresh({{"H100", 8000}}, kAllFit);
  CHECK_FALSE(book.admit("a", 2000, "H100"));
  CHECK_FALSE(book.admit("b", 2000, "H100"));
  // A pod that keeps its queue within its share does hold the other queue back.
  book.upsertPod(pod("b2", "b", 1000));
  book.refresh({{"H100", 8000}}, kAllFit);
  const std::optional<std::string> held = book.admit("a", 2000, "H100");
  REQUIRE(held);
  CHECK(contains(*held, "queue b"));
  CHECK_FALSE(book.admit("b", 1000, "H100"));
}
