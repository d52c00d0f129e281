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

def KilnWinogradConv : Pass<"kiln-winograd-conv", "mlir::func::FuncOp"> {
  let summary = "tosa.conv2d on a Winograd-stored filter as input transform, batched matmul, output transform";
  let description = [{
    A tosa.conv2d whose filter is `tosa.custom kiln.winograd_filter` (a
    filter stored as U = G g G^T, see lowering/Winograd.h) becomes vector
    code that transforms the input tiles (B^T d B), a linalg.batch_matmul
    over the a*a points, and vector code that transforms the products back
    (A^T M A), adds the bias and applies a following tosa.clamp. Filter
    reads it cannot fold (vector-bits 0, channels not in whole vectors, a
    conv placed on a kernel) become the exact inverse g = P U P^T as a
    linalg.generic, so every path computes the same conv.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect", "mlir::scf::SCFDialect",
                           "mlir::tensor::TensorDialect", "mlir::vector::VectorDialect"];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", "0",
           "widest vector register in bits (0: the inverse filter and the direct conv)">,
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
  ];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

def KilnFuseElementwise : Pass<"kiln-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse elementwise linalg ops, bounding the fused body";
  let description = [{
    linalg-fuse-elementwise-ops with a cost bound: a producer is fused into
    its consumer only while the fused body has at most `max-body-ops`
    operations, which keeps compile time linear in the length of a chain.
  }];
  let options = [
    Option<"maxBodyOps", "max-body-ops", "int64_t", "256",
           "largest fused linalg.generic body, in operations">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::affine::AffineDialect",
                           "mlir::tensor::TensorDialect"];
}

def KilnGuardTraps : Pass<"kiln-guard-traps", "mlir::ModuleOp"> {
  let summary = "Guard integer division and tensor indexing against faults";
  let description = [{
    A zero integer divisor or an index outside its tensor calls
    `kiln_report_fault(site)` and the operation runs on a safe operand
    instead (no SIGFPE, no stray access); INT_MIN / -1 wraps. The runtime
    turns a reported fault into an error naming the op's location; the
    sites' messages are in the module attribute `kiln.fault_sites`.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
                           "mlir::func::FuncDialect", "mlir::tensor::TensorDialect"];
}

def KilnCpuStrategy : Pass<"kiln-cpu-strategy", "mlir::ModuleOp"> {
  let summary = "Tile, vectorize and register-block linalg ops for the host CPU";
  let description = [{
    Chooses a code-generation strategy per linalg op on tensors from its
    class and static shapes and from the host's vector width and register
    count, writes it as a transform-dialect schedule and applies it:
      - matmul / batch_matmul: cache tiles, then a register tile (rows x
        vectors) chosen to fill the vector registers without spilling;
        vectorized to FMAs (outer products) with the accumulator kept in
        registers across the reduction loop;
      - conv_2d_nhwc_fhwc / nhwc_hwcf: filter to HWCF, an output-channel
        cache block, a register tile over (output width x channels),
        decomposed to 1-D convolutions and vectorized the same way;
      - elementwise generics and fills: the innermost dimension tiled to
        whole vectors (masked at the edge).
    Other ops are left to the loop lowering. `vector-bits=0` turns it off.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", "0",
           "widest vector register in bits (128, 256, 512); 0 = no strategy (plain loops)">,
    Option<"vectorRegisters", "vector-registers", "int64_t", "16",
           "vector registers the register tile may use">,
    Option<"l2Bytes", "l2-bytes", "int64_t", "524288",
           "per-core L2 size the cache blocks aim at">,
    Option<"l1Bytes", "l1-bytes", "int64_t", "32768",
           "L1 data cache bytes per core (filter slices a conv tile reuses)">,
  ];
  let dependentDialects = ["mlir::transform::TransformDialect", "mlir::vector::VectorDialect",
                           "mlir::scf::SCFDialect", "mlir::affine::AffineDialect",
                           "mlir::tensor::TensorDialect", "mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect", "mlir::ub::UBDialect"];
}

def KilnOutlineParallel : Pass<"kiln-outline-parallel", "mlir::ModuleOp"> {
  let summary = "Outline parallel tiles (scf.forall on memrefs) for kiln_parallel_for";
  let description = [{
    Each outermost scf.forall with static bounds whose captured values are
    static identity-layout memrefs or scalars becomes a private function
    `@<fn>_par<k>(%begin, %end, captures...)` running the linearized
    iterations [begin, end), and a call of the declaration
    `@kiln_par_launch_<fn>_<k>(%n, captures...)` tagged
    `kiln.parallel_body`; kiln-parallel-launchers gives it a body. Other
    foralls become sequential scf.for nests.
  }];
  let dependentDialects = ["mlir::func::FuncDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

def KilnParallelLaunchers : Pass<"kiln-parallel-launchers", "mlir::ModuleOp"> {
  let summary = "Bodies for kiln-outline-parallel's launchers: kiln_parallel_for calls";
  let description = [{
    On LLVM-dialect IR with bare-pointer memrefs: each launcher stores its
    captures into 8-byte stack slots and calls
    `kiln_parallel_for(n, 1, @<body>_task, slots)`; `@<body>_task(ctx,
    begin, end)` loads them back and calls the outlined body.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
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

def KilnStridedCopies : Pass<"kiln-strided-copies", "mlir::ModuleOp"> {
  let summary = "Strided memref.copy ops become linalg.copy (vectorizable loops)";
  let description = [{
    After bufferization, a memref.copy whose source or target is not
    contiguous (static shape) becomes loops over the outer dimensions moving
    the innermost one in whole vectors (or linalg.copy loops when it has no
    power-of-two vector divisor), instead of a call of the element-by-element
    `memrefCopy`. Contiguous copies stay memref.copy (one memcpy). With
    `as-linalg`, every strided copy becomes linalg.copy (for the GPU).
  }];
  let options = [
    Option<"asLinalg", "as-linalg", "bool", "false", "strided copies become linalg.copy, never vector loops">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::vector::VectorDialect", "mlir::ub::UBDialect"];
}

def KilnFoldConstants : Pass<"kiln-fold-constants", "mlir::ModuleOp"> {
  let summary = "Evaluate constant subgraphs once and fold per-channel affine ops into convolutions";
  let description = [{
    Replaces every f32 TOSA op whose operands are all constants (elementwise
    arithmetic with broadcasting, reshape, transpose) by its value, then
    folds chains of add/sub/mul by per-output-channel constants that follow
    a tosa.conv2d or tosa.depthwise_conv2d with constant filter and bias into
    that filter and bias (batch norm after a convolution disappears). Values
    derived from dense_resource weights stay dense_resource (kiln_folded*).
  }];
  let statistics = [
    Statistic<"numFolded", "folded-ops", "ops replaced by their constant value">,
    Statistic<"numIntoConvolutions", "ops-into-convolutions", "affine ops folded into convolutions">,
  ];
  let dependentDialects = ["mlir::tosa::TosaDialect"];
}

def KilnDistinctResults : Pass<"kiln-distinct-results", "mlir::ModuleOp"> {
  let summary = "Copy returned buffers that alias an earlier result";
  let description = [{
    After bufferization: a func.return operand whose root buffer (through
    view-like ops) was already returned is copied into a fresh allocation,
    so that buffer-results-to-out-params sees distinct buffers.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}


def KilnScratchBuffers : Pass<"kiln-scratch-buffers", "mlir::ModuleOp"> {
  let summary = "A kernel's top-level temporaries become views of one scratch buffer the runtime plans";
  let description = [{
    After bufferization (CPU): static-shaped memref.alloc ops in kiln_fn's
    top block become memref.view ops of the buffer that
    `kiln_scratch_acquire(N)` returns at the function's start (released by
    `kiln_scratch_release` before its return; their deallocs go); N is left
    in the module attribute kiln.scratch_bytes. The executor plans that
    buffer in the execution's arena, so temporaries reuse memory that is
    warm in cache.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect", "mlir::arith::ArithDialect", "mlir::func::FuncDialect"];
}

def KilnReshapedOutParams : Pass<"kiln-reshaped-out-params", "mlir::func::FuncOp"> {
  let summary = "Compute a result into its out-param when it is returned through a reshape";
  let description = [{
    After buffer-results-to-out-params: `memref.copy` of a reshape
    (expand_shape / collapse_shape) of a function-local allocation into an
    out-param that nothing else touches becomes the allocation replaced by
    the inverse reshape of the out-param, so the result is computed where it
    is returned instead of copied there (a 2-D matmul + epilogue returned as
    1 x M x N).
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def KilnGpuTileParallel : Pass<"kiln-gpu-tile-parallel", "mlir::func::FuncOp"> {
  let summary = "Shape parallel loops for GPU threads: one flat loop of blocks of threads";
  let description = [{
    Every outermost scf.parallel with static bounds is collapsed into one
    dimension (consecutive iterations touch consecutive elements of the
    innermost dimension, so a warp's accesses coalesce) and tiled by
    `block-size` with in-bounds checks: an outer loop over thread blocks and
    an inner loop over the threads of a block, ready for
    gpu-map-parallel-loops (block_x, thread_x). Loops with dynamic bounds are
    left alone.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256", "threads per block">,
  ];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect", "mlir::affine::AffineDialect"];
}


def KilnCancelPoints : Pass<"kiln-cancel-points", "mlir::ModuleOp"> {
  let summary = "Loops of unknown trip count stop when their call is cancelled";
  let description = [{
    Every scf.while (tosa.while_loop after tosa-to-scf) also leaves its
    loop when `kiln_cancel_requested()` returns non-zero: the call's
    cancellation token was cancelled or its deadline passed. The runtime
    then reports the step as cancelled, so a loop that never ends can be
    stopped and the runtime stays usable.
  }];
  let dependentDialects = ["mlir::func::FuncDialect", "mlir::arith::ArithDialect"];
}

#endif
