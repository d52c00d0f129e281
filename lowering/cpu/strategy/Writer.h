// ScheduleWriter: what every op strategy of kiln-cpu-strategy writes its
// schedule with (internal to lowering/cpu). It holds the two schedules of
// a pass run (the main one, and the register phase applied after it), the
// strategy ids that tag each scheduled op, the fused init and epilogue of
// every anchor op, and the pieces strategies share: elementwise tiles,
// parallel row blocks, register tiles, and the tiling of an op together
// with what is fused into it.
//
// Thread-safety: one ScheduleWriter per pass run.
#pragma once

#include "lowering/cpu/strategy/Fusion.h"
#include "lowering/cpu/strategy/Schedule.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <string>
#include <vector>

namespace kiln::lowering::strategy {

class ScheduleWriter {
public:
  ScheduleWriter(MLIRContext *context, const CpuTuning &tuning);

  const CpuTuning &tuning() const { return tuning_; }
  /// f32 per vector.
  int64_t lanes() const { return lanes_; }
  /// The main schedule ...
  Schedule &schedule() { return schedule_; }
  /// ... and the one applied after it: the register tiles of ops whose init
  /// and epilogue are computed in them (see inRegisterTiles).
  Schedule &registerPhase() { return registerPhase_; }
  /// Whether any op was tagged (the schedules have something to do).
  bool tagged() const { return sid_ != 0; }

  /// Finds the init and epilogue of each anchor op (fusable), rewrites
  /// each epilogue to update the anchor's result in place and claims both:
  /// ops fused into another op's tiles get no strategy of their own.
  void fuseIntoAnchors(ModuleOp module);
  bool claimed(Operation *op) const { return claimed_.contains(op); }
  /// What `op`'s tiles compute with it (nothing unless it is an anchor).
  Fused fusedOf(Operation *op) const { return fused_.lookup(op); }

  /// Tags `op` with the next strategy id; returns its handle in the main
  /// schedule.
  std::string tag(Operation *op);
  /// The id `op` was tagged with.
  static int64_t idOf(linalg::LinalgOp op);

  /// Elementwise ops and fills (`bounds`: the loop ranges of the op, or of
  /// the tile a fusion left of it): the innermost dimension in whole
  /// vectors, the remainder peeled into one static tail (no masks).
  void elementwise(const std::string &h, llvm::ArrayRef<int64_t> bounds);
  /// `h` (the op `op`, loop ranges `bounds`) in the parallel tiles
  /// parallelRowBlocks gives it, if any (memory-bound: each thread's core
  /// streams its share); returns the op's handle inside them and leaves
  /// `bounds` as the tile's.
  std::string parallelRows(const std::string &h, linalg::LinalgOp op, SmallVector<int64_t> &bounds);
  /// The register tiles of `h` (a conv tile whose loop `rowDim` has `rows`
  /// iterations): tiled by `sizes(rt.m)`, decomposed and vectorized; with a
  /// tail the op is first split after the full tiles and the last `rt.tail`
  /// rows get a tile of their own. (Matmuls peel their row loop instead:
  /// Matmul.cpp.)
  template <typename Sizes>
  void registerTiles(const std::string &h, int64_t rowDim, int64_t rows, const RegisterTile &rt, Sizes sizes) {
    auto finish = [&](const std::string &part, int64_t tileRows) {
      schedule_.vectorize(schedule_.op("decompose", schedule_.tile(part, sizes(tileRows))));
    };
    if (!rt.tail) return finish(h, rt.m);
    auto [full, tail] = schedule_.split(h, rowDim, rows - rt.tail);
    finish(full, rt.m);
    finish(tail, rt.tail);
  }

  /// The op `h` (loop ranges `bounds`) in parallel tiles of `sizes` (an
  /// scf.forall) with what `f` fuses into them, each fused op vectorized
  /// as elementwise over the tile; returns the op's handle inside the tiles.
  std::string tileFused(const std::string &h, llvm::ArrayRef<int64_t> bounds, llvm::ArrayRef<int64_t> sizes,
                        const Fused &f);
  /// Fused ops of an op that is not tiled in parallel: strategies of
  /// their own.
  void unfused(Fused f);
  /// The op `h` (tagged `opSid`, loops: the 4 parallel ones of an NHWC
  /// conv, depthwise conv or pooling, then its reductions) in parallel
  /// tiles of `forallSizes` with its init and epilogue, each computed in
  /// the register tiles `regSizes` (those 4 loops, in the order `order`
  /// when given): fused by a second schedule (registerPhase), which
  /// tiles the epilogue (else the op) and pulls the op and its init in
  /// through their destinations. With `peelFilters` the filter loop is
  /// peeled into whole tiles and the rest, each op then taken in its two
  /// static tiles.
  void inRegisterTiles(const std::string &h, llvm::ArrayRef<int64_t> bounds, llvm::ArrayRef<int64_t> forallSizes,
                       const Fused &f, int64_t opSid, llvm::ArrayRef<int64_t> regSizes,
                       llvm::ArrayRef<int64_t> order, bool peelFilters);
  /// The id the next tagged op gets.
  int64_t nextId() const { return sid_; }

  /// What the kernel's code does, for profiles (`kiln profile`'s strategy
  /// column): one line per op a strategy scheduled (OpStrategy::describe)
  /// or left on loops, in the order they were met.
  /// `minor` lines (fills, elementwise ops: memory-bound passes whose plan
  /// says little) come after the others.
  void describe(std::string line, bool minor = false) { described_.push_back({minor, std::move(line)}); }
  /// Those lines, each distinct one once with its count ("elementwise x3"),
  /// joined by "; ", the minor ones last.
  std::string description() const;
  /// " + init + epilogue(add, maximum)": what `f` fuses into its anchor's
  /// tiles ("" when nothing).
  static std::string fusedText(const Fused &f);

private:
  /// The handles tileFusedParts leaves: the op, its epilogue and init
  /// (empty when none) inside the scf.forall.
  struct FusedParts {
    std::string op, epilogue, init;
  };
  /// Tiles the op `h` (loop ranges `bounds`) into parallel tiles of
  /// `sizes` (an scf.forall) together with what `f` fuses into them:
  /// the epilogue is tiled and the op fused into its tiles, else the op
  /// is tiled; the accumulator's init is fused after.
  FusedParts tileFusedParts(std::string h, llvm::ArrayRef<int64_t> bounds, llvm::ArrayRef<int64_t> sizes,
                            const Fused &f);

  CpuTuning tuning_;
  int64_t lanes_;
  Builder builder_;
  Schedule schedule_, registerPhase_;
  int64_t sid_ = 0;
  llvm::DenseMap<Operation *, Fused> fused_;
  llvm::DenseSet<Operation *> claimed_;
  std::vector<std::pair<bool, std::string>> described_;
};

}  // namespace kiln::lowering::strategy
