// A Runtime shared by the tests of one binary (creating the JIT is not free).
#pragma once

#include "api/Kiln.h"
#include "tests/TestUtil.h"

namespace kiln::test {

/// One Runtime per test binary (creating the JIT is not free). Placement
/// by measurement is off: `auto` keeps every lowerable op on generated
/// code, which is what these tests check (PlacementTest measures).
inline Runtime &sharedRuntime() {
  static std::unique_ptr<Runtime> rt = [] {
    RuntimeOptions options;
    options.cacheMode = CacheMode::kOff;  // hermetic: no disk cache
    options.placement.measure = false;
    auto r = Runtime::create(options);
    if (!r) {
      ADD_FAILURE() << llvm::toString(r.takeError());
      std::abort();
    }
    return std::move(*r);
  }();
  return *rt;
}

}  // namespace kiln::test
