//===- guards/Passes.td - kiln's guards passes -*- tablegen -*-===//
// Safety passes: faults of generated code reported, not crashed on (kiln-guard-traps), cancellation points in loops of unknown length (kiln-cancel-points), results that never alias (kiln-distinct-results).
// One pass per file in this folder; see its header for what it rewrites.
#ifndef KILN_LOWERING_GUARDS_PASSES
#define KILN_LOWERING_GUARDS_PASSES

include "mlir/Pass/PassBase.td"

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

def KilnDistinctResults : Pass<"kiln-distinct-results", "mlir::ModuleOp"> {
  let summary = "Copy returned buffers that alias an earlier result";
  let description = [{
    After bufferization: a func.return operand whose root buffer (through
    view-like ops) was already returned is copied into a fresh allocation,
    so that buffer-results-to-out-params sees distinct buffers.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
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
