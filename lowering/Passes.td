//===- Passes.td - kiln's own MLIR passes ------------------*- tablegen -*-===//
// One pass per file in lowering/; see each file's header for what it rewrites.
#ifndef KILN_LOWERING_PASSES
#define KILN_LOWERING_PASSES

include "mlir/Pass/PassBase.td"

def KilnSpecializeShapes : Pass<"kiln-specialize-shapes", "mlir::ModuleOp"> {
  let summary = "Specialize one function to static argument shapes and infer the rest";
  let description = [{
    Keeps only `function` (renamed to `kiln_fn`, public) and what it calls,
    sets its argument types to `shapes`, propagates the shapes through TOSA
    and linalg ops, and sets the result types to the inferred static types.
    Fails, naming the result, when a result shape cannot be inferred.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"main\"", "function to specialize">,
    Option<"shapes", "shapes", "std::string", "\"\"",
           "comma-separated argument types, e.g. 1x8x8x3xf32,4xi32">,
  ];
}

def KilnHoistConstants : Pass<"kiln-hoist-constants", "mlir::ModuleOp"> {
  let summary = "Turn large constants (weights) into function arguments";
  let description = [{
    In every public func.func, replaces `tosa.const` / `arith.constant` ops
    whose value is a `dense_resource` or a non-splat dense attribute with at
    least `min-elements` elements by a new trailing function argument. The
    argument carries the value in its `kiln.weight` attribute so the runtime
    can own it as a buffer; identical values share one argument.
  }];
  let options = [
    Option<"minElements", "min-elements", "int64_t", "16",
           "smallest non-splat constant that is hoisted">,
  ];
}

def KilnEntryWrapper : Pass<"kiln-entry-wrapper", "mlir::ModuleOp"> {
  let summary = "Add `kiln_entry(ptr args)` calling the public llvm.func";
  let description = [{
    After lowering with the bare-pointer memref calling convention, the single
    public `llvm.func` takes one pointer per buffer. This pass adds
    `llvm.func @kiln_entry(%args: !llvm.ptr)` that loads pointer i from
    `args[i]` and calls it, so the runtime can call any compiled function
    through one C signature: `void kiln_entry(void **buffers)`.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif
