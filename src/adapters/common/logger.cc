#include "adapters/common/logger.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

namespace troupe::adapters {
namespace {

std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "info";
}

}  // namespace

void Logger::log(LogLevel level, const std::string& msg, std::initializer_list<Field> fields) {
  if (!enabled(level)) return;
  nlohmann::ordered_json line;
  line["ts"] = timestamp();
  line["level"] = levelName(level);
  line["msg"] = msg;
  for (const Field& f : fields) line[f.first] = f.second;
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::lock_guard lock(mu_);
  out_ << text << '\n';
  out_.flush();
}

bool parseLogLevel(const std::string& text, LogLevel* level) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (text == levelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

}  // namespace troupe::adapters
