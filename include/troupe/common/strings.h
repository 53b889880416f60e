// Small string helpers shared by the core and the adapters.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "troupe/common/status.h"

namespace troupe {

std::string_view trim(std::string_view s);
// Splits on `sep`, trims each part, drops empty parts.
std::vector<std::string> splitList(std::string_view s, char sep);
std::string joinList(const std::vector<std::string>& parts, std::string_view sep);
bool equalsIgnoreCase(std::string_view a, std::string_view b);

// Reads a JSON array of arrays of strings, e.g. [["X","NV18"],["NV18","X"]] (the link
// matrix of the troupe.dev/gpu-topology node annotation) without a JSON library.
Result<std::vector<std::vector<std::string>>> parseMatrixText(std::string_view text);

}  // namespace troupe
