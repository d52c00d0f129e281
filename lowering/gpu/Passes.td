//===- gpu/Passes.td - kiln's gpu passes -*- tablegen -*-===//
// GPU code generation: parallel loops tiled into thread blocks.
// One pass per file in this folder; see its header for what it rewrites.
#ifndef KILN_LOWERING_GPU_PASSES
#define KILN_LOWERING_GPU_PASSES

include "mlir/Pass/PassBase.td"

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

def KilnGpuLibraryCalls : Pass<"kiln-gpu-library-calls", "mlir::ModuleOp"> {
  let summary = "Convolutions and matrix products as calls of the GPU's libraries (cuDNN, cuBLAS)";
  let description = [{
    On buffers (after bufferization, before convert-linalg-to-parallel-loops):
    each linalg.conv_2d_nhwc_fhwc, linalg.batch_matmul and linalg.matmul
    over static FP32 buffers of identity layout becomes a func.call of a
    private declaration kiln_gpu_lib_<n>, the call carrying the library
    operation (`kiln.gpu_library`: "conv2d_nhwc_fhwc" or "matmul") and its
    parameters (`kiln.gpu_params`). readGpuLowering makes them library
    launches of the plan; the device runtime calls cuDNN / cuBLAS. Both
    ops accumulate into their output (which holds the bias or zeros), as
    linalg's do. Other shapes of these ops stay generated kernels.
  }];
  let options = [
    Option<"conv", "conv", "bool", "true", "convolutions through cuDNN">,
    Option<"matmul", "matmul", "bool", "true", "matrix products through cuBLAS">,
  ];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

#endif
