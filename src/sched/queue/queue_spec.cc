#include "troupe/sched/queue/queue_spec.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string_view>

#include "troupe/sched/cluster/gpu_amount.h"

namespace troupe::sched {
namespace {

// A DNS-1123 subdomain, as Kubernetes validates the names of cluster-scoped objects.
bool isDnsSubdomain(const std::string& name) {
  auto alnum = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  if (name.empty() || name.size() > 253) return false;
  for (size_t start = 0; start <= name.size();) {
    size_t end = name.find('.', start);
    if (end == std::string::npos) end = name.size();
    const std::string_view label(name.data() + start, end - start);
    if (label.empty() || label.size() > 63 || !alnum(label.front()) || !alnum(label.back())) return false;
    for (char ch : label) {
      if (!alnum(ch) && ch != '-') return false;
    }
    start = end + 1;
  }
  return true;
}

std::string queueText(const std::string& name) { return "queue \"" + name + "\""; }

std::string numberText(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string productText(const std::string& product) {
  return product.empty() ? "GPUs of nodes without a product label" : product;
}

// The first problem with one queue's own fields (not its parent), or "" when there is none.
std::string ownFieldError(const QueueSpec& q) {
  const std::string who = queueText(q.name);
  if (!isDnsSubdomain(q.name)) {
    return who +
           ": name is not a DNS-1123 subdomain: use lower-case letters, digits, '-' and '.', starting and "
           "ending with a letter or digit, at most 253 characters (e.g. team-a)";
  }
  if (!std::isfinite(q.weight) || q.weight <= 0) {
    return who + ": weight " + numberText(q.weight) + " is invalid: set a positive number (e.g. 1)";
  }
  auto checkAmounts = [&](const GpuQuota& quota, const char* field) -> std::string {
    if (quota.milli && *quota.milli < 0) {
      return who + ": " + field + ".gpus " + gpusText(*quota.milli) + " is negative: set 0 or more GPUs";
    }
    for (const auto& [product, milli] : quota.product_milli) {
      if (milli < 0) {
        return who + ": " + field + " for " + productText(product) + " " + gpusText(milli) +
               " is negative: set 0 or more GPUs";
      }
    }
    return "";
  };
  if (std::string e = checkAmounts(q.guaranteed, "guaranteed"); !e.empty()) return e;
  if (std::string e = checkAmounts(q.limit, "limit"); !e.empty()) return e;
  // guaranteed <= limit: in all, per product, and no product's guarantee above the limit in all.
  if (q.guaranteed.milli && q.limit.milli && *q.guaranteed.milli > *q.limit.milli) {
    return who + ": guaranteed.gpus " + gpusText(*q.guaranteed.milli) + " is above limit.gpus " +
           gpusText(*q.limit.milli) + ": lower the guarantee or raise the limit";
  }
  for (const auto& [product, milli] : q.guaranteed.product_milli) {
    if (auto lim = q.limit.product_milli.find(product);
        lim != q.limit.product_milli.end() && milli > lim->second) {
      return who + ": guaranteed " + gpusText(milli) + " " + productText(product) +
             " is above its limit of " + gpusText(lim->second) + ": lower the guarantee or raise the limit";
    }
    if (q.limit.milli && milli > *q.limit.milli) {
      return who + ": guaranteed " + gpusText(milli) + " " + productText(product) + " is above limit.gpus " +
             gpusText(*q.limit.milli) + ": lower the guarantee or raise the limit";
    }
  }
  return "";
}

// The children's guarantees must fit in the parent's where the parent sets one; "" when they do.
std::string childGuaranteeError(const QueueSpec& parent, const std::vector<const QueueSpec*>& kids) {
  if (parent.guaranteed.milli) {
    int64_t sum = 0;
    for (const QueueSpec* k : kids) sum += k->guaranteed.milli.value_or(0);
    if (sum > *parent.guaranteed.milli) {
      return queueText(parent.name) + ": guaranteed.gpus " + gpusText(*parent.guaranteed.milli) +
             " is less than its children guarantee together (" + gpusText(sum) +
             "): raise the parent's guarantee or lower the children's";
    }
  }
  for (const auto& [product, milli] : parent.guaranteed.product_milli) {
    int64_t sum = 0;
    for (const QueueSpec* k : kids) {
      if (auto it = k->guaranteed.product_milli.find(product); it != k->guaranteed.product_milli.end()) {
        sum += it->second;
      }
    }
    if (sum > milli) {
      return queueText(parent.name) + ": guaranteed " + gpusText(milli) + " " + productText(product) +
             " is less than its children guarantee together (" + gpusText(sum) +
             "): raise the parent's guarantee or lower the children's";
    }
  }
  return "";
}

}  // namespace

QueueTree QueueTree::build(std::vector<QueueSpec> specs, std::string default_queue) {
  QueueTree tree;
  tree.default_queue_ = std::move(default_queue);
  if (specs.empty()) return tree;

  // Duplicated names: neither definition is used (which one was meant is not ours to guess).
  std::map<std::string, int> seen;
  for (const QueueSpec& q : specs) ++seen[q.name];
  if (!seen.count(tree.default_queue_)) {
    QueueSpec implicit;
    implicit.name = tree.default_queue_;
    specs.push_back(implicit);
    seen[implicit.name] = 1;
  }

  std::map<std::string, const QueueSpec*> candidates;
  for (const QueueSpec& q : specs) {
    if (seen[q.name] > 1) {
      tree.invalid_[q.name] = queueText(q.name) + ": name is defined " + std::to_string(seen[q.name]) +
                              " times: keep one definition";
      continue;
    }
    if (std::string e = ownFieldError(q); !e.empty()) {
      tree.invalid_[q.name] = e;
      continue;
    }
    if (!q.parent.empty() && q.parent == q.name) {
      tree.invalid_[q.name] = queueText(q.name) + ": parent \"" + q.parent +
                              "\" is the queue itself: name another "
                              "queue or leave parent empty";
      continue;
    }
    candidates[q.name] = &q;
  }

  // Parents: each must exist and be valid, with no cycle. Repeats until nothing changes, so a
  // failure propagates down the whole subtree.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = candidates.begin(); it != candidates.end();) {
      const QueueSpec& q = *it->second;
      std::string error;
      if (!q.parent.empty() && !candidates.count(q.parent)) {
        if (auto bad = tree.invalid_.find(q.parent); bad != tree.invalid_.end()) {
          error = queueText(q.name) + ": parent \"" + q.parent + "\" is not used (" + bad->second + ")";
        } else {
          error = queueText(q.name) + ": parent \"" + q.parent +
                  "\" does not exist: create that queue or leave parent empty";
        }
      }
      if (error.empty()) {
        // A cycle: walking up from q comes back to q before reaching a top-level queue.
        std::set<std::string> path{q.name};
        for (const QueueSpec* up = &q; !up->parent.empty();) {
          auto p = candidates.find(up->parent);
          if (p == candidates.end()) break;
          if (!path.insert(p->first).second) {
            error = queueText(q.name) + ": parent \"" + q.parent +
                    "\" leads to a cycle of parents: make one of those queues top-level";
            break;
          }
          up = p->second;
        }
      }
      if (!error.empty()) {
        tree.invalid_[q.name] = error;
        it = candidates.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    if (changed) continue;
    // Guarantees: a parent whose children guarantee more than it does fails (and so its subtree).
    std::map<std::string, std::vector<const QueueSpec*>> kids;
    for (const auto& [name, q] : candidates) {
      if (!q->parent.empty()) kids[q->parent].push_back(q);
    }
    for (const auto& [parent, list] : kids) {
      if (std::string e = childGuaranteeError(*candidates.at(parent), list); !e.empty()) {
        tree.invalid_[parent] = e;
        candidates.erase(parent);
        changed = true;
      }
    }
  }

  // Parent-before-child: level by level, names sorted within a level (the map's order).
  std::vector<std::string> level;
  for (const auto& [name, q] : candidates) {
    if (q->parent.empty()) level.push_back(name);
  }
  while (!level.empty()) {
    std::vector<std::string> next;
    for (const std::string& name : level) {
      tree.index_[name] = tree.queues_.size();
      tree.queues_.push_back(*candidates.at(name));
      tree.children_[candidates.at(name)->parent].push_back(name);
    }
    for (const auto& [name, q] : candidates) {
      if (!q->parent.empty() && tree.index_.count(q->parent) && !tree.index_.count(name))
        next.push_back(name);
    }
    level = std::move(next);
  }
  return tree;
}

QueueTree QueueTree::build(std::vector<QueueSpec> specs, std::map<std::string, std::string> undecodable,
                           std::string default_queue) {
  // Each undecodable queue takes part as a placeholder the checks refuse (weight 0), so that its
  // children fail as children of an unused parent; then its own error replaces the
  // placeholder's, in its entry and in its children's.
  for (const auto& [name, error] : undecodable) {
    QueueSpec placeholder;
    placeholder.name = name;
    placeholder.weight = 0;
    specs.push_back(std::move(placeholder));
  }
  QueueTree tree = build(std::move(specs), std::move(default_queue));
  for (const auto& [name, error] : undecodable) {
    auto own = tree.invalid_.find(name);
    if (own == tree.invalid_.end()) continue;
    const std::string placeholder_error = own->second;
    own->second = error;
    for (auto& [other, message] : tree.invalid_) {
      if (other == name) continue;
      for (size_t at = message.find(placeholder_error); at != std::string::npos;
           at = message.find(placeholder_error, at + error.size())) {
        message.replace(at, placeholder_error.size(), error);
      }
    }
  }
  return tree;
}

const QueueSpec* QueueTree::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &queues_[it->second];
}

std::vector<std::string> QueueTree::children(const std::string& name) const {
  auto it = children_.find(name);
  return it == children_.end() ? std::vector<std::string>{} : it->second;
}

std::vector<std::string> QueueTree::lineage(const std::string& name) const {
  std::vector<std::string> out;
  for (const QueueSpec* q = find(name); q; q = q->parent.empty() ? nullptr : find(q->parent)) {
    out.push_back(q->name);
  }
  return out;
}

}  // namespace troupe::sched
