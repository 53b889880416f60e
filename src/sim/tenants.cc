#include "troupe/sim/tenants.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <tuple>

#include "troupe/common/strings.h"
#include "troupe/sched/policies/policy_hooks.h"
#include "troupe/sched/queue/fair_share.h"
#include "troupe/sched/queue/queue_book.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/score/choose_node.h"
#include "troupe/sched/score/model_pressure.h"
#include "troupe/sched/score/placement.h"
#include "troupe/sched/score/whole_node_pressure.h"
#include "troupe/sim/go_random.h"

namespace troupe::sim {
namespace {

bool validName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '-'; });
}

std::optional<double> parseNumber(std::string_view text) {
  const std::string s(text);
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  try {
    const double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

// Pods of one shape fit the same nodes; the fit of a (node, shape) pair holds until the node
// changes.
struct Fit {
  uint32_t version = 0;  // the node's version the verdict is for; 0 = none
  bool fits = false;
  bool scored = false;
  sched::NodeScore score;
};

std::vector<int> shapeIds(const std::vector<TimedPod>& pods, int* count) {
  std::map<std::tuple<int64_t, int64_t, int, int64_t, std::vector<std::string>>, int> ids;
  std::vector<int> out;
  out.reserve(pods.size());
  for (const TimedPod& p : pods) {
    const sched::GpuRequest& r = p.request;
    auto key = std::make_tuple(r.cpu_milli, r.memory_bytes, r.gpus, r.milli_per_gpu, r.models);
    out.push_back(ids.emplace(key, static_cast<int>(ids.size())).first->second);
  }
  *count = static_cast<int>(ids.size());
  return out;
}

// What ranking takes the scarcity and whole-node penalties at (model_pressure.h,
// whole_node_pressure.h); empty while the mix names no model or asks for no whole node.
struct Pressures {
  sched::ModelPressure model;
  sched::WholeNodePressure whole;
};

// Piecewise-constant state between events, integrated over time.
struct Step {
  double start = 0;
  std::vector<int64_t> allocated;  // per tenant, milli
  std::vector<int64_t> fair;       // per tenant, milli
  bool contended = false;
};

// QueueBook::refresh: the live tick runs it every 200 ms; the sim at most once a simulated
// second, which bounds its run time (a refresh scans every pod).
constexpr double kTickSeconds = 1;
constexpr double kNever = std::numeric_limits<double>::infinity();

class Simulation {
 public:
  explicit Simulation(const TenantSimInput& in)
      : in_(in),
        pods_(*in.pods),
        rng_(in.seed),
        waiting_by_tenant_(in.tenants.size()),
        allocated_(in.tenants.size()),
        fair_dominant_(in.tenants.size(), 0),
        fair_milli_(in.tenants.size(), 0) {
    for (const model::NodeInfo& info : in.cluster->nodes) {
      nodes_.emplace_back(info);
      capacity_[info.gpu_product] += int64_t{info.gpu_count} * model::kMilliPerGpu;
    }
    version_.assign(nodes_.size(), 1);
    shape_of_ = shapeIds(pods_, &shape_count_);
    fit_.resize(nodes_.size() * static_cast<size_t>(shape_count_));
    nowhere_.assign(static_cast<size_t>(shape_count_), false);
    std::vector<sched::GpuRequest> requests;
    for (const TimedPod& p : pods_) requests.push_back(p.request);
    mix_ = sched::RequestMix::fromRequests(requests, sched::RequestMix::kTypicalCoverage,
                                           in.cluster->cpuPerGpu());
    cache_.emplace(mix_);
    std::vector<sched::QueueSpec> specs;
    for (const TenantSpec& t : in.tenants) {
      sched::QueueSpec q;
      q.name = t.name;
      q.weight = t.weight;
      if (t.guaranteed_gpus > 0) q.guaranteed.milli = t.guaranteed_gpus * model::kMilliPerGpu;
      specs.push_back(q);
    }
    book_.setQueues(sched::QueueTree::build(specs));
  }

  TenantRun run();

 private:
  Fit& fitOf(size_t node, int pod) {
    return fit_[node * static_cast<size_t>(shape_count_) +
                static_cast<size_t>(shape_of_[static_cast<size_t>(pod)])];
  }
  bool fitsOn(size_t node, int pod) {
    Fit& f = fitOf(node, pod);
    if (f.version != version_[node]) {
      f.version = version_[node];
      f.scored = false;
      f.fits =
          sched::findMisfit(nodes_[node], pods_[static_cast<size_t>(pod)].request) == sched::Misfit::kNone;
    }
    return f.fits;
  }
  // Placements only take room, so a shape that fit nowhere stays so until a pod leaves.
  bool fitsSomewhere(int pod) {
    const size_t shape = static_cast<size_t>(shape_of_[static_cast<size_t>(pod)]);
    if (nowhere_[shape]) return false;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (fitsOn(i, pod)) return true;
    }
    nowhere_[shape] = true;
    return false;
  }
  void changed(size_t node) { ++version_[node]; }
  // Only shapes with waiting pods are kept up to date; enqueue() rechecks the others.
  void freed(size_t node) {
    changed(node);
    for (size_t s = 0; s < nowhere_.size(); ++s) {
      if (!nowhere_[s] || waiting_of_shape_[s] == 0) continue;
      if (fitsOn(node, shape_pod_[s])) nowhere_[s] = false;
    }
  }
  void enqueue(int pod);
  // The node the policy picks among those that fit (and `allow`, when given), or -1.
  int chooseFor(int pod, const std::function<bool(size_t)>& allow = {});
  // The model and whole-node pressures of the cluster now (one pass over the nodes).
  Pressures pressures() const;
  const sched::NodeScore& scoreOf(size_t node, int pod);
  bool place(int pod, int node, double now);
  void depart(int pod);
  double ratio(size_t tenant) const {
    const double used = sched::dominantShare(allocated_[tenant], capacity_);
    const double fair = fair_dominant_[tenant];
    if (fair <= 0) return used > 0 ? 1e9 : 0;
    return used / fair;
  }
  void refreshBook(double now);
  std::vector<PassRecord::Served> passFifo(double now);
  std::vector<PassRecord::Served> passFairShare(double now);
  PassRecord::Served served(int pod);
  // QueueBook's verdict on the tenant's pod on a node of `product`: nullopt = admitted.
  std::optional<std::string> admit(size_t tenant, int pod, const std::string& product) const;
  sched::QueuedPod queued(int pod) const;
  void record(double now);
  void summarise(TenantRun& result) const;

  const TenantSimInput& in_;
  const std::vector<TimedPod>& pods_;
  GoRandom rng_;
  std::vector<model::NodeState> nodes_;
  std::vector<uint32_t> version_;
  sched::ProductMilli capacity_;
  std::vector<int> shape_of_;
  std::vector<int> shape_pod_;         // a pod of each shape
  std::vector<int> waiting_of_shape_;  // waiting pods per shape
  int shape_count_ = 0;
  std::vector<Fit> fit_;
  std::vector<bool> nowhere_;
  sched::RequestMix mix_;
  std::optional<sched::FragmentationCache> cache_;
  sched::QueueBook book_;
  std::set<int> waiting_;  // pod indices: arrival order
  std::vector<std::set<int>> waiting_by_tenant_;
  std::vector<sched::ProductMilli> allocated_;  // per tenant
  std::vector<double> fair_dominant_;
  std::vector<int64_t> fair_milli_;
  std::vector<PodOutcome> outcome_;
  std::vector<Step> steps_;
  double last_refresh_ = -kTickSeconds;  // when the book was last refreshed
  double tick_ = kNever;                 // a pass wanted at this time: a refusal may be stale
};

const sched::NodeScore& Simulation::scoreOf(size_t node, int pod) {
  Fit& f = fitOf(node, pod);
  if (!f.scored) {
    const sched::ScoreContext ctx{&mix_, &*cache_};
    f.score = in_.policy->score(nodes_[node], pods_[static_cast<size_t>(pod)].request, ctx);
    f.scored = true;
  }
  return f.score;
}

Pressures Simulation::pressures() const {
  Pressures out;
  const std::vector<sched::WholeNodeDemand>& demand = mix_.wholeNodeDemand();
  const bool models = !mix_.constrained().empty(), whole = !demand.empty();
  if (!models && !whole) return out;
  sched::FreeGpuByProduct free;
  sched::WholeNodeTally tally(demand);
  for (const model::NodeState& n : nodes_) {
    free.add(n);
    tally.add(n);
  }
  if (models) out.model = sched::ModelPressure::compute(mix_, free.list());
  if (whole) out.whole = tally.pressure();
  return out;
}

int Simulation::chooseFor(int pod, const std::function<bool(size_t)>& allow) {
  std::vector<size_t> feasible;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (fitsOn(i, pod) && (!allow || allow(i))) feasible.push_back(i);
  }
  if (feasible.empty()) return -1;
  const sched::Policy& policy = *in_.policy;
  const sched::GpuRequest& req = pods_[static_cast<size_t>(pod)].request;
  // As the replay and the live ranking: the pressures' penalties off the memoised value.
  const Pressures pressure = pressures();
  const sched::Draw draw = [this](int n) { return rng_.intn(n); };
  const int k = sched::chooseNode(
      feasible.size(), policy, policy.tieBreak(),
      [&](size_t i) {
        const model::NodeState& n = nodes_[feasible[i]];
        return scoreOf(feasible[i], pod).value -
               (pressure.model.empty() ? 0.0 : policy.scarcityPenalty(n, req, pressure.model)) -
               (pressure.whole.empty() ? 0.0 : policy.wholeNodePenalty(n, req, pressure.whole));
      },
      [&](size_t i) { return feasible[i]; }, draw);
  return k < 0 ? -1 : static_cast<int>(feasible[static_cast<size_t>(k)]);
}

sched::QueuedPod Simulation::queued(int pod) const {
  const TimedPod& p = pods_[static_cast<size_t>(pod)];
  sched::QueuedPod q;
  q.uid = std::to_string(pod);
  q.key = in_.tenants[static_cast<size_t>(p.tenant)].name + "/" + p.name;
  q.queue = in_.tenants[static_cast<size_t>(p.tenant)].name;
  q.milli = p.request.wantsGpus() ? p.request.totalMilli() : 0;
  q.models = p.request.models;
  q.since = sched::QueueClock::time_point(
      std::chrono::duration_cast<sched::QueueClock::duration>(std::chrono::duration<double>(p.arrival)));
  const PodOutcome& o = outcome_[static_cast<size_t>(pod)];
  if (o.node >= 0) {
    q.node = nodes_[static_cast<size_t>(o.node)].info().name;
    q.product = nodes_[static_cast<size_t>(o.node)].info().gpu_product;
  }
  return q;
}

bool Simulation::place(int pod, int node, double now) {
  const TimedPod& p = pods_[static_cast<size_t>(pod)];
  sched::Placement placement = scoreOf(static_cast<size_t>(node), pod).placement;
  const sched::Policy& policy = *in_.policy;
  model::NodeState& n = nodes_[static_cast<size_t>(node)];
  if (sched::hooksOf(policy).drawsNode() && p.request.shared()) {
    int seen = 0;  // a uniformly random GPU that fits, as the replay draws it
    for (int g = 0; g < n.gpuCount(); ++g) {
      if (n.gpuFreeMilli(g) < p.request.milli_per_gpu) continue;
      if (rng_.intn(++seen) == 0) placement.gpus = {g};
    }
  }
  model::Allocation a;
  a.pod_uid = std::to_string(pod);
  a.gpus = placement.gpus;
  a.milli_per_gpu = p.request.milli_per_gpu;
  a.cpu_milli = p.request.cpu_milli;
  a.memory_bytes = p.request.memory_bytes;
  a.topology_quality = placement.topology_quality;
  if (!n.add(a).isOk()) return false;  // not for a node findMisfit passed; the pod would wait on
  changed(static_cast<size_t>(node));
  PodOutcome& o = outcome_[static_cast<size_t>(pod)];
  o.start = now;
  o.end = now + p.duration;
  o.node = node;
  waiting_.erase(pod);
  waiting_by_tenant_[static_cast<size_t>(p.tenant)].erase(pod);
  --waiting_of_shape_[static_cast<size_t>(shape_of_[static_cast<size_t>(pod)])];
  if (p.request.wantsGpus()) {
    allocated_[static_cast<size_t>(p.tenant)][n.info().gpu_product] += p.request.totalMilli();
    book_.upsertPod(queued(pod));
  }
  return true;
}

void Simulation::enqueue(int pod) {
  const size_t shape = static_cast<size_t>(shape_of_[static_cast<size_t>(pod)]);
  if (waiting_of_shape_[shape]++ == 0) nowhere_[shape] = false;  // its verdict may be stale
  waiting_.insert(pod);
  waiting_by_tenant_[static_cast<size_t>(pods_[static_cast<size_t>(pod)].tenant)].insert(pod);
  if (pods_[static_cast<size_t>(pod)].request.wantsGpus()) book_.upsertPod(queued(pod));
}

void Simulation::depart(int pod) {
  const TimedPod& p = pods_[static_cast<size_t>(pod)];
  const size_t node = static_cast<size_t>(outcome_[static_cast<size_t>(pod)].node);
  nodes_[node].remove(std::to_string(pod));
  if (p.request.wantsGpus()) {
    allocated_[static_cast<size_t>(p.tenant)][nodes_[node].info().gpu_product] -= p.request.totalMilli();
    book_.removePod(std::to_string(pod));
  }
  freed(node);
}

void Simulation::refreshBook(double now) {
  last_refresh_ = now;
  book_.refresh(capacity_, [this](const sched::QueuedPod& q) { return fitsSomewhere(std::stoi(q.uid)); });
  for (const sched::QueueStatus& s : book_.statuses()) {
    for (size_t t = 0; t < in_.tenants.size(); ++t) {
      if (in_.tenants[t].name != s.spec.name) continue;
      fair_dominant_[t] = s.fair_share.dominant;
      fair_milli_[t] = s.fair_share.total_milli;
    }
  }
}

std::optional<std::string> Simulation::admit(size_t tenant, int pod, const std::string& product) const {
  return book_.admit(in_.tenants[tenant].name, pods_[static_cast<size_t>(pod)].request.totalMilli(), product);
}

PassRecord::Served Simulation::served(int pod) {
  PassRecord::Served s;
  s.pod = pod;
  s.tenant = pods_[static_cast<size_t>(pod)].tenant;
  if (!in_.on_pass) return s;
  for (size_t t = 0; t < in_.tenants.size(); ++t) {
    s.ratio.push_back(ratio(t));
    bool fits = false, admitted = false;
    for (int w : waiting_by_tenant_[t]) {
      if (!fitsSomewhere(w)) continue;
      fits = true;
      for (size_t n = 0; n < nodes_.size() && !admitted; ++n) {
        admitted = fitsOn(n, w) && (!pods_[static_cast<size_t>(w)].request.wantsGpus() ||
                                    !admit(t, w, nodes_[n].info().gpu_product));
      }
      if (admitted) break;
    }
    s.can_place.push_back(fits);
    s.admitted.push_back(admitted);
  }
  return s;
}

std::vector<PassRecord::Served> Simulation::passFifo(double now) {
  std::vector<PassRecord::Served> out;
  const std::vector<int> order(waiting_.begin(), waiting_.end());
  for (int pod : order) {
    if (!fitsSomewhere(pod)) continue;
    PassRecord::Served s = served(pod);
    if (place(pod, chooseFor(pod), now)) out.push_back(std::move(s));
  }
  return out;
}

std::vector<PassRecord::Served> Simulation::passFairShare(double now) {
  std::vector<PassRecord::Served> out;
  // Tenant and shape turned away since the last placement: the same verdict for every such pod.
  std::set<std::pair<size_t, int>> denied;
  bool placed_since_refresh = false;
  while (true) {
    std::vector<size_t> tenants;
    for (size_t t = 0; t < in_.tenants.size(); ++t) {
      if (!waiting_by_tenant_[t].empty()) tenants.push_back(t);
    }
    // Furthest below its fair share first; ties by the tenants' order.
    std::stable_sort(tenants.begin(), tenants.end(), [&](size_t a, size_t b) { return ratio(a) < ratio(b); });
    bool placed = false, stale = false;
    for (size_t t : tenants) {
      for (int pod : waiting_by_tenant_[t]) {
        const std::pair<size_t, int> kind{t, shape_of_[static_cast<size_t>(pod)]};
        if (denied.count(kind) || !fitsSomewhere(pod)) continue;
        // As the live filter: nodes of a product QueueBook refuses the tenant are filtered out,
        // and the policy chooses among the rest.
        const TimedPod& p = pods_[static_cast<size_t>(pod)];
        std::set<std::string> admitted;
        for (const auto& [product, milli] : capacity_) {
          if (!p.request.wantsGpus() || !admit(t, pod, product)) admitted.insert(product);
        }
        auto allow = [&](size_t n) { return admitted.count(nodes_[n].info().gpu_product) > 0; };
        const int node = admitted.empty() ? -1 : chooseFor(pod, allow);
        if (node < 0) {
          // A refusal read off a refresh older than this pass's placements lasts until the
          // next tick, as live: now when a second has passed, else a tick a second after.
          if (placed_since_refresh) {
            if (now >= last_refresh_ + kTickSeconds) {
              stale = true;
              break;
            }
            tick_ = std::min(tick_, last_refresh_ + kTickSeconds);
          }
          denied.insert(kind);
          continue;
        }
        PassRecord::Served s = served(pod);
        if (!place(pod, node, now)) {
          denied.insert(kind);
          continue;
        }
        out.push_back(std::move(s));
        placed = placed_since_refresh = true;
        // A placement changes what QueueBook says of others (a waiting tenant that reached its
        // share no longer holds anyone back): earlier refusals are asked again.
        denied.clear();
        break;
      }
      if (placed || stale) break;
    }
    if (stale) {
      refreshBook(now);
      placed_since_refresh = false;
      denied.clear();
      continue;
    }
    if (!placed) return out;
  }
}

void Simulation::record(double now) {
  Step s;
  s.start = now;
  for (size_t t = 0; t < in_.tenants.size(); ++t) {
    int64_t milli = 0;
    for (const auto& [product, m] : allocated_[t]) milli += m;
    s.allocated.push_back(milli);
    s.fair.push_back(fair_milli_[t]);
  }
  for (int pod : waiting_) {
    if (pods_[static_cast<size_t>(pod)].request.wantsGpus()) {
      s.contended = true;
      break;
    }
  }
  steps_.push_back(std::move(s));
}

TenantRun Simulation::run() {
  const auto wall = std::chrono::steady_clock::now();
  TenantRun result;
  result.ordering = in_.ordering;
  result.seed = in_.seed;
  result.capacity_gpus = in_.cluster->gpus;
  outcome_.assign(pods_.size(), PodOutcome{});
  // Pods that no node of the empty cluster fits never queue (they would wait for ever).
  shape_pod_.assign(static_cast<size_t>(shape_count_), -1);
  waiting_of_shape_.assign(static_cast<size_t>(shape_count_), 0);
  for (size_t i = 0; i < pods_.size(); ++i) {
    int& first = shape_pod_[static_cast<size_t>(shape_of_[i])];
    if (first < 0) first = static_cast<int>(i);
    if (static_cast<int>(i) != first) {
      outcome_[i].fits_empty = outcome_[static_cast<size_t>(first)].fits_empty;
    } else {
      outcome_[i].fits_empty = fitsSomewhere(static_cast<int>(i));
    }
    if (!outcome_[i].fits_empty) ++result.never_fit;
  }
  using Departure = std::pair<double, int>;
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  size_t next = 0;
  while (next < pods_.size() || !departures.empty() || tick_ < kNever) {
    double now = tick_;
    if (!departures.empty()) now = std::min(now, departures.top().first);
    if (next < pods_.size()) now = std::min(now, pods_[next].arrival);
    if (tick_ <= now) tick_ = kNever;
    while (!departures.empty() && departures.top().first <= now) {
      depart(departures.top().second);
      departures.pop();
    }
    for (; next < pods_.size() && pods_[next].arrival <= now; ++next) {
      if (!outcome_[next].fits_empty) continue;
      enqueue(static_cast<int>(next));
    }
    // At most once a simulated second: at the first event a second or more after the last.
    if (now >= last_refresh_ + kTickSeconds) refreshBook(now);
    PassRecord rec;
    rec.time = now;
    rec.served = in_.ordering == Ordering::kFifo ? passFifo(now) : passFairShare(now);
    for (const PassRecord::Served& s : rec.served)
      departures.emplace(outcome_[static_cast<size_t>(s.pod)].end, s.pod);
    record(now);
    if (in_.on_pass) {
      rec.nodes = &nodes_;
      rec.waiting.assign(waiting_.begin(), waiting_.end());
      in_.on_pass(rec);
    }
  }
  summarise(result);
  result.pods = std::move(outcome_);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  return result;
}

void Simulation::summarise(TenantRun& r) const {
  const size_t n = in_.tenants.size();
  double busy_end = 0;
  std::vector<std::vector<double>> waits(n);
  std::vector<double> whole_node_waits;
  r.tenants.assign(n, TenantOutcome{});
  for (size_t t = 0; t < n; ++t) r.tenants[t].spec = in_.tenants[t];
  for (size_t i = 0; i < pods_.size(); ++i) {
    const PodOutcome& o = outcome_[i];
    TenantOutcome& t = r.tenants[static_cast<size_t>(pods_[i].tenant)];
    ++t.pods;
    if (!o.fits_empty) continue;
    busy_end = std::max(busy_end, pods_[i].arrival);
    const bool whole_node = pods_[i].request.gpus >= sched::kWholeNodeGpus;
    if (o.start < 0) {
      ++t.waiting_at_end;
      r.whole_node_waiting_at_end += whole_node ? 1 : 0;
      continue;
    }
    ++t.started;
    busy_end = std::max(busy_end, o.start);
    waits[static_cast<size_t>(pods_[i].tenant)].push_back(o.start - pods_[i].arrival);
    if (whole_node) whole_node_waits.push_back(o.start - pods_[i].arrival);
  }
  r.whole_node_waits = waitStats(whole_node_waits);
  // Pods still waiting at the end (QueueBook refused them for ever) are counted, not timed: the
  // busy time ends with the last arrival or start either way.
  for (size_t t = 0; t < n; ++t) r.tenants[t].waits = waitStats(waits[t]);
  const double capacity = static_cast<double>(r.capacity_gpus) * model::kMilliPerGpu;
  const int bins = std::max(1, in_.samples);
  const double width = busy_end > 0 ? busy_end / bins : 1;
  r.samples.assign(static_cast<size_t>(bins), ShareSample{});
  std::vector<double> bin_weight(static_cast<size_t>(bins), 0);
  for (int b = 0; b < bins; ++b) {
    r.samples[static_cast<size_t>(b)].start = b * width;
    r.samples[static_cast<size_t>(b)].end = (b + 1) * width;
    r.samples[static_cast<size_t>(b)].share.assign(n, 0);
    r.samples[static_cast<size_t>(b)].fair.assign(n, 0);
  }
  std::vector<double> share(n, 0), fair(n, 0);
  double used = 0, contended_used = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    const double end = std::min(busy_end, i + 1 < steps_.size() ? steps_[i + 1].start : busy_end);
    if (end <= s.start) continue;
    const double dt = end - s.start;
    double alloc = 0, fair_total = 0;
    for (size_t t = 0; t < n; ++t) {
      alloc += static_cast<double>(s.allocated[t]);
      fair_total += static_cast<double>(s.fair[t]);
    }
    used += alloc / capacity * dt;
    // The step's part in each sample bin it overlaps.
    for (int b = std::max(0, static_cast<int>(s.start / width)); b < bins && b * width < end; ++b) {
      ShareSample& sample = r.samples[static_cast<size_t>(b)];
      const double part = std::min(end, sample.end) - std::max(s.start, sample.start);
      if (part <= 0) continue;
      sample.allocated += alloc / capacity * part / width;
      if (alloc <= 0 || fair_total <= 0) continue;
      bin_weight[static_cast<size_t>(b)] += part;
      for (size_t t = 0; t < n; ++t) {
        sample.share[t] += static_cast<double>(s.allocated[t]) / alloc * part;
        sample.fair[t] += static_cast<double>(s.fair[t]) / fair_total * part;
      }
    }
    if (!s.contended) continue;
    r.contended_seconds += dt;
    contended_used += alloc / capacity * dt;
    if (alloc <= 0 || fair_total <= 0) continue;
    for (size_t t = 0; t < n; ++t) {
      share[t] += static_cast<double>(s.allocated[t]) / alloc * dt;
      fair[t] += static_cast<double>(s.fair[t]) / fair_total * dt;
    }
  }
  for (int b = 0; b < bins; ++b) {
    const double w = bin_weight[static_cast<size_t>(b)];
    if (w <= 0) continue;
    for (size_t t = 0; t < n; ++t) {
      r.samples[static_cast<size_t>(b)].share[t] /= w;
      r.samples[static_cast<size_t>(b)].fair[t] /= w;
    }
  }
  r.busy_seconds = busy_end;
  r.utilisation = busy_end > 0 ? used / busy_end : 0;
  r.contended_utilisation = r.contended_seconds > 0 ? contended_used / r.contended_seconds : 0;
  std::vector<double> x;
  for (size_t t = 0; t < n; ++t) {
    if (r.contended_seconds <= 0) break;
    r.tenants[t].share = share[t] / r.contended_seconds;
    r.tenants[t].fair_share = fair[t] / r.contended_seconds;
    if (r.tenants[t].fair_share > 0) x.push_back(r.tenants[t].share / r.tenants[t].fair_share);
  }
  r.jain = jainIndex(x);
}

}  // namespace

Result<std::vector<TenantSpec>> parseTenants(std::string_view text) {
  std::vector<TenantSpec> out;
  for (const std::string& raw : splitList(std::string(text), ',')) {
    const std::string entry(trim(raw));
    std::vector<std::string> parts;  // empty parts kept: "a::8" is an error, not a:8
    for (size_t start = 0;;) {
      const size_t colon = entry.find(':', start);
      parts.push_back(entry.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    const std::string example = "e.g. \"a:1,b:1,c:2\" or \"a:1:8\" (name:weight[:guaranteed GPUs])";
    if (parts.size() < 2 || parts.size() > 3) {
      return invalidArgument("tenant \"" + entry + "\" must be name:weight or name:weight:guaranteedGPUs, " +
                             example);
    }
    TenantSpec t;
    t.name = std::string(trim(parts[0]));
    if (!validName(t.name)) {
      return invalidArgument("tenant name \"" + t.name +
                             "\" must be a queue name: 1 to 63 lower-case letters, digits or '-', "
                             "starting and ending with a letter or digit");
    }
    for (const TenantSpec& other : out) {
      if (other.name == t.name)
        return invalidArgument("tenant \"" + t.name + "\" is listed twice; name each once");
    }
    const std::optional<double> weight = parseNumber(trim(parts[1]));
    if (!weight || *weight <= 0 || *weight > 1e6) {
      return invalidArgument("tenant \"" + t.name + "\": weight \"" + std::string(trim(parts[1])) +
                             "\" must be a number above 0 (up to 1000000), e.g. " + t.name + ":2");
    }
    t.weight = *weight;
    if (parts.size() == 3) {
      const std::string g(trim(parts[2]));
      const std::optional<double> gpus = parseNumber(g);
      if (!gpus || *gpus < 0 || *gpus > 1e7 || *gpus != std::floor(*gpus)) {
        return invalidArgument("tenant \"" + t.name + "\": guaranteed GPUs \"" + g +
                               "\" must be a whole number from 0, e.g. " + t.name + ":1:8");
      }
      t.guaranteed_gpus = static_cast<int64_t>(*gpus);
    }
    out.push_back(std::move(t));
  }
  if (out.empty()) return invalidArgument("no tenants given; list them as name:weight, e.g. \"a:1,b:1,c:2\"");
  return out;
}

int tenantOf(const std::string& pod_name, int64_t seed, size_t tenants) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a 64 over the seed's bytes, then the name's
  auto mixIn = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ULL;
  };
  for (int i = 0; i < 8; ++i) mixIn(static_cast<unsigned char>(static_cast<uint64_t>(seed) >> (8 * i)));
  for (char c : pod_name) mixIn(static_cast<unsigned char>(c));
  return tenants == 0 ? 0 : static_cast<int>(h % tenants);
}

std::vector<TracePod> tunedPods(const std::vector<TracePod>& sorted_pods, int64_t capacity_milli,
                                int64_t seed, double ratio) {
  const RunPlan plan = planRun(sorted_pods, 1, capacity_milli, seed, ratio);
  std::vector<TracePod> out = sorted_pods;
  std::map<int, int> copies;
  for (size_t i = sorted_pods.size(); i < plan.order.size(); ++i) {
    const int pick = plan.order[i];
    TracePod clone = sorted_pods[static_cast<size_t>(pick)];
    clone.name += "-clone-" + std::to_string(++copies[pick]);
    out.push_back(std::move(clone));
  }
  return out;
}

Result<std::vector<TimedPod>> timedPods(const std::vector<TracePod>& pods, size_t tenants, double load,
                                        int64_t seed, const std::string& file) {
  if (!(load > 0)) return invalidArgument("the load factor must be above 0");
  int64_t first = -1;
  for (const TracePod& p : pods) {
    if (p.creation_time < 0 || p.deletion_time < 0) {
      return invalidArgument(file + ": pod \"" + p.name +
                             "\" has no creation_time or deletion_time; the queueing simulation needs "
                             "both columns (the openb v2023 pod lists have them)");
    }
    first = first < 0 ? p.creation_time : std::min(first, p.creation_time);
  }
  std::vector<TimedPod> out;
  out.reserve(pods.size());
  for (const TracePod& p : pods) {
    TimedPod t;
    t.name = p.name;
    t.request = requestOf(p);
    t.arrival = static_cast<double>(p.creation_time - first) / load;
    const int64_t began = p.scheduled_time >= 0 ? p.scheduled_time : p.creation_time;
    t.duration = std::max<double>(1, static_cast<double>(p.deletion_time - began));
    t.tenant = tenantOf(p.name, seed, tenants);
    out.push_back(std::move(t));
  }
  std::stable_sort(out.begin(), out.end(), [](const TimedPod& a, const TimedPod& b) {
    return a.arrival != b.arrival ? a.arrival < b.arrival : a.name < b.name;
  });
  return out;
}

const char* orderingName(Ordering ordering) { return ordering == Ordering::kFifo ? "fifo" : "fair-share"; }

TenantRun simulateTenants(const TenantSimInput& input) {
  Simulation sim(input);
  return sim.run();
}

double jainIndex(const std::vector<double>& x) {
  double sum = 0, squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  if (x.empty() || squares <= 0) return 0;
  return sum * sum / (static_cast<double>(x.size()) * squares);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

WaitStats waitStats(const std::vector<double>& waits) {
  WaitStats w;
  w.n = static_cast<int>(waits.size());
  if (waits.empty()) return w;
  double sum = 0;
  for (double v : waits) sum += v;
  w.mean = sum / static_cast<double>(waits.size());
  w.p50 = percentile(waits, 50);
  w.p95 = percentile(waits, 95);
  w.p99 = percentile(waits, 99);
  return w;
}

}  // namespace troupe::sim
