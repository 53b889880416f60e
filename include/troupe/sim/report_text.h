// Text helpers the simulator's reports share: JSON strings and XML (SVG) text.
#pragma once

#include <string>

namespace troupe::sim {

// `s` as a JSON string literal, quotes included; control characters as \u00XX.
std::string jsonString(const std::string& s);
// `s` safe inside XML text and attribute values.
std::string xmlEscape(const std::string& s);

}  // namespace troupe::sim
