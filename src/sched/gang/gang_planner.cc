#include "troupe/sched/gang/gang_planner.h"

#include <algorithm>
#include <map>

#include "troupe/model/pod_contract.h"
#include "troupe/model/topology_levels.h"
#include "troupe/sched/score/placement.h"

namespace troupe::sched {
namespace {

struct NodeFit {
  const model::NodeState* node;
  std::vector<std::vector<int>> sets;  // the GPU sets members would get, in order
  int64_t used_milli;
  int dra_gpus = 0;  // per member, on a DRA-served node (sets are then empty)
};

// Members of `req` that fit on the node as it is now, by placing them one after another on a
// scratch copy, so each member gets the GPUs it would really get.
NodeFit fitMembers(const model::NodeState& node, const GpuRequest& req, int limit) {
  NodeFit fit{&node, {}, node.usedMilliTotal()};
  model::NodeState scratch = node;
  for (int i = 0; i < limit; ++i) {
    std::optional<Placement> p = placeOnNode(scratch, req);
    if (!p) break;
    model::Allocation a;
    a.pod_uid = "plan#" + std::to_string(i);
    a.node = node.info().name;
    a.gpus = p->gpus;
    a.unknown_gpus = p->dra_gpus;
    a.milli_per_gpu = req.milli_per_gpu;
    if (!scratch.add(a).isOk()) break;
    fit.sets.push_back(p->gpus);
    fit.dra_gpus = p->dra_gpus;
  }
  return fit;
}

// The node's domain at `level`; "" when it has no such label (or levels are not recorded).
std::string_view domainAt(const model::NodeState& node, size_t level) {
  const std::vector<std::string>& domains = node.info().topology_domains;
  return level < domains.size() ? std::string_view(domains[level]) : std::string_view();
}

// Nodes that share a domain at one level, with what they can take now.
struct Group {
  std::string name;  // the domain; "" gathers the nodes without the label
  std::vector<const NodeFit*> fits;
  int members = 0;
  int64_t used_milli = 0;
  int free_gpus = 0;
};

// Groups `fits` by their domain at `level`. Nodes without the label are left out when
// `labelled_only` (they are in no domain of a required level); otherwise they form one group
// "" that is only split further down, by the levels they do have, so a cluster without zone
// labels is still packed by block and rack.
std::vector<Group> groupBy(const std::vector<const NodeFit*>& fits, size_t level, bool labelled_only) {
  std::map<std::string_view, Group> by_domain;
  for (const NodeFit* f : fits) {
    std::string_view domain = domainAt(*f->node, level);
    if (domain.empty() && labelled_only) continue;
    Group& g = by_domain[domain];
    g.name = std::string(domain);
    g.fits.push_back(f);
  }
  std::vector<Group> out;
  out.reserve(by_domain.size());
  for (auto& [domain, g] : by_domain) out.push_back(std::move(g));
  for (Group& g : out) {
    for (const NodeFit* f : g.fits) {
      g.members += static_cast<int>(f->sets.size());
      g.used_milli += f->used_milli;
      g.free_gpus += f->node->wholeFreeCount();
    }
  }
  return out;
}

// Among groups that can each hold what is left: the best-fitting one (fewest free GPUs, so
// larger groups stay whole for larger gangs), then the fuller one, then by name.
bool fitsBetter(const Group& a, const Group& b) {
  if (a.name.empty() != b.name.empty()) return b.name.empty();  // nodes of unknown place last
  if (a.free_gpus != b.free_gpus) return a.free_gpus < b.free_gpus;
  if (a.used_milli != b.used_milli) return a.used_milli > b.used_milli;
  return a.name < b.name;
}

// While no group holds what is left: the one that takes the most members (so the gang spans
// the fewest), then the fuller one, then by name.
bool takesMore(const Group& a, const Group& b) {
  if (a.name.empty() != b.name.empty()) return b.name.empty();
  if (a.members != b.members) return a.members > b.members;
  if (a.used_milli != b.used_milli) return a.used_milli > b.used_milli;
  return a.name < b.name;
}

// The groups `need` members go to, with how many each takes: the biggest ones while none holds
// the rest, then the best-fitting one that does.
std::vector<std::pair<const Group*, int>> chooseGroups(const std::vector<Group>& groups, int need) {
  std::vector<std::pair<const Group*, int>> out;
  std::vector<bool> taken(groups.size(), false);
  for (int left = need; left > 0;) {
    const Group* pick = nullptr;
    size_t at = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (!taken[i] && groups[i].members >= left && (!pick || fitsBetter(groups[i], *pick))) {
        pick = &groups[i];
        at = i;
      }
    }
    for (size_t i = 0; !pick && i < groups.size(); ++i) {
      if (taken[i] || groups[i].members == 0) continue;
      size_t best = i;
      for (size_t j = i + 1; j < groups.size(); ++j) {
        if (!taken[j] && groups[j].members > 0 && takesMore(groups[j], groups[best])) best = j;
      }
      pick = &groups[best];
      at = best;
    }
    if (!pick) break;
    taken[at] = true;
    const int share = std::min(left, pick->members);
    out.emplace_back(pick, share);
    left -= share;
  }
  return out;
}

// The nodes `need` members fill, in order: top-down from `level`, through the domains
// chooseGroups() picks at each level, down to the nodes themselves, picked the same way.
void packOrder(const std::vector<const NodeFit*>& fits, size_t level, size_t levels, int need,
               std::vector<const NodeFit*>* out) {
  std::vector<Group> groups;
  if (level >= levels) {
    for (const NodeFit* f : fits) {
      groups.push_back(Group{f->node->info().name,
                             {f},
                             static_cast<int>(f->sets.size()),
                             f->used_milli,
                             f->node->wholeFreeCount()});
    }
  } else {
    groups = groupBy(fits, level, /*labelled_only=*/false);
  }
  for (const auto& [group, share] : chooseGroups(groups, need)) {
    if (level >= levels) {
      out->push_back(group->fits.front());
    } else {
      packOrder(group->fits, level + 1, levels, share, out);
    }
  }
}

// What reasons call the level: its alias (nvlink-domain) or its short name.
std::string levelName(const std::vector<std::string>& levels, int level) {
  return model::levelDisplayName(levels[static_cast<size_t>(level)]);
}

// The nodes a gang could use: each one's fit for the members now, and what the matching nodes
// could hold when empty (in all and per domain of the required level).
struct GangSurvey {
  std::vector<NodeFit> fits;
  int64_t capacity_members = 0;                         // on empty matching nodes: can it ever fit?
  std::map<std::string_view, int64_t> domain_capacity;  // the same per domain of the required level
  std::map<std::string_view, int64_t> domain_gpus;      // and their GPUs, used or not
  std::map<std::string_view, int64_t> domain_free;      // and their whole free GPUs now
};

GangSurvey surveyNodes(const std::vector<const model::NodeState*>& nodes, const GpuRequest& req, int members,
                       int required) {
  GangSurvey s;
  s.fits.reserve(nodes.size());
  for (const model::NodeState* n : nodes) {
    if (n->info().unschedulable) continue;
    if (fitOf(findMisfit(*n, req)) == Fit::kNever) continue;
    const int per_node = req.gpus > 0 ? n->gpuCount() / req.gpus : members;
    const int64_t capacity =
        req.shared() ? static_cast<int64_t>(n->gpuCount()) * (1000 / req.milli_per_gpu) : per_node;
    s.capacity_members += capacity;
    if (required >= 0) {
      if (std::string_view d = domainAt(*n, static_cast<size_t>(required)); !d.empty()) {
        s.domain_capacity[d] += capacity;
        s.domain_gpus[d] += n->gpuCount();
        s.domain_free[d] += n->wholeFreeCount();
      }
    }
    NodeFit f = fitMembers(*n, req, members);
    if (!f.sets.empty()) s.fits.push_back(std::move(f));
  }
  return s;
}

// A domain's value, 0 for a domain not in the map.
int64_t valueIn(const std::map<std::string_view, int64_t>& per_domain, std::string_view domain) {
  const auto it = per_domain.find(domain);
  return it == per_domain.end() ? int64_t{0} : it->second;
}

// Why the gang can never fit, even on empty nodes (in all, or in one domain of the required
// level); empty when it could.
std::string neverFitsReason(const GangSurvey& s, const GpuRequest& req, int members,
                            const std::string& gang_key, const std::vector<std::string>& levels,
                            int required) {
  if (s.capacity_members < members) {
    return "troupe: gang " + gang_key + " needs " + std::to_string(members) + " pods of " +
           std::to_string(req.gpus) + " GPUs, but the nodes that match its request can hold only " +
           std::to_string(s.capacity_members) + " even when empty";
  }
  if (required < 0) return "";
  int64_t largest = 0;
  std::string_view largest_domain;
  for (const auto& [domain, capacity] : s.domain_capacity) {
    if (capacity > largest) {
      largest = capacity;
      largest_domain = domain;
    }
  }
  if (largest >= members) return "";
  const std::string level = levelName(levels, required);
  return "troupe: gang " + gang_key + " needs " + std::to_string(members) + " pods of " +
         std::to_string(req.gpus) + " GPUs in one " + level + " (" + kAnnotationTopologyRequired + "=" +
         level + "), but " +
         (s.domain_capacity.empty()
              ? "no node that matches its request has the label " + levels[static_cast<size_t>(required)]
              : "the largest " + level + " can hold only " + std::to_string(largest) + " even when empty (" +
                    std::string(largest_domain) + ": " +
                    std::to_string(valueIn(s.domain_gpus, largest_domain)) + " matching GPUs)");
}

// The nodes in packing order within one domain of the wanted level, best-fitting first so
// larger domains stay whole for larger gangs; else one of a wider level, up to the required
// one. Empty when no such domain has room for every member now.
std::vector<const NodeFit*> domainOrder(const std::vector<const NodeFit*>& all, int members,
                                        const std::vector<std::string>& levels, int preferred, int required) {
  std::vector<const NodeFit*> order;
  const int start = preferred >= 0 ? preferred : required;
  const int stop = required >= 0 ? required : 0;
  for (int level = start; level >= stop && level >= 0 && order.empty(); --level) {
    std::vector<Group> groups = groupBy(all, static_cast<size_t>(level), /*labelled_only=*/true);
    const Group* best = nullptr;
    for (const Group& g : groups) {
      if (g.members >= members && (!best || fitsBetter(g, *best))) best = &g;
    }
    if (best) {
      packOrder(best->fits, static_cast<size_t>(level) + 1, levels.size(), members, &order);
    }
  }
  return order;
}

// The gang could fit one domain of the required level, but none has the room now: say how far
// the best one is.
std::string waitsForDomainReason(const GangSurvey& s, const std::vector<const NodeFit*>& all,
                                 const GpuRequest& req, int members, const std::string& gang_key,
                                 const std::vector<std::string>& levels, int required) {
  const std::string level = levelName(levels, required);
  std::vector<Group> groups = groupBy(all, static_cast<size_t>(required), /*labelled_only=*/true);
  const Group* best = nullptr;
  for (const Group& g : groups) {
    if (!best || g.members > best->members || (g.members == best->members && g.name < best->name)) best = &g;
  }
  const int have = best ? best->members : 0;
  return "troupe: gang " + gang_key + " waits for capacity in one " + level + " (" +
         kAnnotationTopologyRequired + "=" + level + "): " +
         (best ? "the best " + level + ", " + best->name + ", holds " + std::to_string(have) + " of " +
                     std::to_string(members) + " members now (" +
                     std::to_string(valueIn(s.domain_free, best->name)) + " GPUs free)"
               : "no " + level + " has room for a member now") +
         ", " + std::to_string((members - have) * std::max(1, req.gpus)) +
         " more GPUs must free up there (all-or-nothing)";
}

// One slot per member along the packing order; none, with the reason, when not all fit now.
void fillSlots(const std::vector<const NodeFit*>& order, const GpuRequest& req, int members,
               const std::string& gang_key, GangPlanResult* out) {
  int placed = 0;
  for (const NodeFit* f : order) {
    for (const std::vector<int>& set : f->sets) {
      if (placed == members) break;
      out->slots.push_back(GangSlot{f->node->info().name, set, "", f->dra_gpus});
      ++placed;
    }
    if (placed == members) break;
  }
  if (placed < members) {
    out->slots.clear();
    const int missing = (members - placed) * std::max(1, req.gpus);
    out->reason = "troupe: gang " + gang_key + " waits for capacity: " + std::to_string(placed) + " of " +
                  std::to_string(members) + " members fit now, " + std::to_string(missing) +
                  " more GPUs must free up (all-or-nothing)";
  }
}

}  // namespace

GangPlanResult planGang(const std::vector<const model::NodeState*>& nodes, const GpuRequest& req, int members,
                        const std::string& gang_key, const std::vector<std::string>& levels) {
  GangPlanResult out;
  if (members <= 0) return out;  // every member is bound already
  const int level_count = static_cast<int>(levels.size());
  const int required = req.topology_required < level_count ? req.topology_required : -1;
  const int preferred = req.topology_preferred < level_count ? req.topology_preferred : -1;

  const GangSurvey survey = surveyNodes(nodes, req, members, required);
  out.reason = neverFitsReason(survey, req, members, gang_key, levels, required);
  if (!out.reason.empty()) {
    out.never_fits = true;
    return out;
  }

  std::vector<const NodeFit*> all;
  all.reserve(survey.fits.size());
  for (const NodeFit& f : survey.fits) all.push_back(&f);
  std::vector<const NodeFit*> order = domainOrder(all, members, levels, preferred, required);
  if (order.empty() && required >= 0) {
    out.reason = waitsForDomainReason(survey, all, req, members, gang_key, levels, required);
    return out;
  }
  if (order.empty()) packOrder(all, 0, levels.size(), members, &order);
  fillSlots(order, req, members, gang_key, &out);
  return out;
}

}  // namespace troupe::sched
