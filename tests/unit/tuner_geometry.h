// The slot geometry the tuner tests price: 512 KiB chunks, 128 KiB slots (the defaults).
#pragma once

#include <cstddef>

namespace gyre::test {
inline constexpr size_t kChunk = 512 * 1024;
inline constexpr size_t kSlot = 128 * 1024;
}  // namespace gyre::test
