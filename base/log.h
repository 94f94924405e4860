// Leveled logging to stderr. GYRE_DEBUG=WARN (default), INFO or TRACE. A leaf: every layer
// may use it.
#pragma once

#include <string>

namespace gyre {

enum class LogLevel { error = 0, warn = 1, info = 2, trace = 3 };

LogLevel logLevel();
bool logEnabled(LogLevel level);
void logLine(LogLevel level, const std::string& message);
// "0x7f12345678" for log lines and errors.
std::string pointerText(const void* p);

}  // namespace gyre

#define GYRE_LOG(level, message)                           \
  do {                                                     \
    if (::gyre::logEnabled(::gyre::LogLevel::level)) {     \
      ::gyre::logLine(::gyre::LogLevel::level, (message)); \
    }                                                      \
  } while (0)
