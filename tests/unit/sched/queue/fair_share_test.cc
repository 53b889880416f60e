// computeFairShares: hand-checked cases for each rule of fair_share.h, then a randomized
// property test over thousands of random trees, capacities and demands.
#include "troupe/sched/queue/fair_share.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
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

QueueDemand pending(const ProductMilli& p) { return QueueDemand{{}, p}; }

int64_t at(const ProductMilli& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

TEST_CASE("fair share: a demand beyond the fleet's product does not shrink a queue's share",
          "[queue][fairshare]") {
  // Both queues want more H100 than there is; a also wants 4 L4 of the 2 there are. Without the
  // cap, a's L4 demand (twice the L4 fleet) would be its dominant share and slow its H100 growth
  // to 15/39 of the H100; capped, both split the H100 evenly.
  const ProductMilli cap{{"H100", 24000}, {"L4", 2000}};
  auto f =
      computeFairShares(QueueTree::build({queue("a"), queue("b")}), cap,
                        {{"a", pending({{"H100", 30000}, {"L4", 4000}})}, {"b", pending({{"H100", 30000}})}});
  CHECK(at(f["a"].share, "H100") == 12000);
  CHECK(at(f["b"].share, "H100") == 12000);
  CHECK(at(f["a"].share, "L4") == 2000);
}

TEST_CASE("fair share: two queues 1:1 and 1:2 on one product", "[queue][fairshare]") {
  const ProductMilli cap{{"H100", 8000}};
  SECTION("1:1 halves the product") {
    auto f = computeFairShares(QueueTree::build({queue("a"), queue("b")}), cap,
                               {{"a", pending({{"H100", 8000}})}, {"b", pending({{"H100", 8000}})}});
    CHECK(f["a"].share == ProductMilli{{"H100", 4000}});
    CHECK(f["b"].share == ProductMilli{{"H100", 4000}});
    CHECK(f["a"].total_milli == 4000);
    CHECK(f["a"].dominant == Approx(0.5));
    CHECK(f["default"].total_milli == 0);  // the implicit default queue demands nothing
  }
  SECTION("1:2 gives thirds, rounded by largest remainder") {
    auto f = computeFairShares(QueueTree::build({queue("a", 1), queue("b", 2)}), cap,
                               {{"a", pending({{"H100", 8000}})}, {"b", pending({{"H100", 8000}})}});
    // 2666.67 and 5333.33: floors 2666 + 5333, the milli left goes to the larger remainder.
    CHECK(f["a"].total_milli == 2667);
    CHECK(f["b"].total_milli == 5333);
  }
  SECTION("held GPUs count as demand like pending ones") {
    QueueDemand a{{{"H100", 6000}}, {{"H100", 2000}}};
    auto f = computeFairShares(QueueTree::build({queue("a"), queue("b")}), cap,
                               {{"a", a}, {"b", pending({{"H100", 8000}})}});
    CHECK(f["a"].total_milli == 4000);
    CHECK(f["b"].total_milli == 4000);
  }
}

TEST_CASE("fair share: a guarantee is given first, the rest by weight", "[queue][fairshare]") {
  QueueSpec a = queue("a", 1);
  a.guaranteed.milli = 6000;
  const auto f = computeFairShares(QueueTree::build({a, queue("b", 3)}), {{"H100", 8000}},
                                   {{"a", pending({{"H100", 8000}})}, {"b", pending({{"H100", 8000}})}});
  // 2000 left after a's 6000: a rises at 1 x 8000, b at 3 x 8000 per unit of level: 500 and 1500.
  CHECK(f.at("a").total_milli == 6500);
  CHECK(f.at("b").total_milli == 1500);
}

TEST_CASE("fair share: a guarantee is capped by demand", "[queue][fairshare]") {
  QueueSpec a = queue("a");
  a.guaranteed.milli = 6000;
  const auto f = computeFairShares(QueueTree::build({a, queue("b")}), {{"H100", 8000}},
                                   {{"a", pending({{"H100", 1000}})}, {"b", pending({{"H100", 8000}})}});
  CHECK(f.at("a").total_milli == 1000);
  CHECK(f.at("b").total_milli == 7000);
}

TEST_CASE("fair share: a queue demanding less than its share leaves the rest to others",
          "[queue][fairshare]") {
  const auto f = computeFairShares(QueueTree::build({queue("a"), queue("b"), queue("c")}), {{"H100", 12000}},
                                   {{"a", pending({{"H100", 1000}})},
                                    {"b", pending({{"H100", 20000}})},
                                    {"c", pending({{"H100", 20000}})}});
  CHECK(f.at("a").total_milli == 1000);
  CHECK(f.at("b").total_milli == 5500);
  CHECK(f.at("c").total_milli == 5500);
}

TEST_CASE("fair share: a limit caps the demand", "[queue][fairshare]") {
  QueueSpec a = queue("a");
  a.limit.milli = 3000;
  QueueSpec b = queue("b");
  b.limit.product_milli["H100"] = 2000;
  const auto f = computeFairShares(
      QueueTree::build({a, b, queue("c")}), {{"H100", 8000}},
      {{"a", pending({{"H100", 8000}})}, {"b", pending({{"H100", 8000}})}, {"c", pending({{"H100", 8000}})}});
  CHECK(f.at("a").total_milli == 3000);
  CHECK(f.at("b").total_milli == 2000);
  CHECK(f.at("c").total_milli == 3000);
}

TEST_CASE("fair share: two products, one queue wants only the scarce one", "[queue][fairshare]") {
  const ProductMilli cap{{"H100", 8000}, {"A100", 16000}};
  // a: 8 H100 only (dominant demand 1); b: 8 H100 and 16 A100 (dominant demand 1). H100 is
  // split evenly (both grow at weight x demand / dominant demand = 8000 per unit of level);
  // nobody else wants A100, so b keeps growing there after H100 ran out.
  const auto f = computeFairShares(
      QueueTree::build({queue("a"), queue("b")}), cap,
      {{"a", pending({{"H100", 8000}})}, {"b", pending({{"H100", 8000}, {"A100", 16000}})}});
  CHECK(f.at("a").share == ProductMilli{{"H100", 4000}});
  CHECK(f.at("b").share == (ProductMilli{{"H100", 4000}, {"A100", 16000}}));
  CHECK(f.at("a").dominant == Approx(0.5));
  CHECK(f.at("b").dominant == Approx(1.0));
  CHECK(dominantShare({{"H100", 2000}, {"A100", 2000}}, cap) == Approx(0.25));
  CHECK(dominantShare({}, cap) == 0);
}

TEST_CASE("fair share: products without capacity are ignored", "[queue][fairshare]") {
  const auto f = computeFairShares(QueueTree::build({queue("a")}), {{"H100", 8000}, {"V100", 0}},
                                   {{"a", pending({{"H100", 2000}, {"V100", 4000}, {"L4", 1000}})}});
  CHECK(f.at("a").share == ProductMilli{{"H100", 2000}});
}

TEST_CASE("fair share: a parent's share is split among its children by weight", "[queue][fairshare]") {
  const QueueTree tree =
      QueueTree::build({queue("org", 2), queue("x", 1, "org"), queue("y", 3, "org"), queue("other", 2)});
  const ProductMilli d{{"H100", 16000}};
  const auto f = computeFairShares(tree, {{"H100", 16000}},
                                   {{"x", pending(d)}, {"y", pending(d)}, {"other", pending(d)}});
  CHECK(f.at("org").total_milli == 8000);
  CHECK(f.at("other").total_milli == 8000);
  CHECK(f.at("x").total_milli == 2000);
  CHECK(f.at("y").total_milli == 6000);
  SECTION("a parent's own pods take part as one more child of weight 1") {
    const auto g =
        computeFairShares(tree, {{"H100", 16000}},
                          {{"x", pending(d)}, {"y", pending(d)}, {"org", pending(d)}, {"other", pending(d)}});
    CHECK(g.at("org").total_milli == 8000);
    CHECK(g.at("x").total_milli == 1600);
    CHECK(g.at("y").total_milli == 4800);
  }
}

TEST_CASE("fair share: a child's guarantee holds through a parent without one", "[queue][fairshare]") {
  QueueSpec x = queue("x", 1, "org");
  x.guaranteed.milli = 6000;
  const QueueTree tree = QueueTree::build({queue("org"), x, queue("y", 1, "org"), queue("other", 10)});
  const ProductMilli d{{"H100", 16000}};
  const auto f = computeFairShares(tree, {{"H100", 16000}},
                                   {{"x", pending(d)}, {"y", pending(d)}, {"other", pending(d)}});
  CHECK(f.at("x").total_milli >= 6000);
  CHECK(f.at("org").total_milli >= 6000);
}

namespace {

struct RandomCase {
  std::vector<QueueSpec> specs;
  ProductMilli capacity;
  std::map<std::string, QueueDemand> demand;
};

RandomCase randomCase(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<std::string> products{"A100", "H100", "L40S"};
  RandomCase c;
  const int nproducts = pick(1, 3);
  for (int p = 0; p < nproducts; ++p) c.capacity[products[p]] = pick(0, 6) == 0 ? 0 : pick(1, 64) * 500;
  // Demand shapes come from a few base vectors, so siblings often share one.
  std::vector<ProductMilli> shapes;
  for (int s = 0; s < 3; ++s) {
    ProductMilli shape;
    for (int p = 0; p < nproducts; ++p) {
      if (pick(0, 2) > 0) shape[products[p]] = pick(1, 4) * 1000;
    }
    shapes.push_back(shape);
  }
  const int nqueues = pick(1, 8);
  const bool guarantees = pick(0, 1) == 1;
  const bool limits = pick(0, 2) == 0;
  for (int i = 0; i < nqueues; ++i) {
    QueueSpec q = queue("q" + std::to_string(i), pick(1, 4));
    if (i > 0 && pick(0, 2) == 0) q.parent = "q" + std::to_string(pick(0, i - 1));
    if (guarantees && pick(0, 2) == 0) q.guaranteed.milli = pick(0, 8) * 500;
    if (guarantees && pick(0, 3) == 0)
      q.guaranteed.product_milli[products[pick(0, nproducts - 1)]] = pick(0, 4) * 500;
    if (limits && pick(0, 2) == 0) q.limit.milli = pick(0, 30) * 1000;
    if (limits && pick(0, 3) == 0)
      q.limit.product_milli[products[pick(0, nproducts - 1)]] = pick(0, 20) * 1000;
    c.specs.push_back(q);
    if (pick(0, 4) > 0) {
      const ProductMilli& shape = shapes[pick(0, 2)];
      const int k = pick(1, 6);
      QueueDemand d;
      for (const auto& [product, milli] : shape) {
        const int64_t amount = milli * k + (pick(0, 3) == 0 ? pick(1, 999) : 0);
        const int64_t held = pick(0, 1) ? amount / pick(1, 4) : 0;
        if (held > 0) d.allocated[product] = held;
        if (amount - held > 0) d.pending[product] = amount - held;
      }
      c.demand[q.name] = d;
    }
  }
  return c;
}

}  // namespace

TEST_CASE("fair share: properties over random trees, capacities and demands", "[queue][fairshare]") {
  int checked_guarantees = 0, checked_weights = 0, checked_idle = 0;
  for (uint32_t seed = 1; seed <= 3000; ++seed) {
    std::mt19937 rng(seed);
    const RandomCase c = randomCase(rng);
    const QueueTree tree = QueueTree::build(c.specs);
    const auto f = computeFairShares(tree, c.capacity, c.demand);
    INFO("seed " << seed);

    ProductMilli usable;
    for (const auto& [p, m] : c.capacity) {
      if (m > 0) usable[p] = m;
    }
    // Each queue's demand with its subtree, over usable products, uncapped.
    std::map<std::string, ProductMilli> demand;
    std::map<std::string, bool> limited;     // a limit below the demand in the queue or below it
    std::map<std::string, bool> guaranteed;  // some guarantee in the queue or below it
    const auto& queues = tree.queues();
    for (auto q = queues.rbegin(); q != queues.rend(); ++q) {
      ProductMilli& d = demand[q->name];
      if (auto it = c.demand.find(q->name); it != c.demand.end()) {
        for (const auto* part : {&it->second.allocated, &it->second.pending}) {
          for (const auto& [p, m] : *part) {
            if (usable.count(p)) d[p] += m;
          }
        }
      }
      guaranteed[q->name] = guaranteed[q->name] || !q->guaranteed.empty();
      for (const std::string& child : tree.children(q->name)) {
        for (const auto& [p, m] : demand[child]) d[p] += m;
        limited[q->name] = limited[q->name] || limited[child];
        guaranteed[q->name] = guaranteed[q->name] || guaranteed[child];
      }
      int64_t total = 0;
      for (const auto& [p, m] : d) {
        total += m;
        if (at(q->limit.product_milli, p) < m && q->limit.product_milli.count(p)) limited[q->name] = true;
      }
      if (q->limit.milli && *q->limit.milli < total) limited[q->name] = true;
    }

    // A limit that cuts the demand of the queue, one below it or one above it.
    auto limitBinds = [&](const std::string& name) {
      const auto line = tree.lineage(name);
      return std::any_of(line.begin(), line.end(), [&](const std::string& up) { return limited[up]; });
    };

    REQUIRE(f.size() == queues.size());
    // Capacity: the top-level shares fit each product; children's fit their parent's.
    for (const auto& [p, cap] : usable) {
      int64_t top = 0;
      for (const std::string& name : tree.children("")) top += at(f.at(name).share, p);
      CHECK(top <= cap);
    }
    for (const QueueSpec& q : queues) {
      const FairShare& s = f.at(q.name);
      for (const auto& [p, m] : s.share) {
        CHECK(usable.count(p) == 1);
        CHECK(m > 0);
        CHECK(m <= at(demand[q.name], p));  // never more than the demand
        if (q.limit.product_milli.count(p)) CHECK(m <= q.limit.product_milli.at(p));
      }
      if (q.limit.milli) CHECK(s.total_milli <= *q.limit.milli);
      int64_t sum = 0;
      for (const auto& [p, m] : s.share) sum += m;
      CHECK(s.total_milli == sum);
      CHECK(s.dominant == Approx(dominantShare(s.share, usable)));
      for (const auto& [p, m] : s.share) {
        int64_t kids = 0;
        for (const std::string& child : tree.children(q.name)) kids += at(f.at(child).share, p);
        CHECK(kids <= m);
      }
    }
    // Guarantees: when all of them together fit the smallest product, each queue gets at least
    // min(guaranteed, demand) (where no limit cuts the demand).
    int64_t all_guarantees = 0;
    for (const QueueSpec& q : queues) {
      all_guarantees += q.guaranteed.milli.value_or(0);
      for (const auto& [p, m] : q.guaranteed.product_milli) all_guarantees += m;
    }
    int64_t smallest = std::numeric_limits<int64_t>::max();
    for (const auto& [p, m] : usable) smallest = std::min(smallest, m);
    if (!usable.empty() && all_guarantees <= smallest) {
      for (const QueueSpec& q : queues) {
        if (limitBinds(q.name)) continue;
        const FairShare& s = f.at(q.name);
        int64_t total_demand = 0;
        for (const auto& [p, m] : demand[q.name]) total_demand += m;
        if (q.guaranteed.milli) {
          CHECK(s.total_milli >= std::min(*q.guaranteed.milli, total_demand));
          ++checked_guarantees;
        }
        for (const auto& [p, m] : q.guaranteed.product_milli) {
          CHECK(at(s.share, p) >= std::min(m, at(demand[q.name], p)));
          ++checked_guarantees;
        }
      }
    }
    // Work conservation: a product with capacity left satisfies every queue that demands it.
    for (const auto& [p, cap] : usable) {
      int64_t top = 0;
      for (const std::string& name : tree.children("")) top += at(f.at(name).share, p);
      if (top == cap) continue;
      for (const QueueSpec& q : queues) {
        if (limitBinds(q.name) || at(demand[q.name], p) == 0) continue;
        CHECK(at(f.at(q.name).share, p) == at(demand[q.name], p));
        ++checked_idle;
      }
    }
    // Weights: unsatisfied siblings with the same demand shape (and no guarantees or limits
    // involved) get shares in proportion to their weights, product by product.
    for (const QueueSpec& a : queues) {
      for (const QueueSpec& b : queues) {
        if (a.name >= b.name || a.parent != b.parent || limited[a.name] || limited[b.name] ||
            guaranteed[a.name] || guaranteed[b.name]) {
          continue;
        }
        const ProductMilli& da = demand[a.name];
        const ProductMilli& db = demand[b.name];
        bool same_shape = !da.empty() && da.size() == db.size();
        for (const auto& [p, m] : da) {
          same_shape = same_shape && db.count(p) && m * db.begin()->second == db.at(p) * da.begin()->second;
        }
        // A demand beyond the pool is capped at it (the shape changes): only shapes within it.
        const ProductMilli& pool = a.parent.empty() ? usable : f.at(a.parent).share;
        for (const auto& [p, m] : da) same_shape = same_shape && m <= at(pool, p) && db.at(p) <= at(pool, p);
        // A parent's own pods are a claimant too: only compare children of parents without any.
        if (!same_shape || (!a.parent.empty() && c.demand.count(a.parent))) continue;
        for (const auto& [p, m] : da) {
          const int64_t xa = at(f.at(a.name).share, p), xb = at(f.at(b.name).share, p);
          if (xa >= m || xb >= db.at(p)) continue;  // satisfied in this product
          CHECK(std::abs(xa / a.weight - xb / b.weight) <= 1 / a.weight + 1 / b.weight + 1e-9);
          ++checked_weights;
        }
      }
    }
  }
  // The generator reaches every property often.
  CHECK(checked_guarantees > 500);
  CHECK(checked_weights > 300);
  CHECK(checked_idle > 500);
}

TEST_CASE("fair share: the worked example of docs/queues.md", "[queue][fairshare]") {
  const ProductMilli cap{{"H100", 32000}};
  const std::map<std::string, QueueDemand> demand{{"a", QueueDemand{{{"H100", 12000}}, {{"H100", 8000}}}},
                                                  {"b", pending({{"H100", 32000}})},
                                                  {"c", pending({{"H100", 32000}})}};
  auto f = computeFairShares(QueueTree::build({queue("a", 2), queue("b"), queue("c")}), cap, demand);
  CHECK(f.at("a").total_milli == 16000);
  CHECK(f.at("b").total_milli == 8000);
  CHECK(f.at("c").total_milli == 8000);
  QueueSpec b = queue("b");
  b.guaranteed.milli = 6000;
  f = computeFairShares(QueueTree::build({queue("a", 2), b, queue("c")}), cap, demand);
  CHECK(f.at("a").total_milli == 13000);
  CHECK(f.at("b").total_milli == 12500);
  CHECK(f.at("c").total_milli == 6500);
}
