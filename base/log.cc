#include "base/log.h"

#include <unistd.h>

#include <strings.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gyre {

namespace {
LogLevel parseLevel() {
  const char* v = std::getenv("GYRE_DEBUG");
  if (!v || !*v) return LogLevel::warn;
  if (!strcasecmp(v, "ERROR")) return LogLevel::error;
  if (!strcasecmp(v, "INFO")) return LogLevel::info;
  if (!strcasecmp(v, "TRACE")) return LogLevel::trace;
  return LogLevel::warn;
}
}  // namespace

LogLevel logLevel() {
  static const LogLevel level = parseLevel();
  return level;
}

bool logEnabled(LogLevel level) {
  return level <= logLevel();
}

void logLine(LogLevel level, const std::string& message) {
  static const char* names[] = {"ERROR", "WARN", "INFO", "TRACE"};
  // One write per line so lines of concurrent ranks do not interleave.
  std::string line = "gyre " + std::string(names[int(level)]) + " [pid " +
                     std::to_string(getpid()) + "] " + message + "\n";
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, line.data(), line.size());
}

std::string pointerText(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

}  // namespace gyre
