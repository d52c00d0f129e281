// Writing a handwritten kernel for kiln: register it for an op and every
// runtime in the process places that op on it (auto mode: when MLIR has no
// lowering for the op, e.g. a "tosa.custom:domain.name" op; kernel mode: on
// request), in graphs and in eager dispatch alike.
//
//   llvm::Expected<std::vector<TensorType>> shape(ArrayRef<TensorType> in, const AttrMap &);
//   llvm::Error compute(const KernelArgs &args);   // writes args.outputs
//   kiln::registerKernel({"tosa.custom:acme.swish", "avx2", &shape, &compute});
//
// A kernel may be registered for some dtypes only (KernelDef::dtypes, by the
// first operand's dtype), beside an op's general kernel: it then runs those
// uses (`{"tosa.add", "fp16_fma", &shape, &compute, {DType::f16}}` is named
// add_f16_fp16_fma), and the general kernel the rest.
//
// The shape function is shared by graph placement (it must agree with the
// graph's types) and eager dispatch (it types the result). Kernels run on the
// runtime's executor (KernelArgs::executor) and must be thread-safe.
#pragma once

#include "kernels/KernelRegistry.h"

namespace kiln {

using kernels::ComputeFn;
using kernels::KernelArgs;
using kernels::KernelDef;
using kernels::ShapeFn;

/// Registers `def` process-wide. Errors (kInvalidArgument): a missing field,
/// a name that is not an op, a second general kernel for an op, or a dtype
/// another kernel of the op is registered for.
llvm::Error registerKernel(KernelDef def);

}  // namespace kiln
