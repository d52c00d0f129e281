// The execution plan (lowering/graph/Plan.h) as JSON, the form disk-cache entries
// store it in. Reading checks every id, kind and type: a bad plan is an error,
// never a crash.
#pragma once

#include "lowering/graph/Plan.h"

#include "llvm/Support/Error.h"

#include <string>

namespace kiln::jit {

std::string planToJson(const lowering::ExecPlan &plan);
llvm::Expected<lowering::ExecPlan> planFromJson(llvm::StringRef json);

}  // namespace kiln::jit
