// Structured logs: one JSON object per line on stderr, e.g.
//   {"ts":"2026-11-29T23:59:01.123Z","level":"info","msg":"filter","pod":"ml/a","passed":3}
// Owned by the app and handed to whoever logs; writes are serialised by its own lock.
#pragma once

#include <initializer_list>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>

namespace troupe::adapters {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

class Logger {
 public:
  using Field = std::pair<std::string, std::string>;
  Logger(std::ostream& out, LogLevel level) : out_(out), level_(level) {}

  void log(LogLevel level, const std::string& msg, std::initializer_list<Field> fields = {});
  void debug(const std::string& m, std::initializer_list<Field> f = {}) { log(LogLevel::kDebug, m, f); }
  void info(const std::string& m, std::initializer_list<Field> f = {}) { log(LogLevel::kInfo, m, f); }
  void warn(const std::string& m, std::initializer_list<Field> f = {}) { log(LogLevel::kWarn, m, f); }
  void error(const std::string& m, std::initializer_list<Field> f = {}) { log(LogLevel::kError, m, f); }
  bool enabled(LogLevel level) const { return level >= level_; }

 private:
  std::ostream& out_;
  LogLevel level_;
  std::mutex mu_;
};

bool parseLogLevel(const std::string& text, LogLevel* level);

}  // namespace troupe::adapters
