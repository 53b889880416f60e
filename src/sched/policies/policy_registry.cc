#include "troupe/sched/policies/policy_registry.h"

#include <algorithm>

#include "troupe/common/strings.h"

namespace troupe::sched {

Status PolicyRegistry::add(PolicyEntry entry) {
  if (entry.name.empty()) return invalidArgument("a policy needs a name");
  if (!entry.make) return invalidArgument("policy \"" + entry.name + "\" has no factory");
  const bool taken = std::any_of(entries_.begin(), entries_.end(),
                                 [&](const PolicyEntry& e) { return e.name == entry.name; });
  if (taken) return invalidArgument("policy \"" + entry.name + "\" is already registered");
  entries_.push_back(std::move(entry));
  return Status::ok();
}

Result<PolicyPtr> PolicyRegistry::create(std::string_view name, const PolicyArgs& args) const {
  for (const PolicyEntry& e : entries_) {
    if (e.name == name) return e.make(args);
  }
  return invalidArgument("unknown policy \"" + std::string(name) + "\"; expected one of " +
                         joinList(names(), ", "));
}

std::vector<std::string> PolicyRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const PolicyEntry& e : entries_) out.push_back(e.name);
  return out;
}

}  // namespace troupe::sched
