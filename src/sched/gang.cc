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

Result<std::optional<GangSpec>> parseGang(const PodFacts& pod, std::chrono::milliseconds default_timeout,
                                          std::optional<int> pod_group_min) {
  GangSpec spec;
  const std::string* name = nullptr;
  if ((name = lookup(pod, kGangName))) {
    spec.source = kGangName;
  } else if ((name = lookup(pod, kPodGroupLabel, /*labels_first=*/true))) {
    spec.source = kPodGroupLabel;
  } else if ((name = lookup(pod, kVolcanoGroup))) {
    spec.source = kVolcanoGroup;
  } else if ((name = lookup(pod, kKueueGroup, /*labels_first=*/true))) {
    spec.source = kKueueGroup;
  } else {
    return std::optional<GangSpec>();
  }
  spec.key = pod.ns + "/" + *name;

  if (const std::string* size = lookup(pod, kGangSize)) {
    Result<int> v = positiveInt(*size, kGangSize);
    if (!v.isOk()) return v.status();
    spec.min_member = v.value();
  } else if (const std::string* total = lookup(pod, kKueueTotal); total && spec.source == kKueueGroup) {
    Result<int> v = positiveInt(*total, kKueueTotal);
    if (!v.isOk()) return v.status();
    spec.min_member = v.value();
  } else if (pod_group_min) {
    spec.min_member = *pod_group_min;
  } else {
    return invalidArgument("pod is in gang " + spec.key + " (" + spec.source +
                           ") but Troupe cannot tell its size: add annotation troupe.dev/gang-size "
                           "with the number of members that must run together");
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
