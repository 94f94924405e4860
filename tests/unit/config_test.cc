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

TEST_CASE("config: GYRE_PLACEMENT_PROBE_MS in whole milliseconds, 0 for set-up only; 10 ms") {
  {
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.placementProbe == std::chrono::milliseconds(10));
  }
  for (const auto& [text, ms] : {std::pair{"0", 0}, std::pair{"250", 250}}) {
    ScopedEnv e("GYRE_PLACEMENT_PROBE_MS", text);
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.placementProbe == std::chrono::milliseconds(ms));
  }
  for (const char* bad : {"-1", "2.5", "soon"}) {
    ScopedEnv e("GYRE_PLACEMENT_PROBE_MS", bad);
    CommConfig c;
    CHECK_THROWS_AS(applyTuningEnv(c), Failure);
  }
}

TEST_CASE("config: GYRE_SLOT_STORES is auto, cached or streaming; auto by default") {
  {
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.slotStores == CommConfig::SlotStores::automatic);
  }
  for (const auto& [text, stores] : {std::pair{"auto", CommConfig::SlotStores::automatic},
                                     std::pair{"cached", CommConfig::SlotStores::cached},
                                     std::pair{"streaming", CommConfig::SlotStores::streaming}}) {
    ScopedEnv e("GYRE_SLOT_STORES", text);
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.slotStores == stores);
    CHECK(std::string(slotStoresName(stores)) == text);
  }
  for (const char* bad : {"Auto", "nt", "streaming "}) {
    ScopedEnv e("GYRE_SLOT_STORES", bad);
    CommConfig c;
    CHECK_THROWS_AS(applyTuningEnv(c), Failure);
  }
}

TEST_CASE("config: GYRE_SLOT_SPREAD is auto, on or off; auto by default") {
  {
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.slotSpread == CommConfig::SlotSpread::automatic);
  }
  for (const auto& [text, spread] : {std::pair{"auto", CommConfig::SlotSpread::automatic},
                                     std::pair{"on", CommConfig::SlotSpread::on},
                                     std::pair{"off", CommConfig::SlotSpread::off}}) {
    ScopedEnv e("GYRE_SLOT_SPREAD", text);
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.slotSpread == spread);
    CHECK(std::string(slotSpreadName(spread)) == text);
  }
  for (const char* bad : {"1", "yes", "On"}) {
    ScopedEnv e("GYRE_SLOT_SPREAD", bad);
    CommConfig c;
    CHECK_THROWS_AS(applyTuningEnv(c), Failure);
  }
}

TEST_CASE("config: GYRE_TUNE is measure or model; measure by default") {
  {
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.tune == CommConfig::Tune::measure);
  }
  for (const auto& [text, tune] : {std::pair{"measure", CommConfig::Tune::measure},
                                   std::pair{"model", CommConfig::Tune::model}}) {
    ScopedEnv e("GYRE_TUNE", text);
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.tune == tune);
    CHECK(std::string(tuneName(tune)) == text);
  }
  for (const char* bad : {"1", "auto", "Measure"}) {
    ScopedEnv e("GYRE_TUNE", bad);
    CommConfig c;
    CHECK_THROWS_AS(applyTuningEnv(c), Failure);
  }
}

TEST_CASE("config: Slurm's first node of a node list") {
  CHECK(firstSlurmHost("vm") == "vm");
  CHECK(firstSlurmHost("node[01-04,07],gpu5") == "node01");
  CHECK(firstSlurmHost("node[7,3-4]") == "node7");
  CHECK(firstSlurmHost("rack[2-3]-n[10-12]-ib,x") == "rack2-n10-ib");
  CHECK(firstSlurmHost("a,b[1-2]") == "a");
  CHECK_THROWS_AS(firstSlurmHost("node[1-2"), Failure);
}

TEST_CASE("config: under srun, rank, size, job and rendezvous come from Slurm") {
  ScopedEnv procId("SLURM_PROCID", "3");
  ScopedEnv tasks("SLURM_STEP_NUM_TASKS", "4");
  ScopedEnv ntasks("SLURM_NTASKS", "8");  // the allocation's; the step's wins
  ScopedEnv job("SLURM_JOB_ID", "123456");
  ScopedEnv step("SLURM_STEP_ID", "2");
  ScopedEnv nodes("SLURM_STEP_NODELIST", "gpu[07-08]");
  {
    const CommConfig c = configFromEnv();
    CHECK(c.rank == 3);
    CHECK(c.nranks == 4);
    CHECK(c.jobId == "slurm-123456.2");
    CHECK(c.rendezvous.empty());
    CHECK(c.hostAddress == "gpu07:" + std::to_string(slurmRendezvousPort(123456, 2)));
    CHECK(slurmRendezvousPort(123456, 2) == 24562);
  }
  {
    ScopedEnv port("MASTER_PORT", "29400");
    CHECK(configFromEnv().hostAddress == "gpu07:29400");
  }
  {
    ScopedEnv rendezvous("GYRE_RENDEZVOUS", "10.0.0.1:5000");
    const CommConfig c = configFromEnv();
    CHECK(c.rendezvous == "10.0.0.1:5000");
    CHECK(c.hostAddress.empty());
  }
  {
    ScopedEnv torchRank("RANK", "1");  // torchrun inside an allocation: torch's variables
    ScopedEnv worldSize("WORLD_SIZE", "2");
    const CommConfig c = configFromEnv();
    CHECK(c.rank == 1);
    CHECK(c.nranks == 2);
  }
}

TEST_CASE("config: GYRE_NET_GBITS, a link rate in Gbit/s") {
  {
    ScopedEnv e("GYRE_NET_GBITS", "2.5");
    CommConfig c;
    applyTuningEnv(c);
    CHECK(c.netGbits == 2.5);
  }
  for (const char* bad : {"0", "-1", "fast", "1e9"}) {
    ScopedEnv e("GYRE_NET_GBITS", bad);
    CommConfig c;
    CHECK_THROWS_AS(applyTuningEnv(c), Failure);
  }
}
