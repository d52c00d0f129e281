// Wall time of each stage of a compile (specialize, partition, the lowering
// stages, LLVM), as every room of lowering/ reports it to jit/'s statistics.
//
// Thread-safety: plain values.
#pragma once

#include <string>
#include <vector>

namespace kiln::lowering {

/// Wall time of one compile stage.
struct StageTime {
  std::string stage;
  double ms = 0;
};
using StageTimes = std::vector<StageTime>;

}  // namespace kiln::lowering
