// What kiln-cpu-strategy fuses into the tiles of an anchor op (a matmul,
// conv, depthwise conv or pooling op): the op that fills its accumulator
// and its elementwise epilogue, and the checks that decide whether they are
// computed in its register tiles (internal to lowering/cpu).
//
// Thread-safety: functions of the IR they are given.
#pragma once

#include "lowering/cpu/strategy/Support.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace kiln::lowering::strategy {

/// What a matmul's, conv's, depthwise conv's or pooling op's parallel
/// tiles compute with it: the op that fills its accumulator (a fill, or the
/// bias broadcast), and its only user when that is an elementwise op over
/// its result (bias, activation, residual add). Both are fused into the
/// op's parallel tiles, so each runs on a tile while it is in cache, not as
/// a pass of its own over the whole output.
struct Fused {
  linalg::LinalgOp init;       // null: none
  linalg::GenericOp epilogue;  // null: none
};

/// Whether `op` is an anchor: an op whose tiles take its init and epilogue
/// (f32 matmuls without user-defined maps, NHWC convs, depthwise convs and
/// pooling, static and on tensors).
bool isAnchor(linalg::LinalgOp op);
/// The init and epilogue `op`'s tiles can compute.
Fused fusable(linalg::LinalgOp op);
/// The epilogue rewritten to update `result` in place: it reads the
/// result through its output (not as an input), so that each parallel
/// tile is accumulated and finished in one buffer, the output's. (With
/// the result as an input and a fresh output, bufferization copies, and
/// fusing through both uses computes the tile twice.)
linalg::GenericOp inPlaceEpilogue(linalg::GenericOp epilogue, Value result);
/// Whether `f`'s init can write a tensor of its own (accumulateApart): an
/// epilogue finishes the output, and the init writes a tensor.empty.
bool canAccumulateApart(const Fused &f);
/// The init writes a tensor of its own (a fresh tensor.empty), not the
/// output the epilogue writes: each parallel block of the anchor then sums
/// into a buffer of its own (OpStrategy::accumulatesApart), which the
/// epilogue reads to write the output.
void accumulateApart(linalg::LinalgOp init);
/// Whether conv `op` computes its fused init and epilogue (`f`) in its
/// register tiles `reg` (`reduction` = KH * KW * C): a tile then runs the
/// whole reduction at once, reading its filter columns (reduction x
/// reg.n) for every pixel tile, so those must fit half of L2; the
/// tiles have no tail (one tile shape); the filter is HWCF (no transpose
/// left to fuse) and no operand is computed by an op that the greedy
/// fusion would pull into the tiles.
bool inRegisters(linalg::LinalgOp op, const Fused &f, const RegisterTile &reg, int64_t reduction);
/// Whether the fused epilogue computes a transcendental (exp, log, tanh,
/// erf, pow: a polynomial of a dozen or more vector ops and constants).
bool transcendentalEpilogue(const Fused &f);
/// Whether an input of `op` or of its fused ops is computed by an op that
/// transform.structured.fuse would pull into the register tiles.
bool computedOperands(linalg::LinalgOp op, const Fused &f);
/// fc where `op` is an FHWC conv whose filter is stored in panels of fc
/// filters ([F/fc, KH, KW, C, fc]: kiln-hoist-constants' streamed
/// filters, the collapse of a transpose that readPanels turns into panel
/// reads), else 0.
int64_t panelWidth(linalg::LinalgOp op);

}  // namespace kiln::lowering::strategy
