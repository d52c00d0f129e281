// What the host and NVPTX code generators share: LLVM's optimization levels,
// the IR verifier as a kiln error, and LLVM's default per-module pipeline
// run with a target machine's own passes. Knows no ops or graphs.
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CodeGen.h"
#include "llvm/Support/Error.h"

#include <string>

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

/// The backend level for kiln's 0..3.
llvm::CodeGenOptLevel backendLevel(int optLevel);
/// Bounds the time LLVM's instruction schedulers take on large basic blocks
/// (call once, before code generation): generated kernels are long blocks of
/// vector loads, stores and FMAs, and with LLVM's defaults the post-RA list
/// scheduler and the machine scheduler's dependence graph grow quadratically
/// in them (a depthwise conv's kernel spent 6 of its 6.1 s of codegen there).
/// Turns the post-RA scheduler off and sets the dependence graph's "huge
/// region" to 200 memory operations; options given on LLVM's own command
/// line win. Returns the settings, for cache keys.
std::string boundSchedulingTime();
/// The module's IR is valid, or a kCompileFailed error saying `what` made it.
llvm::Error verifyIR(llvm::Module &module, const char *what);
/// LLVM's default per-module pipeline at `optLevel` (0..3), with `tm`'s
/// passes (NVVMReflect on NVPTX, ...); without LLVM's loop vectorizer when
/// `loopVectorize` is false.
void optimizeIR(llvm::Module &module, llvm::TargetMachine &tm, int optLevel, bool loopVectorize = true);
/// `tm`'s backend run on `module`: an object file or assembly text
/// (`what` names the output in the error when the target cannot make it).
llvm::Expected<llvm::SmallVector<char, 0>> emitCode(llvm::Module &module, llvm::TargetMachine &tm,
                                                   llvm::CodeGenFileType type, const char *what);

}  // namespace kiln::codegen
