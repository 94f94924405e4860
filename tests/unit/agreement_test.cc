// What every rank of a communicator must agree on: its encoding survives the store, and each
// difference is named with the setting to make equal.
#include <doctest/doctest.h>

#include "runtime/core/agreement.h"

using namespace gyre;

namespace {
CommConfig fourRanks() {
  CommConfig c;
  c.nranks = 4;
  return c;
}
bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("an agreement survives its encoding, among a peer's other lines") {
  CommConfig c = fourRanks();
  c.nSlots = 16;
  c.slotBytes = 4096;
  c.algorithm = "ring";
  c.channels = 3;
  c.netGbits = 25;
  const Agreement a = Agreement::of(c);
  const Agreement b = Agreement::decode(a.encode() + "rank=2\nhost=h\npart.tcp=1.2.3.4:5\n");
  CHECK(b.nranks == 4);
  CHECK(b.nSlots == 16);
  CHECK(b.slotBytes == 4096);
  CHECK(b.algorithm == "ring");
  CHECK(b.channels == 3);
  CHECK(b.netGbits == a.netGbits);
  CHECK(a.differenceFrom(b, 2, "rank 0").empty());
}

TEST_CASE("unset and auto algorithms agree") {
  CommConfig unset = fourRanks(), automatic = fourRanks();
  automatic.algorithm = "auto";
  CHECK(Agreement::of(unset).differenceFrom(Agreement::of(automatic), 1, "rank 0").empty());
}

TEST_CASE("an agreement from another version, or garbled, says so") {
  const Agreement mine = Agreement::of(fourRanks());
  const std::string full = mine.encode();
  // The format before the algorithm settings joined it: three lines.
  const Agreement older =
      Agreement::decode("agree.nranks=4\nagree.slots=8\nagree.slotBytes=131072\n");
  CHECK(older.nranks == -1);
  CHECK(mine.differenceFrom(older, 3, "rank 0") == "rank 3 runs another gyre version");
  const std::string garbled =
      "agree.nranks=4\nagree.slots=x\nagree.slotBytes=131072\nagree.algorithm=auto\n"
      "agree.channels=0\nagree.netGbits=10.000000\n";
  CHECK(Agreement::decode(full).nranks == 4);
  CHECK(Agreement::decode(garbled).nranks == -1);
  CHECK(Agreement::decode("").nranks == -1);
}

TEST_CASE("each difference names the rank, both values and the setting") {
  const CommConfig base = fourRanks();
  const Agreement mine = Agreement::of(base);
  // What rank 0 says of rank r whose configuration is base changed by `change`.
  const auto differenceWith = [&](int r, auto change) {
    CommConfig c = base;
    change(c);
    return mine.differenceFrom(Agreement::of(c), r, "rank 0");
  };
  CHECK(has(differenceWith(2, [](CommConfig& c) { c.nranks = 3; }),
            "rank 2 says the communicator has 3 ranks, rank 0 says 4"));
  std::string what = differenceWith(1, [](CommConfig& c) { c.slotBytes = 4096; });
  CHECK(has(what, "rank 1 has 8 slots of 4096 bytes per link, rank 0 has 8 of 131072"));
  CHECK(has(what, "GYRE_SLOT_BYTES"));
  CHECK(differenceWith(1, [](CommConfig& c) { c.algorithm = "ring"; }) ==
        "rank 1 has algorithm ring, rank 0 has auto (GYRE_ALGO or the config's "
        "algorithm must be the same on every rank)");
  CHECK(has(differenceWith(3, [](CommConfig& c) { c.channels = 2; }),
            "rank 3 has GYRE_CHANNELS=2, rank 0 has 0"));
  what = differenceWith(1, [](CommConfig& c) { c.netGbits = 100; });
  CHECK(has(what, "rank 1 prices the network at 100.000000 Gbit/s, rank 0 at 10.000000"));
  CHECK(has(what, "GYRE_NET_GBITS"));
  CHECK(differenceWith(1, [](CommConfig& c) { c.slotStores = CommConfig::SlotStores::cached; }) ==
        "rank 1 has GYRE_SLOT_STORES=cached, rank 0 has auto (it prices the slots: it must be "
        "the same on every rank)");
}
