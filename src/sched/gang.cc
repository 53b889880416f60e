#include "troupe/sched/gang.h"

#include <cctype>

#include "troupe/common/strings.h"

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
  int v = 0;
  try {
    size_t used = 0;
    v = std::stoi(text, &used);
    if (used != text.size()) v = 0;
  } catch (...) {
    v = 0;
  }
  if (v < 1 || v > 100000) {
    return invalidArgument(std::string("annotation ") + key + "=\"" + text +
                           "\" is invalid: expected the number of members that must run together, "
                           "a whole number from 1 to 100000");
  }
  return v;
}

}  // namespace

Result<std::chrono::milliseconds> parseDuration(const std::string& text) {
  using std::chrono::milliseconds;
  std::string s(trim(text));
  if (s.empty()) return invalidArgument("empty duration; expected e.g. \"5m\", \"90s\" or \"1h30m\"");
  int64_t total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (start == i)
      return invalidArgument("\"" + text +
                             "\" is not a duration; expected e.g. \"5m\", \"90s\" or \"1h30m\"");
    double value = std::stod(s.substr(start, i - start));
    size_t unit_start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    std::string unit = s.substr(unit_start, i - unit_start);
    double ms_per = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60000 : unit == "h" ? 3600000 : -1;
    if (ms_per < 0) {
      return invalidArgument("\"" + text + "\" has unit \"" + unit +
                             "\"; expected ms, s, m or h (e.g. \"5m\")");
    }
    total += static_cast<int64_t>(value * ms_per);
  }
  return milliseconds(total);
}

namespace {

// The key that names the pod's gang and which one it was; nullptr when none.
const std::string* gangName(const PodFacts& pod, const char** source) {
  struct Key {
    const char* key;
    bool labels_first;
  };
  static constexpr Key kOrder[] = {
      {kGangName, false}, {kPodGroupLabel, true}, {kVolcanoGroup, false}, {kKueueGroup, true}};
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
  return lookup(pod, kPodGroupLabel, /*labels_first=*/true);
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
  if (pod_group.min_member && spec.source == kPodGroupLabel) {
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
    if (spec.source == kPodGroupLabel) {
      why += (pod_group.absent.empty() ? "no PodGroup was read" : pod_group.absent) +
             " and the pod has no annotation troupe.dev/gang-size; create PodGroup " + *name +
             " (scheduling.x-k8s.io/v1alpha1) with spec.minMember, or add troupe.dev/gang-size";
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
                             "\" is invalid: expected a positive duration such as \"5m\" or \"90s\"");
    }
    spec.timeout = d.value();
  }
  return std::optional<GangSpec>(spec);
}

}  // namespace troupe::sched
