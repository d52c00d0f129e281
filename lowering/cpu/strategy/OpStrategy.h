// The interface every op class's strategy in kiln-cpu-strategy implements
// (internal to lowering/cpu): recognize an op of the class, choose its
// schedule from its static shapes and the host (a Plan of plain numbers),
// write the plan into the schedule. One file per class:
//
//   Matmul.cpp       matmul, batch_matmul
//   Conv.cpp         conv_2d_nhwc_fhwc / hwcf, incl. streamed filters
//                    (Winograd convs are their own pass: WinogradConv.cpp)
//   Window.cpp       depthwise conv, pooling
//   Reduction.cpp    outer reductions, row reductions
//   Elementwise.cpp  elementwise ops and fills
//   Transpose.cpp    transposes that keep the innermost dimension
//   Pad.cpp          pads (decomposed before the schedule: fills of the
//                    border, then elementwise's)
//
// The shared pieces: Writer.h (the schedule writer, fused ops' tiling,
// register tiles), Fusion.h (what anchors fuse), Support.h (thresholds,
// blocking, op-class predicates), Tuning.cpp (CpuTuning, register-tile
// choice), Schedule.h (the transform-dialect text).
//
// Thread-safety: strategies are stateless; the writer is per pass run.
#pragma once

#include "lowering/cpu/strategy/Writer.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace kiln::lowering::strategy {

/// One op class's strategy.
class OpStrategy {
public:
  virtual ~OpStrategy() = default;
  /// The class, for messages and tests ("matmul", "conv", ...).
  virtual llvm::StringRef name() const = 0;
  /// Whether `op` (static, on tensors, not fused into another op) is of
  /// this class. The first strategy in strategies() that recognizes an op
  /// owns it, whether or not it schedules it.
  virtual bool recognize(linalg::LinalgOp op) const = 0;
  /// Whether its ops' descriptions come after the others' (ScheduleWriter::
  /// describe): memory-bound passes whose plan says little.
  virtual bool minor() const { return false; }
  /// Chooses `op`'s schedule and writes it (nothing when it stays on loops).
  virtual void schedule(linalg::LinalgOp op, ScheduleWriter &w) const = 0;
  /// Whether anchor `op`'s parallel blocks sum their products over several
  /// passes into a contiguous buffer of their own, read by the epilogue
  /// (ScheduleWriter::fuseIntoAnchors): in the output itself a block's rows
  /// lie a whole row of the output apart, and every pass loads and stores
  /// them again. Matmuls over several k blocks; convs with channel blocks
  /// outside their register tiles were tried (ResNet-50 at batch 1 and 8,
  /// kiln profile --serial): no gain, they keep the output.
  virtual bool accumulatesApart(linalg::LinalgOp op, const ScheduleWriter &w) const { return false; }
};

/// A strategy whose choice is a `Plan`: choose() decides (reads the IR and
/// the tuning, writes nothing), write() writes the plan's schedule.
template <typename Plan>
class PlannedStrategy : public OpStrategy {
public:
  /// The plan for `op`; none when it stays on loops (its fused ops then get
  /// strategies of their own).
  virtual std::optional<Plan> choose(linalg::LinalgOp op, const ScheduleWriter &w) const = 0;
  virtual void write(linalg::LinalgOp op, const Plan &plan, ScheduleWriter &w) const = 0;
  /// The plan in a few words for profiles ("matmul 128x768x768: registers
  /// 4x64, k blocks of 128, 12 parallel blocks + epilogue(add)"): what
  /// makes its code fast or slow.
  virtual std::string describe(linalg::LinalgOp op, const Plan &plan, const ScheduleWriter &w) const = 0;
  void schedule(linalg::LinalgOp op, ScheduleWriter &w) const final {
    if (std::optional<Plan> plan = choose(op, w)) {
      w.describe(describe(op, *plan, w), minor());
      return write(op, *plan, w);
    }
    w.describe(name().str() + " on loops", minor());
    w.unfused(w.fusedOf(op));
  }
};

const OpStrategy &matmulStrategy();
const OpStrategy &convStrategy();
const OpStrategy &windowStrategy();
const OpStrategy &outerReductionStrategy();
const OpStrategy &rowReductionStrategy();
const OpStrategy &elementwiseStrategy();
const OpStrategy &transposeStrategy();

/// Every strategy, in the order they are tried.
llvm::ArrayRef<const OpStrategy *> strategies();
/// The strategy that owns `op`: the first in strategies() that recognizes
/// it, or null.
const OpStrategy *strategyFor(linalg::LinalgOp op);

}  // namespace kiln::lowering::strategy
