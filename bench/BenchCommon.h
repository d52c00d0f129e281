// Helpers shared by kiln's benchmarks.
#pragma once

#include "api/Kiln.h"
#include "runtime/MachinePeak.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace kiln::bench {

/// A runtime without the disk cache (so first calls really compile), with
/// optional per-op placement ("*=kernel", ...).
inline std::unique_ptr<Runtime> makeRuntime(const char *opModes = "", int threads = 0) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.threads = threads;
  if (*opModes) o.placement = llvm::cantFail(ops::parseOpModes(opModes));
  return llvm::cantFail(Runtime::create(o));
}

/// One such runtime per benchmark binary.
inline Runtime &sharedRuntime() {
  static std::unique_ptr<Runtime> rt = makeRuntime();
  return *rt;
}

/// One core's fp32 FMA peak (runtime/MachinePeak.h).
inline double measureFmaPeakGflops(int maxVectorBits = 0) { return kiln::measureFmaPeakGflops(maxVectorBits); }

}  // namespace kiln::bench
