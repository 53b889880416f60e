// Status and Result<T>: the one error vocabulary of Troupe's core.
//
// The core never throws. A fallible function returns Status (no value) or Result<T>
// (a value or a Status). Messages are written for the person who must fix the input: they
// name the field, the bad value and what is expected.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace troupe {

enum class Code {
  kOk,
  kInvalidArgument,     // the caller's input is wrong (bad annotation, bad JSON, bad config)
  kNotFound,            // a named object does not exist (unknown node, unknown pod)
  kFailedPrecondition,  // the request is valid but the state does not allow it (GPUs taken)
  kUnavailable,         // a dependency is down (API server), retry later
  kDeadlineExceeded,    // a wait ran out (gang barrier)
  kInternal,            // a bug: an invariant broke
};

const char* codeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool isOk() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status invalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status notFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status failedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
inline Status unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status deadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
inline Status internalError(std::string m) { return {Code::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none. Check isOk() before value().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT: implicit by design

  bool isOk() const { return std::holds_alternative<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T& value() & { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  Status status() const { return isOk() ? Status::ok() : std::get<Status>(data_); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace troupe
