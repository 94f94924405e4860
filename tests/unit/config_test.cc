// Settings from the environment: GYRE_TIMEOUT is read in seconds, and a value gyre cannot
// honour is refused instead of becoming something else.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "base/status.h"
#include "runtime/core/config.h"

using namespace gyre;

namespace {

struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST_CASE("config: GYRE_TIMEOUT in seconds; below a millisecond, zero or garbage refused") {
  {
    ScopedEnv e("GYRE_TIMEOUT", "2.5");
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.timeout == std::chrono::milliseconds(2500));
  }
  {
    ScopedEnv e("GYRE_TIMEOUT", "0.001");
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.timeout == std::chrono::milliseconds(1));
  }
  for (const char* bad : {"0.0001", "0", "-1", "x", "1s", "1e9"}) {
    const std::string value = bad;
    CAPTURE(value);
    ScopedEnv e("GYRE_TIMEOUT", bad);
    CommConfig c;
    try {
      applyTuningEnv(c);
      FAIL("accepted");
    } catch (const Failure& f) {
      CHECK(f.status().code == Code::invalid_argument);
      CHECK(f.status().message.find(std::string("GYRE_TIMEOUT='") + bad + "'") !=
            std::string::npos);
    }
  }
}

TEST_CASE("config: GYRE_TCP_TIMEOUT in whole seconds, 0 for the system's; default 6 s") {
  {
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.tcpTimeout == std::chrono::seconds(6));
  }
  {
    ScopedEnv e("GYRE_TCP_TIMEOUT", "0");
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.tcpTimeout.count() == 0);
  }
  {
    ScopedEnv e("GYRE_TCP_TIMEOUT", "20");
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.tcpTimeout == std::chrono::seconds(20));
  }
  for (const char* bad : {"-1", "1.5", "x"}) {
    ScopedEnv e("GYRE_TCP_TIMEOUT", bad);
    CommConfig c;
    CHECK_THROWS_AS(applyTuningEnv(c), Failure);
  }
}
