// Whether a function treats dimension 0 of its dynamic inputs as a batch:
// every item of the batch computed apart from the others, so that a call
// with batch N can run as N calls with batch 1 on slices of the inputs,
// each writing its slice of the outputs (kiln's range code: one compile
// serves every batch size; api/BatchRange.cpp).
//
// The analysis follows the batch through the function's TOSA ops. A value
// carries the batch at dimension d with a static factor k when its dims
// before d are 1 and dim d is (batch x k): its bytes are then `batch`
// contiguous blocks, block b computed from block b of the inputs. Ops that
// keep blocks apart (elementwise ops, convolutions and pools over NHWC,
// matmuls that keep the batch in N or, with a constant B, in H, reshapes
// and transposes that keep the blocks, reductions, concats, pads, slices,
// tiles and reverses along other dims, gathers from a constant table) pass
// it on; anything else that touches the batch (a reduction over it, a
// transpose or reshape that interleaves blocks, an op the analysis does not
// know, a call) makes the function "not separable", with the op and the
// reason. Values that do not depend on the batch (weights) may meet it as
// broadcast operands. Sound rather than complete: a function refused here
// compiles per batch size as before.
//
// Thread-safety: pure function of the IR.
#pragma once

#include "runtime/Signature.h"

namespace mlir::func {
class FuncOp;
}

namespace kiln::lowering {

/// The batch structure of `fn` (which must be a verified, public function).
BatchDimension analyzeBatchDimension(mlir::func::FuncOp fn);

}  // namespace kiln::lowering
