//===- cpu/Passes.td - kiln's cpu passes -*- tablegen -*-===//
// Host CPU code generation: per-op schedules (kiln-cpu-strategy, kiln-winograd-conv), parallel loops outlined for the executor, scratch buffers, the kiln_entry ABI.
// One pass per file in this folder; see its header for what it rewrites.
#ifndef KILN_LOWERING_CPU_PASSES
#define KILN_LOWERING_CPU_PASSES

include "mlir/Pass/PassBase.td"

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
    Option<"fmaPipes", "fma-pipes", "int64_t", "1",
           "FMA pipes per core at the full vector width (2: matmul register tiles with more rows)">,
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

def KilnPrefetchStreams : Pass<"kiln-prefetch-streams", "mlir::func::FuncOp"> {
  let summary = "Register-tile loops prefetch the rows of their streamed operand a distance ahead";
  let description = [{
    After bufferization (CPU): in a reduction loop that carries a register
    tile (an scf.for with vector iter_args of at least 4 rows), each 1-D
    vector read of a contiguous row (the GEMM's B row, a conv's filter row)
    of a function argument of at least `min-stream-bytes`, through an index
    or view that steps with the loop, and read again by at most 32 passes of
    the enclosing loops, gets a memref.prefetch of the row `distance-bytes`
    ahead along that dimension, one per cache line of the row, into L2. A filter streamed from L3 or memory then arrives while the
    tile computes on earlier rows instead of when the loop reaches it.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect", "mlir::arith::ArithDialect"];
  let options = [
    Option<"distanceBytes", "distance-bytes", "int64_t", "0",
           "how far ahead the prefetched rows lie, in bytes (0: no prefetches)">,
    Option<"minStreamBytes", "min-stream-bytes", "int64_t", "0",
           "smallest function argument whose rows are prefetched, in bytes">,
  ];
}

#endif
