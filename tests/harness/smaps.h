// This process's memory mappings as /proc/self/smaps lists them: what is mapped of each
// (tools/bench/smaps.h, which gyre-bench reads too).
#pragma once

#include "tools/bench/smaps.h"

namespace gyre::test {

using bench::Mapping;
using bench::mappings;

}  // namespace gyre::test
