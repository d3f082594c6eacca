// Errors as values at library boundaries (LLVM's Error/Expected habit), and one
// exception type for the places where C++ callers expect exceptions (the VM).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace stowage {

// What kind of failure; tools map kinds to exit codes (bad input = 2, runtime = 1).
enum class ErrorKind {
  kInvalidInput,  // malformed text, file, argument: the caller's input is wrong
  kVerify,        // a well-formed program that breaks a rule of the IR
  kUnsupported,   // the chosen device or target lacks what the program needs
  kRuntime,       // a failure while running (OpenCL status, capacity, ...)
  kIo,            // a file could not be read or written
};

class Error {
 public:
  Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  // Bad input (text, files, arguments, verification) versus a run-time failure.
  bool is_input_error() const {
    return kind_ == ErrorKind::kInvalidInput || kind_ == ErrorKind::kVerify || kind_ == ErrorKind::kIo;
  }

 private:
  ErrorKind kind_;
  std::string message_;
};

// The exception form of Error, thrown by the VM and the C++ embedding API.
class StowageError : public std::runtime_error {
 public:
  explicit StowageError(Error error) : std::runtime_error(error.message()), error_(std::move(error)) {}
  StowageError(ErrorKind kind, const std::string& message) : StowageError(Error(kind, message)) {}
  const Error& error() const { return error_; }
  ErrorKind kind() const { return error_.kind(); }

 private:
  Error error_;
};

// A value or the Error that prevented it.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}          // NOLINT(implicit)
  Expected(Error error) : state_(std::move(error)) {}      // NOLINT(implicit)
  explicit operator bool() const { return state_.index() == 0; }
  bool has_value() const { return state_.index() == 0; }
  T& operator*() & { return std::get<0>(state_); }
  const T& operator*() const& { return std::get<0>(state_); }
  T* operator->() { return &std::get<0>(state_); }
  const T* operator->() const { return &std::get<0>(state_); }
  T take() { return std::move(std::get<0>(state_)); }
  const Error& error() const { return std::get<1>(state_); }
  // Returns the value or throws the error as StowageError.
  T value_or_throw() && {
    if (!has_value()) throw StowageError(error());
    return std::move(std::get<0>(state_));
  }

 private:
  std::variant<T, Error> state_;
};

// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT(implicit)
  static Status ok() { return Status(); }
  explicit operator bool() const { return !error_.has_value(); }
  bool is_ok() const { return !error_.has_value(); }
  const Error& error() const { return *error_; }
  void throw_if_error() const {
    if (error_) throw StowageError(*error_);
  }

 private:
  std::optional<Error> error_;
};

}  // namespace stowage

// Returns the Status of `expr` from the enclosing function when it is an error;
// the enclosing function returns Status or Expected<T>.
#define STOWAGE_TRY(expr)                                             \
  do {                                                                \
    if (::stowage::Status status_ = (expr); !status_) return status_.error(); \
  } while (0)

// Declares or assigns `lhs` from the value of the Expected<T> `expr`, or returns its
// Error from the enclosing function (which returns Status or Expected<U>):
//   STOWAGE_TRY_ASSIGN(const ScopeDesc* scope, find_scope(name));
#define STOWAGE_TRY_ASSIGN(lhs, expr) STOWAGE_TRY_ASSIGN_IMPL(STOWAGE_CONCAT(expected_, __LINE__), lhs, expr)
#define STOWAGE_TRY_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                            \
  if (!tmp) return tmp.error();                 \
  lhs = tmp.take()
#define STOWAGE_CONCAT(a, b) STOWAGE_CONCAT_IMPL(a, b)
#define STOWAGE_CONCAT_IMPL(a, b) a##b
