//===- graph/Passes.td - kiln's graph passes -*- tablegen -*-===//
// Graph passes on TOSA: rewrites at load, weight hoisting, shape specialization, placement and cluster outlining.
// One pass per file in this folder; see its header for what it rewrites.
#ifndef KILN_LOWERING_GRAPH_PASSES
#define KILN_LOWERING_GRAPH_PASSES

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
    Option<"convFiltersHWCF", "conv-filters-hwcf", "bool", "false",
           "store constant tosa.conv2d filters HWCF (read back through a tosa.transpose)">,
    Option<"convWinograd", "conv-winograd", "bool", "false",
           "store constant filters of 3x3 stride-1 tosa.conv2d Winograd-transformed (read back through tosa.custom kiln.winograd_filter)">,
    Option<"padWeightRows", "pad-weight-rows", "bool", "false",
           "store tosa.matmul B weights and HWCF conv filters with rows padded off multiples of 256 bytes (read back through tosa.slice)">,
    Option<"panelMatmulWeights", "panel-matmul-weights", "bool", "false",
           "store tosa.matmul B weights that AVX-512 code would stream in panels of its register tiles' columns (read back through tosa.transpose + tosa.reshape)">,
  ];
}

def KilnPlaceOps : Pass<"kiln-place-ops", "mlir::ModuleOp"> {
  let summary = "Place each op of kiln_fn on JIT code or a handwritten kernel";
  let description = [{
    For every op of `kiln_fn` except constants, decides where it runs and
    records it: `kiln.placement = "jit" | "kernel"`, and for kernels the
    kernel's name (`kiln.kernel`) and why (`kiln.reason`: mode=kernel, no
    lowering, JIT compile failed). Per-op modes come from `modes`
    (`tosa.conv2d=kernel,*=auto`): auto = JIT when MLIR lowers the op (the op
    table), else a kernel; kernel = a kernel when one takes this use of the
    op, else JIT with a `kiln.note`; jit = JIT when lowerable. Ops in
    `force-kernel` go to kernels (a failed JIT compile). Which kernels exist
    is asked of an injected KernelOracle; without one (kiln-opt), `kernels`
    lists the ops that have a kernel taking any use. Fails at an op that has
    neither a lowering nor a kernel.

    Placement by measurement (unless `measure=off` is among the modes): an
    `auto` anchor op (conv, matmul, pooling) that a kernel also takes stays
    on JIT with `kiln.alternative = "<kernel>"`, for the compiler to time
    both ways; one whose signature (lowering/Partition.h: opSignature) the
    injected measurements name goes to its kernel, with the figures as the
    reason.
  }];
  let options = [
    Option<"modes", "modes", "std::string", "\"\"", "per-op modes, e.g. tosa.conv2d=kernel,*=auto">,
    Option<"forceKernel", "force-kernel", "std::string", "\"\"",
           "comma-separated ops whose JIT compile failed">,
    Option<"kernels", "kernels", "std::string", "\"\"",
           "without an injected oracle: comma-separated ops that have a kernel">,
  ];
}

def KilnOutlineClusters : Pass<"kiln-outline-clusters", "mlir::ModuleOp"> {
  let summary = "Outline connected JIT-placed ops of kiln_fn into cluster functions";
  let description = [{
    After kiln-place-ops: groups JIT-placed ops into clusters (connected
    groups grown greedily in program order while the graph of clusters and
    kernel ops stays acyclic), moves each into `func.func private
    @kiln_cluster<N>` (with copies of the constants it uses) and replaces it
    by a `func.call`; kernel ops stay. kiln_fn's body is left in a
    topological order of calls and kernel ops: the execution plan's steps.
    A cluster holds at most `anchors-per-cluster` anchor ops (convolutions,
    matmuls, pooling), with the elementwise ops that follow them; 0: no limit.
    It holds at most `max-ops` ops: a 100,000-op graph becomes clusters that
    compile in parallel (and identical ones once) instead of one function
    whose vectorization, lowering and LLVM code generation grow faster than
    its size.
  }];
  let options = [
    Option<"anchorsPerCluster", "anchors-per-cluster", "int64_t", "1",
           "most anchor ops (conv, matmul, pooling) in one cluster; 0 = no limit">,
    Option<"maxOps", "max-ops", "int64_t", "0",
           "most ops in one cluster; 0 = no limit">,
    Option<"inputs", "inputs", "int64_t", "-1",
           "how many of kiln_fn's leading arguments are inputs (the rest are weights); -1: all are weights">,
    Option<"attention", "attention", "bool", "true",
           "attention's x V in the cluster of its Q Kᵀ and softmax (anchors-per-cluster 1)">,
  ];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

def KilnRaiseLinalg : Pass<"kiln-raise-linalg", "mlir::ModuleOp"> {
  let summary = "Raise linalg-on-tensors input to TOSA where TOSA expresses it exactly";
  let description = [{
    NCHW named convolutions and pools, matmuls, transposes, broadcasts,
    elementwise and reduction generics of float arithmetic, reshapes, pads,
    concats, slices and tensor constants become TOSA ops (static shapes;
    the rest stays linalg), so that the graph rewrites written for TOSA
    (transposes that cancel, batch norms folded into convolutions, weights
    in the layout their consumer reads, handwritten kernels) apply to
    linalg input too. KILN_RAISE_LINALG=0 turns it off.
  }];
  let dependentDialects = ["mlir::tosa::TosaDialect"];
}

def KilnPropagateTransposes : Pass<"kiln-propagate-transposes", "mlir::ModuleOp"> {
  let summary = "Sink layout transposes below elementwise ops so that pairs cancel";
  let description = [{
    E(transpose(x, p), transpose(y, p), small...) becomes
    transpose(E(x, y, transpose(small, p^-1)), p) for TOSA elementwise ops,
    where "small" operands (at most 4096 elements: per-channel constants)
    follow the layout; consecutive transposes compose and identities vanish.
    Exported NCHW models lose the transposes around every NHWC convolution.
  }];
  let dependentDialects = ["mlir::tosa::TosaDialect"];
}

def KilnSplitConvPadding : Pass<"kiln-split-conv-padding", "mlir::ModuleOp"> {
  let summary = "A window op's padding becomes a tosa.pad of its input";
  let description = [{
    tosa.conv2d and tosa.depthwise_conv2d (float, input zero point 0) and
    tosa.max_pool2d (float; the pad value is -inf) with padding become
    tosa.pad of their input and the op without padding. The pad then joins
    the cluster of the input's producer, which bufferization writes straight
    into the padded buffer: the op no longer copies its whole input into a
    padded buffer on every call.
  }];
  let dependentDialects = ["mlir::tosa::TosaDialect"];
}

def KilnFoldConstants : Pass<"kiln-fold-constants", "mlir::ModuleOp"> {
  let summary = "Evaluate constant subgraphs once and fold per-channel affine ops into convolutions";
  let description = [{
    Replaces every f32 TOSA op whose operands are all constants (elementwise
    arithmetic with broadcasting, reshape, transpose) by its value, then
    folds chains of add/sub/mul by per-output-channel constants that follow
    a tosa.conv2d or tosa.depthwise_conv2d with constant filter and bias into
    that filter and bias (batch norm after a convolution disappears), and
    turns tosa.pow by a uniform constant exponent (1, 2, 3, 4, -1, -2, -0.5)
    into multiplies, tosa.reciprocal or tosa.rsqrt. Values derived from
    dense_resource weights stay dense_resource (kiln_folded*).
  }];
  let statistics = [
    Statistic<"numFolded", "folded-ops", "ops replaced by their constant value">,
    Statistic<"numIntoConvolutions", "ops-into-convolutions", "affine ops folded into convolutions">,
    Statistic<"numPowReduced", "pow-strength-reduced", "tosa.pow by constant exponents made multiplies, reciprocal or rsqrt">,
    Statistic<"numRowAllNegInf", "row-all-neg-inf-as-max", "reduce_all(x == -inf) made reduce_max(x) == -inf">,
    Statistic<"numBoundsAsClamps", "bounds-as-clamps", "min(max(x, lo), hi) made tosa.clamp">,
  ];
  let dependentDialects = ["mlir::tosa::TosaDialect"];
}

#endif
