// Status crosses threads by value; Failure carries it up the calling thread's stack until
// the API boundary turns it into a gyreResult_t (C) or gyre::Error (C++).
#pragma once

#include <exception>
#include <string>

namespace gyre {

enum class Code : int {
  success = 0,
  invalid_argument = 1,
  invalid_usage = 2,
  system_error = 3,
  remote_error = 4,
  timeout = 5,
  aborted = 6,
  internal = 7,
};

const char* codeName(Code code);

struct Status {
  Code code = Code::success;
  std::string message;
  // The rank whose loss this failure is (it exited, was killed or became unreachable), where
  // a rank noticed one; -1 otherwise. Errors name it first.
  int lostRank = -1;

  bool ok() const { return code == Code::success; }
};

class Failure : public std::exception {
 public:
  explicit Failure(Status status) : status_(std::move(status)) {}
  Failure(Code code, std::string message) : status_{code, std::move(message)} {}
  const char* what() const noexcept override { return status_.message.c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

[[noreturn]] inline void fail(Code code, std::string message) {
  throw Failure(code, std::move(message));
}

// errno text for messages, thread-safe.
std::string errnoText(int err);

}  // namespace gyre
