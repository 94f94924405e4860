// gyre-run's placement: which CPUs each local rank is bound to.
#include <doctest/doctest.h>

#include "tools/run/launcher.h"

using gyre::run::rankCpus;
using Cpus = std::vector<std::vector<int>>;

TEST_CASE("gyre-run binds each rank to its own equal share of the CPUs it may use") {
  CHECK(rankCpus("auto", 2, {0, 1}) == Cpus{{0}, {1}});
  CHECK(rankCpus("auto", 2, {0, 1, 2, 3, 4, 5, 6, 7}) == Cpus{{0, 1, 2, 3}, {4, 5, 6, 7}});
  // A share is whole CPUs; the remainder stays unused rather than shared unevenly.
  CHECK(rankCpus("auto", 3, {0, 1, 2, 3, 4, 5, 6}) == Cpus{{0, 1}, {2, 3}, {4, 5}});
  // Only the CPUs gyre-run itself was given (taskset, cgroups), in their order.
  CHECK(rankCpus("auto", 2, {2, 5, 9, 11}) == Cpus{{2, 5}, {9, 11}});
}

TEST_CASE("with more ranks than CPUs, consecutive ranks share one CPU in even blocks") {
  CHECK(rankCpus("auto", 4, {0, 1}) == Cpus{{0}, {0}, {1}, {1}});
  CHECK(rankCpus("auto", 8, {0, 1}) == Cpus{{0}, {0}, {0}, {0}, {1}, {1}, {1}, {1}});
  CHECK(rankCpus("auto", 3, {0, 1}) == Cpus{{0}, {0}, {1}});
  CHECK(rankCpus("auto", 5, {0, 1, 2, 3}) == Cpus{{0}, {0}, {1}, {2}, {3}});
  CHECK(rankCpus("auto", 4, {3, 7}) == Cpus{{3}, {3}, {7}, {7}});
}

TEST_CASE("gyre-run leaves placement alone where binding cannot help") {
  CHECK(rankCpus("auto", 1, {0, 1}).empty());        // one rank: nothing to separate
  CHECK(rankCpus("auto", 4, {0}).empty());           // one CPU: nothing to choose
  CHECK(rankCpus("none", 2, {0, 1, 2, 3}).empty());  // asked not to
  CHECK(rankCpus("none", 4, {0, 1}).empty());
  CHECK(rankCpus("auto", 2, {}).empty());  // affinity unknown
}
