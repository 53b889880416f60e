#include "troupe/sched/gang/gang.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "troupe/common/strings.h"
#include "troupe/model/pod_contract.h"
#include "troupe/model/topology_levels.h"

namespace troupe::sched {
namespace {

const std::string* lookup(const PodFacts& pod, const char* key, bool labels_first = false) {
  const StringMap& first = labels_first ? pod.labels : pod.annotations;
  const StringMap& second = labels_first ? pod.annotations : pod.labels;
  if (auto it = first.find(key); it != first.end() && !it->second.empty()) return &it->second;
  if (auto it = second.find(key); it != second.end() && !it->second.empty()) return &it->second;
  return nullptr;
}

Result<int> positiveInt(const std::string& text, const char* key) {
  // Digits only: no sign, space or exponent (std::from_chars never throws and checks range).
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || text[0] == '-' || ec != std::errc() || end != text.data() + text.size() || v < 1 ||
      v > 100000) {
    return invalidArgument(std::string("annotation ") + key + "=\"" + text +
                           "\" is invalid: expected the number of members that must run together, "
                           "a whole number from 1 to 100000");
  }
  return v;
}

}  // namespace

Result<std::chrono::milliseconds> parseDuration(const std::string& text) {
  using std::chrono::milliseconds;
  const std::string_view s = trim(text);
  const auto notDuration = [&] {
    return invalidArgument("\"" + text + "\" is not a duration; expected e.g. \"5m\", \"90s\" or \"1h30m\"");
  };
  const auto tooLong = [&] {
    return invalidArgument("\"" + text + "\" is longer than the longest duration Troupe takes, " +
                           std::to_string(kMaxDuration.count() / 3600000) + "h (100 years)");
  };
  if (s.empty()) return invalidArgument("empty duration; expected e.g. \"5m\", \"90s\" or \"1h30m\"");
  int64_t total = 0;
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (start == i) return notDuration();
    // Pod-controlled text: parsed without exceptions ("." or 400 digits are errors here).
    double value = 0;
    const auto [end, ec] = std::from_chars(s.data() + start, s.data() + i, value, std::chars_format::fixed);
    if (ec == std::errc::result_out_of_range && end == s.data() + i) {
      // Too large, or so small that it underflows (a fraction of a millisecond: 0).
      const std::string_view whole = s.substr(start, std::min(i, s.find('.', start)) - start);
      if (whole.find_first_not_of('0') != std::string_view::npos) return tooLong();
      value = 0;
    } else if (ec != std::errc() || end != s.data() + i || !std::isfinite(value)) {
      return notDuration();
    }
    const size_t unit_start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    const std::string_view unit = s.substr(unit_start, i - unit_start);
    const double ms_per = unit == "ms"  ? 1
                          : unit == "s" ? 1000
                          : unit == "m" ? 60000
                          : unit == "h" ? 3600000
                                        : -1;
    if (ms_per < 0) {
      return invalidArgument("\"" + text + "\" has unit \"" + std::string(unit) +
                             "\"; expected ms, s, m or h (e.g. \"5m\")");
    }
    // Range-checked in double before the conversion, and the sum checked as well: every step
    // stays far inside int64 (and so does now() + the duration in nanoseconds).
    const double ms = value * ms_per;
    if (ms > static_cast<double>(kMaxDuration.count())) return tooLong();
    int64_t sum = 0;
    if (__builtin_add_overflow(total, static_cast<int64_t>(ms), &sum) || sum > kMaxDuration.count()) {
      return tooLong();
    }
    total = sum;
  }
  return milliseconds(total);
}

namespace {

// The key that names the pod's gang and which one it was; nullptr when none.
const std::string* gangName(const PodFacts& pod, const char** source) {
  // Troupe's own key first: the user wrote it for Troupe. With WorkloadWithJob (1.36+) the Job
  // controller gives every Job's pods a native PodGroup, `basic` unless the Job asks for a gang,
  // which would otherwise silently undo the Job's troupe.dev/gang.
  if (const std::string* name = lookup(pod, kGangName, /*labels_first=*/false)) {
    *source = kGangName;
    return name;
  }
  // Kubernetes' own gang: the pod's spec names it, and it wins over every other label.
  if (!pod.scheduling_group.empty()) {
    *source = kSchedulingGroup;
    return &pod.scheduling_group;
  }
  struct Key {
    const char* key;
    bool labels_first;
  };
  static constexpr Key kOrder[] = {{kPodGroupLabel, true}, {kVolcanoGroup, false}, {kKueueGroup, true}};
  for (const Key& k : kOrder) {
    if (const std::string* name = lookup(pod, k.key, k.labels_first)) {
      *source = k.key;
      return name;
    }
  }
  return nullptr;
}

}  // namespace

std::string gangKeyOf(const PodFacts& pod) {
  const char* source = nullptr;
  const std::string* name = gangName(pod, &source);
  return name ? pod.ns + "/" + *name : std::string();
}

const std::string* podGroupName(const PodFacts& pod) {
  if (!pod.scheduling_group.empty()) return nullptr;
  return lookup(pod, kPodGroupLabel, /*labels_first=*/true);
}

PodGroupInfo podGroupsUnread() {
  return PodGroupInfo{std::nullopt, "Troupe does not read PodGroups without the Kubernetes API"};
}

PodGroupInfo podGroupFor(const PodFacts& pod, const PodGroupLookup& lookup, const PodGroupLookup& native) {
  if (sched::lookup(pod, kGangName, /*labels_first=*/false)) return {};  // troupe.dev/gang wins
  if (!pod.scheduling_group.empty()) {
    if (!native) return podGroupsUnread();
    return native(pod.ns, pod.scheduling_group);
  }
  const std::string* name = podGroupName(pod);
  if (!name) return {};
  if (!lookup) return podGroupsUnread();
  return lookup(pod.ns, *name);
}

Result<std::optional<GangSpec>> parseGang(const PodFacts& pod, std::chrono::milliseconds default_timeout,
                                          const PodGroupInfo& pod_group) {
  GangSpec spec;
  const char* source = nullptr;
  const std::string* name = gangName(pod, &source);
  if (!name) return std::optional<GangSpec>();
  spec.source = source;
  spec.key = pod.ns + "/" + *name;

  const std::string* size = lookup(pod, kGangSize);
  const std::string* total = spec.source == kKueueGroup ? lookup(pod, kKueueTotal) : nullptr;
  const bool native = spec.source == kSchedulingGroup;
  if (native && !pod_group.composite_parent.empty()) {
    // Placing each child PodGroup as a gang of its own would split what the user asked to run
    // together: refused, with the two ways to run it today.
    return invalidArgument(
        "pod is in PodGroup " + spec.key + ", a child of CompositePodGroup " + pod_group.composite_parent +
        " (spec.parentCompositePodGroupName; multi-level gangs, scheduling.k8s.io/v1alpha3): "
        "Troupe does not place multi-level gangs yet and would split it; remove "
        "spec.parentCompositePodGroupName to make PodGroup " +
        *name +
        " a gang of its own, or give all of the composite's pods annotations "
        "troupe.dev/gang and troupe.dev/gang-size to make them one gang");
  }
  if (native && pod_group.basic) return std::optional<GangSpec>();  // a group, but not a gang
  if (native) {
    spec.topology_key = pod_group.topology_key;
    spec.priority = pod_group.priority;
  }
  if (pod_group.min_member && (native || spec.source == kPodGroupLabel)) {
    spec.min_member = *pod_group.min_member;  // the PodGroup object is the source of truth
  } else if (size) {
    Result<int> v = positiveInt(*size, kGangSize);
    if (!v.isOk()) return v.status();
    spec.min_member = v.value();
  } else if (total) {
    Result<int> v = positiveInt(*total, kKueueTotal);
    if (!v.isOk()) return v.status();
    spec.min_member = v.value();
  } else if (pod_group.min_member) {
    spec.min_member = *pod_group.min_member;
  } else {
    std::string why =
        "pod is in gang " + spec.key + " (" + spec.source + ") but Troupe cannot tell its size: ";
    if (native || spec.source == kPodGroupLabel) {
      // The PodGroup's API and the field that holds the minimum.
      const std::string object = native ? "(scheduling.k8s.io) with spec.schedulingPolicy.gang.minCount"
                                        : "(scheduling.x-k8s.io/v1alpha1) with spec.minMember";
      why += (pod_group.absent.empty() ? "no PodGroup was read" : pod_group.absent) +
             " and the pod has no annotation troupe.dev/gang-size; create PodGroup " + *name + " " + object +
             ", or add troupe.dev/gang-size";
    } else {
      why += "add annotation troupe.dev/gang-size with the number of members that must run together";
    }
    return invalidArgument(why);
  }

  spec.timeout = default_timeout;
  if (const std::string* t = lookup(pod, kGangTimeout)) {
    Result<std::chrono::milliseconds> d = parseDuration(*t);
    if (!d.isOk() || d.value().count() <= 0) {
      return invalidArgument(std::string("annotation ") + kGangTimeout + "=\"" + *t +
                             "\" is invalid: " + (d.isOk() ? std::string() : d.status().message() + "; ") +
                             "expected a positive duration such as \"5m\" or \"90s\"");
    }
    spec.timeout = d.value();
  }
  return std::optional<GangSpec>(spec);
}

Result<int> gangTopologyLevel(const GangSpec& spec, const std::vector<std::string>& levels) {
  if (spec.topology_key.empty()) return -1;
  const std::string what = "PodGroup " + spec.key + " asks for topology key \"" + spec.topology_key +
                           "\" (spec.schedulingConstraints.topology[0].key)";
  if (levels.empty()) {
    return invalidArgument(what +
                           " but Troupe has no network topology levels configured (topology.levels in "
                           "its config is empty); add the key to topology.levels or drop the constraint");
  }
  const int level = model::findTopologyLevel(levels, spec.topology_key);
  if (level < 0) {
    return invalidArgument(what + ", which is not one of the configured topology levels (topology.levels: " +
                           model::describeTopologyLevels(levels) +
                           "); add it to topology.levels or use one of those keys");
  }
  return level;
}

}  // namespace troupe::sched
