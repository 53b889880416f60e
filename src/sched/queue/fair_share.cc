#include "troupe/sched/queue/fair_share.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace troupe::sched {
namespace {

// Rounding: shares are computed in real numbers and turned into milli-GPUs by the largest
// remainder method: everyone gets the floor of their real share, then the milli-GPUs the floors
// left over go one each to the largest fractional parts (ties to the earlier claimant, i.e. the
// name order). So the integer shares add up exactly to the rounded real total, no one gets more
// than their (integer) demand, and no one gets less than an integer amount their real share
// reached (a guarantee survives rounding).
std::vector<int64_t> roundShares(const std::vector<long double>& real, int64_t total,
                                 const std::vector<int64_t>& cap) {
  std::vector<int64_t> out(real.size());
  int64_t given = 0;
  for (size_t i = 0; i < real.size(); ++i) {
    out[i] = std::min<int64_t>(cap[i], static_cast<int64_t>(std::floor(std::max<long double>(real[i], 0))));
    given += out[i];
  }
  std::vector<size_t> order(real.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return real[a] - std::floor(real[a]) > real[b] - std::floor(real[b]);
  });
  for (size_t k = 0; given < total && k < order.size(); ++k) {
    if (out[order[k]] < cap[order[k]]) {
      ++out[order[k]];
      ++given;
    }
  }
  return out;
}

// `amount` spread over the entries in proportion to `weights` (each gets at most its weight).
std::vector<int64_t> apportion(int64_t amount, const std::vector<int64_t>& weights) {
  const int64_t sum = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  amount = std::min(amount, sum);
  std::vector<long double> real(weights.size(), 0);
  if (sum > 0) {
    for (size_t i = 0; i < weights.size(); ++i) {
      real[i] = static_cast<long double>(amount) * weights[i] / sum;
    }
  }
  return roundShares(real, amount, weights);
}

// A queue (or a parent's own pods) splitting its parent's pool.
struct Claimant {
  std::string name;  // "" = the parent's own pods
  double weight = 1;
  ProductMilli demand;     // capped by the limit
  ProductMilli guarantee;  // min(guaranteed, demand), per product
};

int64_t at(const ProductMilli& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

// The demand vector capped by a quota: per product, then in all (spread over the products in
// proportion to the capped demand).
ProductMilli capBy(ProductMilli demand, const GpuQuota& limit) {
  for (auto& [product, milli] : demand) {
    if (auto it = limit.product_milli.find(product); it != limit.product_milli.end()) {
      milli = std::min(milli, it->second);
    }
  }
  if (limit.milli) {
    std::vector<int64_t> weights;
    for (const auto& [product, milli] : demand) weights.push_back(milli);
    std::vector<int64_t> capped = apportion(*limit.milli, weights);
    size_t i = 0;
    for (auto& [product, milli] : demand) milli = capped[i++];
  }
  return demand;
}

// A queue's own guarantee against its demand: per-product guarantees first, then the total one
// spread over the rest of the demand in proportion to it.
ProductMilli ownGuarantee(const GpuQuota& guaranteed, const ProductMilli& demand) {
  ProductMilli out;
  std::vector<int64_t> rest;
  int64_t held = 0;
  for (const auto& [product, milli] : demand) {
    out[product] = std::min(milli, at(guaranteed.product_milli, product));
    held += out[product];
    rest.push_back(milli - out[product]);
  }
  if (guaranteed.milli && *guaranteed.milli > held) {
    std::vector<int64_t> extra = apportion(*guaranteed.milli - held, rest);
    size_t i = 0;
    for (auto& [product, milli] : out) milli += extra[i++];
  }
  return out;
}

// The real amounts of one product: everyone's guarantee, then a common level L rises and
// claimant i holds min(d_i, g_i + rate_i * L) until the pool is used up.
std::vector<long double> fillProduct(int64_t pool, const std::vector<int64_t>& g,
                                     const std::vector<int64_t>& d, const std::vector<long double>& rate) {
  const size_t n = d.size();
  std::vector<long double> x(n);
  const int64_t demanded = std::accumulate(d.begin(), d.end(), int64_t{0});
  const int64_t guaranteed = std::accumulate(g.begin(), g.end(), int64_t{0});
  if (demanded <= pool) {
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<long double>(d[i]);
    return x;
  }
  if (guaranteed >= pool) {  // the guarantees do not fit: each gets the same fraction of its own
    for (size_t i = 0; i < n; ++i) x[i] = guaranteed ? static_cast<long double>(g[i]) * pool / guaranteed : 0;
    return x;
  }
  // The level where claimant i is satisfied; between two such levels the use grows linearly.
  std::vector<std::pair<long double, size_t>> full;
  for (size_t i = 0; i < n; ++i) {
    if (d[i] > g[i] && rate[i] > 0) full.push_back({(d[i] - g[i]) / rate[i], i});
  }
  std::sort(full.begin(), full.end());
  long double used = static_cast<long double>(guaranteed);
  long double slope = 0;
  for (const auto& f : full) slope += rate[f.second];
  long double level = 0;
  size_t k = 0;
  for (; k < full.size(); ++k) {
    const long double next = used + slope * (full[k].first - level);
    if (next >= pool) break;
    used = next;
    level = full[k].first;
    slope -= rate[full[k].second];
  }
  if (slope > 0) level += (pool - used) / slope;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::min(static_cast<long double>(d[i]), g[i] + rate[i] * level);
  }
  return x;
}

double dominantOf(const ProductMilli& amount, const ProductMilli& capacity) {
  double best = 0;
  for (const auto& [product, milli] : amount) {
    const int64_t c = at(capacity, product);
    if (c > 0) best = std::max(best, static_cast<double>(milli) / static_cast<double>(c));
  }
  return best;
}

// Splits `pool` among the claimants, product by product (each product's water level is its own,
// so a product that runs out stops only the claimants' growth in that product).
std::vector<ProductMilli> splitPool(const ProductMilli& pool, std::vector<Claimant> claimants,
                                    const ProductMilli& capacity) {
  // No claimant can use more of a product than the pool has: a demand beyond it would inflate
  // the claimant's dominant share and slow its growth in every other product (a queue flooding
  // the fleet that happens to hold all of a small product would get less than its weight's share
  // of the rest).
  for (Claimant& c : claimants) {
    for (auto& [product, milli] : c.demand) milli = std::min(milli, at(pool, product));
    for (auto& [product, milli] : c.guarantee) milli = std::min(milli, at(c.demand, product));
  }
  std::vector<ProductMilli> out(claimants.size());
  std::vector<double> dominant(claimants.size());
  for (size_t i = 0; i < claimants.size(); ++i) dominant[i] = dominantOf(claimants[i].demand, capacity);
  for (const auto& [product, milli] : pool) {
    std::vector<int64_t> g, d;
    std::vector<long double> rate;
    for (size_t i = 0; i < claimants.size(); ++i) {
      const int64_t di = at(claimants[i].demand, product);
      d.push_back(di);
      g.push_back(std::min(di, at(claimants[i].guarantee, product)));
      // Growth in proportion to the weight, along the demand vector scaled to dominant share 1.
      rate.push_back(dominant[i] > 0 ? claimants[i].weight * di / dominant[i] : 0);
    }
    std::vector<long double> real = fillProduct(milli, g, d, rate);
    const int64_t total = std::min(milli, std::accumulate(d.begin(), d.end(), int64_t{0}));
    std::vector<int64_t> shares = roundShares(real, total, d);
    for (size_t i = 0; i < claimants.size(); ++i) {
      if (shares[i] > 0) out[i][product] = shares[i];
    }
  }
  return out;
}

struct Subtree {
  ProductMilli demand;     // this queue with its children, capped by its limit
  ProductMilli guarantee;  // what it must be able to pass on: max(own, the children's together)
};

}  // namespace

double dominantShare(const ProductMilli& amount, const ProductMilli& capacity) {
  return dominantOf(amount, capacity);
}

std::map<std::string, FairShare> computeFairShares(const QueueTree& tree, const ProductMilli& capacity,
                                                   const std::map<std::string, QueueDemand>& demand) {
  ProductMilli usable;  // products with zero capacity are ignored
  for (const auto& [product, milli] : capacity) {
    if (milli > 0) usable[product] = milli;
  }
  auto ownDemand = [&](const std::string& name) {
    ProductMilli own;
    if (auto it = demand.find(name); it != demand.end()) {
      for (const auto* part : {&it->second.allocated, &it->second.pending}) {
        for (const auto& [product, milli] : *part) {
          if (usable.count(product) && milli > 0) own[product] += milli;
        }
      }
    }
    return own;
  };

  // Bottom-up (queues() is parent-before-child, so walk it backwards): demand and guarantee.
  std::map<std::string, Subtree> sub;
  const std::vector<QueueSpec>& queues = tree.queues();
  for (auto q = queues.rbegin(); q != queues.rend(); ++q) {
    Subtree s;
    s.demand = ownDemand(q->name);
    ProductMilli kids_guarantee;
    for (const std::string& child : tree.children(q->name)) {
      for (const auto& [product, milli] : sub[child].demand) s.demand[product] += milli;
      for (const auto& [product, milli] : sub[child].guarantee) kids_guarantee[product] += milli;
    }
    s.demand = capBy(std::move(s.demand), q->limit);
    s.guarantee = ownGuarantee(q->guaranteed, s.demand);
    for (auto& [product, milli] : s.guarantee) {
      milli = std::min(at(s.demand, product), std::max(milli, at(kids_guarantee, product)));
    }
    sub[q->name] = std::move(s);
  }

  std::map<std::string, FairShare> out;
  // Top-down: the fleet is split among the top-level queues, each queue's share among its
  // children and its own pods (weight 1, nothing guaranteed).
  auto split = [&](const std::string& parent, const ProductMilli& pool) {
    std::vector<Claimant> claimants;
    for (const std::string& child : tree.children(parent)) {
      claimants.push_back({child, tree.find(child)->weight, sub[child].demand, sub[child].guarantee});
    }
    if (!parent.empty()) {
      ProductMilli own = capBy(ownDemand(parent), tree.find(parent)->limit);
      if (!own.empty()) claimants.push_back({"", 1, own, {}});
    }
    std::vector<ProductMilli> shares = splitPool(pool, claimants, usable);
    for (size_t i = 0; i < claimants.size(); ++i) {
      if (claimants[i].name.empty()) continue;
      FairShare& f = out[claimants[i].name];
      f.share = std::move(shares[i]);
      f.total_milli = 0;
      for (const auto& [product, milli] : f.share) f.total_milli += milli;
      f.dominant = dominantOf(f.share, usable);
    }
  };
  split("", usable);
  for (const QueueSpec& q : queues) {
    if (!tree.children(q.name).empty()) split(q.name, out[q.name].share);
  }
  return out;
}

}  // namespace troupe::sched
