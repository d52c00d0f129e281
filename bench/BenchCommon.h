// Helpers shared by kiln's benchmarks.
#pragma once

#include "api/Kiln.h"

namespace kiln::bench {

/// A runtime without the disk cache (so first calls really compile), with
/// optional per-op placement ("*=kernel", ...).
inline std::unique_ptr<Runtime> makeRuntime(const char *opModes = "") {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  if (*opModes) o.placement = llvm::cantFail(ops::parseOpModes(opModes));
  return llvm::cantFail(Runtime::create(o));
}

/// One such runtime per benchmark binary.
inline Runtime &sharedRuntime() {
  static std::unique_ptr<Runtime> rt = makeRuntime();
  return *rt;
}

}  // namespace kiln::bench
