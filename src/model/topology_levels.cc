#include "troupe/model/topology_levels.h"

#include <cctype>

#include "troupe/common/strings.h"

namespace troupe::model {
namespace {

bool labelNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// A Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63
// characters that starts and ends with a letter or digit.
bool validLabelKey(std::string_view key) {
  std::string_view name = key;
  if (size_t slash = key.rfind('/'); slash != std::string_view::npos) {
    std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 253) return false;
    for (char c : prefix) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.')) return false;
    }
  }
  if (name.empty() || name.size() > 63) return false;
  if (!std::isalnum(static_cast<unsigned char>(name.front())) ||
      !std::isalnum(static_cast<unsigned char>(name.back())))
    return false;
  for (char c : name) {
    if (!labelNameChar(c)) return false;
  }
  return true;
}

}  // namespace

const std::vector<std::string>& defaultTopologyLevels() {
  static const std::vector<std::string> levels{"topology.kubernetes.io/zone", "troupe.dev/block",
                                               "troupe.dev/rack"};
  return levels;
}

std::string_view levelShortName(std::string_view key) {
  size_t slash = key.rfind('/');
  return slash == std::string_view::npos ? key : key.substr(slash + 1);
}

std::string_view levelAlias(std::string_view key) {
  return key == kGpuCliqueLabel || key == kTopographAcceleratorLabel ? kNVLinkDomainAlias
                                                                     : std::string_view();
}

std::string levelDisplayName(std::string_view key) {
  std::string_view alias = levelAlias(key);
  return std::string(alias.empty() ? levelShortName(key) : alias);
}

int findTopologyLevel(const std::vector<std::string>& levels, std::string_view name) {
  std::string_view wanted = trim(name);
  for (size_t i = 0; i < levels.size(); ++i) {
    if (levels[i] == wanted) return static_cast<int>(i);
  }
  for (size_t i = 0; i < levels.size(); ++i) {
    if (equalsIgnoreCase(levelShortName(levels[i]), wanted)) return static_cast<int>(i);
  }
  for (size_t i = 0; i < levels.size(); ++i) {
    std::string_view alias = levelAlias(levels[i]);
    if (!alias.empty() && equalsIgnoreCase(alias, wanted)) return static_cast<int>(i);
  }
  return -1;
}

std::string describeTopologyLevels(const std::vector<std::string>& levels) {
  std::string out;
  for (const std::string& key : levels) {
    out += (out.empty() ? "" : ", ") + levelDisplayName(key) + " (" + key + ")";
  }
  return out;
}

std::vector<std::string> validateTopologyLevels(const std::vector<std::string>& levels) {
  std::vector<std::string> errors;
  for (size_t i = 0; i < levels.size(); ++i) {
    const std::string where = "levels[" + std::to_string(i) + "] \"" + levels[i] + "\"";
    if (!validLabelKey(levels[i])) {
      errors.push_back(where +
                       " is not a node label key; expected e.g. troupe.dev/rack or "
                       "topology.kubernetes.io/zone");
      continue;
    }
    for (size_t j = 0; j < i; ++j) {
      if (levels[j] == levels[i]) {
        errors.push_back(where + " is listed twice (also levels[" + std::to_string(j) + "])");
      } else if (equalsIgnoreCase(levelShortName(levels[j]), levelShortName(levels[i]))) {
        errors.push_back(where + " has the short name \"" + std::string(levelShortName(levels[i])) +
                         "\" of levels[" + std::to_string(j) + "] \"" + levels[j] +
                         "\"; pods name levels by it, so it must be unique");
      }
      if (levels[j] == levels[i]) continue;
      const std::string_view alias_i = levelAlias(levels[i]);
      const std::string_view alias_j = levelAlias(levels[j]);
      if (!alias_i.empty() && alias_i == alias_j) {
        errors.push_back(where + " and levels[" + std::to_string(j) + "] \"" + levels[j] +
                         "\" are both the " + std::string(alias_i) +
                         " level; pods name it by that alias, so keep one of them");
      } else if ((!alias_j.empty() && equalsIgnoreCase(levelShortName(levels[i]), alias_j)) ||
                 (!alias_i.empty() && equalsIgnoreCase(levelShortName(levels[j]), alias_i))) {
        const size_t plain = alias_j.empty() ? j : i;
        errors.push_back(where + " and levels[" + std::to_string(j) + "] \"" + levels[j] +
                         "\" both answer to \"" + std::string(levelShortName(levels[plain])) +
                         "\" (a short name and an alias); pods name levels by it, so it must be unique");
      }
    }
  }
  return errors;
}

}  // namespace troupe::model
