// Small helpers the multi-rank tests share for looking at failures.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"

namespace gyre::test {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs body and returns the Failure it threw (Code::success if none).
inline Status failureOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const Failure& f) {
    return f.status();
  }
  return {};
}

}  // namespace gyre::test
