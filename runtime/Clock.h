// Wall-clock helpers for stage timings.
#pragma once

#include <chrono>

namespace kiln {
using Clock = std::chrono::steady_clock;
inline double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace kiln
