// The elementwise unit's integer operations every Ethos-U product computes alike, on 32-bit
// values: ABS, CLZ and SHL (whose shift amount saturates to 0..31).
#pragma once

#include <algorithm>
#include <cstdint>

namespace cascader::sim {

inline int64_t abs_value(int64_t a) { return a < 0 ? -a : a; }

inline int64_t count_leading_zeros32(int64_t a) {
  const uint32_t u = static_cast<uint32_t>(a);
  return u == 0 ? 32 : __builtin_clz(u);
}

inline int64_t shift_left32(int64_t a, int64_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) << std::clamp<int64_t>(b, 0, 31));
}

}  // namespace cascader::sim
