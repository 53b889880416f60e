#include "troupe/sched/request/request_mix.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "troupe/common/strings.h"
#include "troupe/model/node.h"

namespace troupe::sched {
namespace {

using ShapeKey = std::tuple<int64_t, int64_t, int, std::string>;  // cpu, milli, gpus, models

ShapeKey keyOf(const GpuRequest& r) {
  return {r.cpu_milli, r.wantsGpus() ? r.milli_per_gpu : 0, r.gpus, joinList(r.models, "|")};
}

// The whole-node demand levels from the whole-node requests' milli-GPU by CPU: each distinct
// CPU's share of the GPU request; beyond kWholeNodeLevels, thinned evenly by rank (the least
// kept), each dropped CPU's share joining the kept level below it.
std::vector<WholeNodeDemand> wholeNodeLevels(const std::map<int64_t, int64_t>& by_cpu, int64_t gpu_total) {
  std::vector<WholeNodeDemand> all;
  for (const auto& [cpu, milli] : by_cpu) {
    all.push_back({cpu, static_cast<double>(milli) / static_cast<double>(gpu_total)});
  }
  if (all.size() <= RequestMix::kWholeNodeLevels) return all;
  std::vector<WholeNodeDemand> kept;
  for (size_t i = 0; i < all.size(); ++i) {
    if (kept.size() < RequestMix::kWholeNodeLevels &&
        i == kept.size() * all.size() / RequestMix::kWholeNodeLevels) {
      kept.push_back(all[i]);
    } else {
      kept.back().share += all[i].share;
    }
  }
  return kept;
}

}  // namespace

RequestMix RequestMix::fromRequests(const std::vector<GpuRequest>& requests, double coverage,
                                    double cluster_cpu_per_gpu) {
  std::map<ShapeKey, std::pair<int64_t, const GpuRequest*>> counts;
  for (const GpuRequest& r : requests) {
    auto& slot = counts[keyOf(r)];
    ++slot.first;
    slot.second = &r;
  }
  std::vector<std::pair<ShapeKey, std::pair<int64_t, const GpuRequest*>>> shapes(counts.begin(),
                                                                                 counts.end());
  std::stable_sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
    if (a.second.first != b.second.first) return a.second.first > b.second.first;
    return a.first > b.first;
  });
  RequestMix mix;
  const double total = static_cast<double>(requests.size());
  int64_t covered = 0;
  for (const auto& [key, value] : shapes) {
    if (total > 0 && static_cast<double>(covered) >= coverage * total) break;
    covered += value.first;
    const GpuRequest& r = *value.second;
    mix.entries_.push_back({r.cpu_milli, r.wantsGpus() ? r.milli_per_gpu : 0, r.gpus, r.models,
                            static_cast<double>(value.first)});
  }
  double cpu = 0, gpu_pods_cpu = 0, gpu = 0;
  for (TypicalRequest& t : mix.entries_) {
    t.probability /= static_cast<double>(covered);
    cpu += t.probability * static_cast<double>(t.cpu_milli);
    if (t.gpus > 0) gpu_pods_cpu += t.probability * static_cast<double>(t.cpu_milli);
    gpu += t.probability * t.gpus * static_cast<double>(t.milli_per_gpu);
  }
  mix.cpu_per_gpu_ = gpu > 0 ? cpu / gpu : 0.0;
  mix.gpu_pods_cpu_per_gpu_ = gpu > 0 ? gpu_pods_cpu / gpu : 0.0;
  mix.setLoads(cluster_cpu_per_gpu);
  mix.setWaste();
  // The constrained requests' share of the GPU request, per list of models.
  std::map<std::string, std::pair<int64_t, const GpuRequest*>> by_list;
  int64_t gpu_total = 0, sharing = 0, whole = 0;
  std::map<int64_t, int64_t> whole_by_cpu;  // milli-GPU of whole-node requests by their CPU
  for (const GpuRequest& r : requests) {
    if (!r.wantsGpus()) continue;
    gpu_total += r.totalMilli();
    if (r.shared()) sharing += r.totalMilli();
    if (r.gpus >= kWholeNodeGpus) {
      whole += r.totalMilli();
      whole_by_cpu[std::max<int64_t>(0, r.cpu_milli)] += r.totalMilli();
    }
    if (r.models.empty()) continue;
    auto& slot = by_list[joinList(r.models, "|")];
    slot.first += r.totalMilli();
    slot.second = &r;
  }
  if (gpu_total > 0) {
    mix.sharing_share_ = static_cast<double>(sharing) / static_cast<double>(gpu_total);
    mix.whole_node_share_ = static_cast<double>(whole) / static_cast<double>(gpu_total);
    mix.whole_node_demand_ = wholeNodeLevels(whole_by_cpu, gpu_total);
  }
  for (const auto& [key, value] : by_list) {
    mix.constrained_.push_back(
        {value.second->models, static_cast<double>(value.first) / static_cast<double>(gpu_total)});
  }
  return mix;
}

double RequestMix::cpuLoadAgainst(double cluster_cpu_per_gpu) const {
  return cluster_cpu_per_gpu > 0 ? cpu_per_gpu_ / cluster_cpu_per_gpu : 0.0;
}

RequestMix RequestMix::withClusterCpuPerGpu(double cluster_cpu_per_gpu) const {
  RequestMix out = *this;
  out.setLoads(cluster_cpu_per_gpu);
  return out;
}

void RequestMix::setLoads(double cluster_cpu_per_gpu) {
  cpu_load_ = cpuLoadAgainst(cluster_cpu_per_gpu);
  gpu_pods_cpu_load_ = cluster_cpu_per_gpu > 0 ? gpu_pods_cpu_per_gpu_ / cluster_cpu_per_gpu : 0.0;
}

void RequestMix::setWaste() {
  // waste(f) = f where no typical one-GPU request fits in f; else the mean of waste(f - m) over
  // the requests that fit, m their milli-GPU per GPU, weighted by how often the mix asks each.
  waste_.assign(static_cast<size_t>(model::kMilliPerGpu) + 1, 0.0);
  for (int64_t f = 1; f <= model::kMilliPerGpu; ++f) {
    double weight = 0, sum = 0;
    for (const TypicalRequest& t : entries_) {
      if (t.gpus != 1 || t.milli_per_gpu > f || t.milli_per_gpu <= 0) continue;
      weight += t.probability;
      sum += t.probability * waste_[static_cast<size_t>(f - t.milli_per_gpu)];
    }
    waste_[static_cast<size_t>(f)] = weight > 0 ? sum / weight : static_cast<double>(f);
  }
}

double RequestMix::fragmentWaste(int64_t free_milli) const {
  if (waste_.empty()) return 0.0;
  return waste_[static_cast<size_t>(std::clamp<int64_t>(free_milli, 0, model::kMilliPerGpu))];
}

const RequestMix& RequestMix::defaults() {
  static const RequestMix mix = [] {
    RequestMix m;
    // Whole GPUs in the sizes jobs use, and the common "half a GPU" share.
    for (auto [gpus, milli, p] :
         {std::tuple{1, 1000, 0.4}, {2, 1000, 0.15}, {4, 1000, 0.1}, {8, 1000, 0.1}, {1, 500, 0.25}}) {
      m.entries_.push_back({0, milli, gpus, {}, p});
    }
    m.setWaste();
    return m;
  }();
  return mix;
}

RequestMixWindow::RequestMixWindow(size_t capacity, size_t refresh, size_t remembered_uids)
    : capacity_(std::max<size_t>(1, capacity)),
      refresh_(std::max<size_t>(1, refresh)),
      remembered_uids_(remembered_uids > 0 ? remembered_uids : 4 * capacity_) {}

void RequestMixWindow::record(const GpuRequest& request) {
  std::lock_guard lock(mu_);
  recordLocked(request);
}

bool RequestMixWindow::record(const GpuRequest& request, const std::string& uid) {
  if (uid.empty()) {
    record(request);
    return true;
  }
  const uint64_t h = std::hash<std::string>{}(uid);
  std::lock_guard lock(mu_);
  if (!uids_.insert(h).second) return false;
  uid_order_.push_back(h);
  if (uid_order_.size() > remembered_uids_) {
    uids_.erase(uid_order_.front());
    uid_order_.pop_front();
  }
  recordLocked(request);
  return true;
}

bool RequestMixWindow::remembers(const std::string& uid) const {
  if (uid.empty()) return false;
  const uint64_t h = std::hash<std::string>{}(uid);
  std::lock_guard lock(mu_);
  return uids_.count(h) > 0;
}

void RequestMixWindow::recordLocked(const GpuRequest& request) {
  window_.push_back(request);
  if (window_.size() > capacity_) window_.pop_front();
  if (++since_refresh_ < refresh_) return;
  rebuildLocked();
}

void RequestMixWindow::refresh() {
  std::lock_guard lock(mu_);
  rebuildLocked();
}

void RequestMixWindow::setClusterCpuPerGpu(double cpu_per_gpu) {
  std::lock_guard lock(mu_);
  cluster_cpu_per_gpu_ = cpu_per_gpu;
  // Node changes are frequent at start-up: the mix is copied only when its regime moves.
  if (!mix_ || RequestMix::cpuRegimeOf(mix_->cpuLoadAgainst(cpu_per_gpu)) ==
                   RequestMix::cpuRegimeOf(mix_->cpuLoad())) {
    return;
  }
  mix_ = std::make_shared<const RequestMix>(mix_->withClusterCpuPerGpu(cpu_per_gpu));
}

void RequestMixWindow::rebuildLocked() {
  since_refresh_ = 0;
  if (window_.empty()) return;
  // Under the lock: at most every `refresh_` requests, a sort of `capacity_` shapes.
  mix_ = std::make_shared<const RequestMix>(
      RequestMix::fromRequests(std::vector<GpuRequest>(window_.begin(), window_.end()),
                               RequestMix::kTypicalCoverage, cluster_cpu_per_gpu_));
}

std::shared_ptr<const RequestMix> RequestMixWindow::current() const {
  std::lock_guard lock(mu_);
  if (mix_) return mix_;
  return std::shared_ptr<const RequestMix>(std::shared_ptr<const RequestMix>(), &RequestMix::defaults());
}

}  // namespace troupe::sched
