//===- pipelines/Passes.td - kiln's pipelines passes -*- tablegen -*-===//
// Passes of the pipeline stages every target runs (kiln-tosa-to-linalg, kiln-bufferize): bounded elementwise fusion, strided copies, results computed in their out-params.
// One pass per file in this folder; see its header for what it rewrites.
#ifndef KILN_LOWERING_PIPELINES_PASSES
#define KILN_LOWERING_PIPELINES_PASSES

include "mlir/Pass/PassBase.td"

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

def KilnGroupedConvToLinalg : Pass<"kiln-grouped-conv-to-linalg", "mlir::func::FuncOp"> {
  let summary = "kiln.grouped_conv2d custom ops become linalg.conv_2d_nhwgc_gfhwc";
  let description = [{
    The grouped conv kiln-raise-linalg makes as a tosa.custom (TOSA has no
    grouped conv) becomes its padding (tosa.pad) and a
    linalg.conv_2d_nhwgc_gfhwc accumulating into a zero fill, before
    tosa-to-linalg, which leaves custom ops alone.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect", "mlir::tosa::TosaDialect"];
}

def KilnReductionInits : Pass<"kiln-reduction-inits", "mlir::func::FuncOp"> {
  let summary = "Float max/min reductions start from -inf/+inf, as TOSA's do";
  let description = [{
    tosa-to-linalg starts a float reduce_max from -FLT_MAX (reduce_min from
    FLT_MAX); TOSA starts them from -inf (+inf). The fills of those inits
    become infinities, so that a row of -inf reduces to -inf.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
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

#endif
