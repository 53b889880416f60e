// What a thread entry or a request boundary does with an exception it did not expect: log it,
// count it (troupe_internal_errors_total{where}) and carry on, instead of letting it end the
// process. Every thread Troupe starts runs its work through guarded(); the HTTP server counts
// the exceptions its handlers throw with where="http".
//
// Adapters take an InternalErrors (a counting function) rather than the metrics class, so
// they stay testable without Prometheus and the app decides where the count goes.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "adapters/common/logger.h"

namespace troupe::adapters {

// The `where` label values Troupe uses (a bounded set: never a pod or node name).
inline constexpr const char* kWhereWatch = "watch";                // a list/watch handler
inline constexpr const char* kWhereBinder = "binder";              // a binder worker's task
inline constexpr const char* kWhereEvents = "events";              // the Event poster
inline constexpr const char* kWhereHousekeeping = "housekeeping";  // the kube runtime's reconcile loop
inline constexpr const char* kWhereTicker = "ticker";              // the gang clock (Scheduler::tick)
inline constexpr const char* kWhereHttp = "http";                  // an extender request handler

class InternalErrors {
 public:
  using Count = std::function<void(const std::string& where)>;
  InternalErrors() = default;  // counts nowhere (tests, tools)
  explicit InternalErrors(Count count) : count_(std::move(count)) {}

  // Never throws: a sink that fails is ignored, it must not turn one error into a crash.
  void count(const std::string& where) const noexcept {
    if (!count_) return;
    try {
      count_(where);
    } catch (...) {
    }
  }

 private:
  Count count_;
};

// The message of the exception being handled; call only inside a catch block.
inline std::string currentExceptionMessage() noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    try {
      return e.what();
    } catch (...) {
      return {};
    }
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// Inside a catch block: logs the exception at error level, with `where` and `what` (the step
// that failed), and counts it. Never throws.
inline void reportInternalError(adapters::Logger& logger, const InternalErrors& errors,
                                const std::string& where, const std::string& what) noexcept {
  errors.count(where);
  try {
    logger.error("internal error: caught an exception, carrying on",
                 {{"where", where}, {"during", what}, {"error", currentExceptionMessage()}});
  } catch (...) {
  }
}

// Runs `fn`; an exception is reported (reportInternalError) instead of escaping. True when
// `fn` returned normally.
template <class F>
bool guarded(adapters::Logger& logger, const InternalErrors& errors, const std::string& where,
             const std::string& what, F&& fn) noexcept {
  try {
    std::forward<F>(fn)();
    return true;
  } catch (...) {
    reportInternalError(logger, errors, where, what);
    return false;
  }
}

}  // namespace troupe::adapters
