#include "troupe/common/strings.h"

#include <cctype>

namespace troupe {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string> splitList(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view part = trim(s.substr(start, end - start));
    if (!part.empty()) out.emplace_back(part);
    start = end + 1;
  }
  return out;
}

std::string joinList(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

Result<std::vector<std::vector<std::string>>> parseMatrixText(std::string_view text) {
  const auto fail = [](const std::string& why) {
    return invalidArgument(
        "expected a JSON array of rows of strings such as "
        "[[\"X\",\"NV18\"],[\"NV18\",\"X\"]]: " +
        why);
  };
  std::vector<std::vector<std::string>> rows;
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  skip();
  if (i >= text.size() || text[i] != '[') return fail("missing outer '['");
  ++i;
  skip();
  bool closed = false;
  while (i < text.size()) {
    skip();
    if (i >= text.size()) break;  // only whitespace left: reported as a missing ']'
    if (text[i] == ']') {
      ++i;
      closed = true;
      break;
    }
    if (text[i] == ',' && !rows.empty()) {
      ++i;
      skip();
    }
    if (i >= text.size() || text[i] != '[') return fail("each row must be an array");
    ++i;
    std::vector<std::string> row;
    while (true) {
      skip();
      if (i >= text.size()) return fail("unterminated row");
      if (text[i] == ']') {
        ++i;
        break;
      }
      if (text[i] == ',' && !row.empty()) {
        ++i;
        skip();
      }
      if (i >= text.size() || text[i] != '"') return fail("each cell must be a string");
      size_t end = text.find('"', i + 1);
      if (end == std::string_view::npos) return fail("unterminated string");
      row.emplace_back(text.substr(i + 1, end - i - 1));
      i = end + 1;
    }
    rows.push_back(std::move(row));
  }
  if (!closed) return fail("missing closing ']'");
  skip();
  if (i != text.size()) return fail("trailing characters");
  return rows;
}

}  // namespace troupe
