// Text helpers the simulator's reports share: JSON strings and XML (SVG) text.
#pragma once

#include <cstddef>
#include <string>

namespace troupe::sim {

// `s` as a JSON string literal, quotes included; control characters as \u00XX.
std::string jsonString(const std::string& s);
// `s` safe inside XML text and attribute values.
std::string xmlEscape(const std::string& s);
// `v` with `digits` decimals.
std::string fixed(double v, int digits);
// `s` padded with spaces to `width`, on the left when `right` (right-aligned).
std::string pad(std::string s, size_t width, bool right = false);

}  // namespace troupe::sim
