// The one collective plan: what planCollective makes of a call, and the part of the buffers
// each channel takes (the same for the host collectives and the collective kernel).
#include <doctest/doctest.h>

#include <vector>

#include "algorithms/collective.h"
#include "algorithms/peer_recorder.h"
#include "runtime/core/plan.h"

using namespace gyre;

TEST_CASE("plan: algorithms a collective lacks fall back to its ring; steps from the links") {
  const PlanShape shape{8, 1024, 4};  // 8 slots of 1 KiB: 256 floats a slot, 1024 a chunk
  auto algo = [&](Collective coll, Algorithm chosen) {
    return planCollective(coll, DataType::f32, 4096, 0, chosen, shape).algorithm;
  };
  CHECK(algo(Collective::all_reduce, Algorithm::tree) == Algorithm::tree);
  CHECK(algo(Collective::all_reduce, Algorithm::doubling) == Algorithm::doubling);
  CHECK(algo(Collective::all_gather, Algorithm::doubling) == Algorithm::doubling);
  CHECK(algo(Collective::all_gather, Algorithm::tree) == Algorithm::ring);
  CHECK(algo(Collective::broadcast, Algorithm::tree) == Algorithm::tree);
  CHECK(algo(Collective::broadcast, Algorithm::doubling) == Algorithm::ring);
  CHECK(algo(Collective::reduce_scatter, Algorithm::tree) == Algorithm::ring);
  CHECK(algo(Collective::all_to_all, Algorithm::ring) == Algorithm::pairwise);
  CHECK(algo(Collective::barrier, Algorithm::ring) == Algorithm::dissemination);
  const CollectivePlan p =
      planCollective(Collective::all_reduce, DataType::f64, 4096, -1, Algorithm::ring, shape);
  CHECK(p.slotElems == 128);
  CHECK(p.chunkElems == 512);
  CHECK(p.ahead == 3);
  CHECK(p.count == 4096);
  CHECK(p.root == -1);
  // The relayed tree is a tree broadcast's alone.
  PlanShape relayed = shape;
  relayed.relayed = true;
  auto relays = [&](Collective coll, Algorithm chosen) {
    return planCollective(coll, DataType::f32, 4096, 0, chosen, relayed).relayed;
  };
  CHECK(relays(Collective::broadcast, Algorithm::tree));
  CHECK_FALSE(relays(Collective::broadcast, Algorithm::ring));
  CHECK_FALSE(relays(Collective::reduce, Algorithm::tree));
  CHECK_FALSE(planCollective(Collective::broadcast, DataType::f32, 4096, 0, Algorithm::tree, shape)
                  .relayed);
}

TEST_CASE("plan: rings split over channels, a slot of a step each at least; others use one") {
  const PlanShape shape{8, 1024, 4};
  auto channels = [&](Collective coll, uint64_t count, Algorithm chosen = Algorithm::ring) {
    return planCollective(coll, DataType::f32, count, 0, chosen, shape).channels;
  };
  CHECK(channels(Collective::all_reduce, 0) == 1);
  CHECK(channels(Collective::all_reduce, 255) == 1);
  CHECK(channels(Collective::all_reduce, 512) == 2);
  CHECK(channels(Collective::all_reduce, 1 << 20) == 4);  // at most shape.maxChannels
  CHECK(channels(Collective::all_gather, 1 << 20) == 4);
  CHECK(channels(Collective::reduce_scatter, 768) == 3);
  CHECK(channels(Collective::broadcast, 1 << 20) == 4);
  CHECK(channels(Collective::all_reduce, 1 << 20, Algorithm::tree) == 1);
  CHECK(channels(Collective::all_reduce, 1 << 20, Algorithm::doubling) == 1);
  CHECK(channels(Collective::reduce, 1 << 20) == 1);
  CHECK(channels(Collective::gather, 1 << 20) == 1);
  CHECK(channels(Collective::all_to_all, 1 << 20) == 1);
}

TEST_CASE("plan: channel parts cover the buffers once; roots alone have root-only buffers") {
  std::vector<float> send(1000), recv(4000);
  const PlanShape shape{8, 1024, 3};
  const CollectivePlan ar =
      planCollective(Collective::all_reduce, DataType::f32, 1000, -1, Algorithm::ring, shape);
  REQUIRE(ar.channels == 3);
  uint64_t covered = 0;
  for (int c = 0; c < ar.channels; ++c) {
    const ChannelPart part = channelPart(ar, c, 1, send.data(), recv.data(), 4);
    CHECK(part.in == reinterpret_cast<const unsigned char*>(send.data() + covered));
    CHECK(part.out == reinterpret_cast<unsigned char*>(recv.data() + covered));
    covered += part.len;
  }
  CHECK(covered == 1000);
  for (Collective coll : {Collective::broadcast, Collective::scatter}) {
    const CollectivePlan p = planCollective(coll, DataType::f32, 100, 2, Algorithm::ring, shape);
    CHECK(channelPart(p, 0, 1, send.data(), recv.data(), 4).in == nullptr);
    CHECK(channelPart(p, 0, 2, send.data(), recv.data(), 4).in != nullptr);
    CHECK(channelPart(p, 0, 1, send.data(), recv.data(), 4).out != nullptr);
  }
  for (Collective coll : {Collective::reduce, Collective::gather}) {
    const CollectivePlan p = planCollective(coll, DataType::f32, 100, 2, Algorithm::ring, shape);
    CHECK(channelPart(p, 0, 1, send.data(), recv.data(), 4).out == nullptr);
    CHECK(channelPart(p, 0, 2, send.data(), recv.data(), 4).out != nullptr);
    CHECK(channelPart(p, 0, 1, send.data(), recv.data(), 4).in != nullptr);
  }
}

// Connections open in ascending rank order, each rank dialling the peers its algorithm names
// and waiting for the others: a rank that names a peer which does not name it back waits for
// ever. Every plan, count 0 included, must name its peers both ways.
TEST_CASE("plan: every algorithm names its peers both ways, for every count and root") {
  const Algorithm algorithms[] = {Algorithm::ring, Algorithm::tree, Algorithm::doubling,
                                  Algorithm::hierarchical};
  for (int n = 2; n <= 8; ++n) {
    for (int c = 0; c < kNumCollectives; ++c) {
      const auto coll = static_cast<Collective>(c);
      for (Algorithm chosen : algorithms) {
        for (uint64_t count : {0, 1, 7, 5000}) {
          for (int root = 0; root < n; ++root) {
            const int hosts = n % 2 == 0 ? 2 : 1;
            const PlanShape shape{4, 64, 1, hosts, n / hosts};
            const CollectivePlan plan =
                planCollective(coll, DataType::f32, count, root, chosen, shape);
            std::vector<std::vector<int>> peers;
            peers.resize(size_t(n));
            for (int r = 0; r < n; ++r) {
              PeerRecorder recorder;
              runChannel(recorder, plan, r, n, count);
              peers[size_t(r)] = recorder.peers();
            }
            for (int a = 0; a < n; ++a) {
              for (int b : peers[size_t(a)]) {
                CAPTURE(collectiveName(coll));
                CAPTURE(int(plan.algorithm));
                CAPTURE(n);
                CAPTURE(count);
                CAPTURE(root);
                CAPTURE(a);
                CAPTURE(b);
                const auto& back = peers[size_t(b)];
                CHECK(std::find(back.begin(), back.end(), a) != back.end());
              }
            }
          }
        }
      }
    }
  }
}
