// depthwise_conv_2d_nhwc_hwc and pooling (max, sum; f32): rows of output
// pixels x channel vectors, the accumulator kept in registers across the
// window (kh, kw). TOSA's depthwise hwcm with one filter per channel was
// first rewritten to hwc (Prepare.cpp). The init and epilogue run in the
// register tiles where the op is tiled for the threads (the window is
// small, so the whole reduction runs in each tile anyway), else in its
// parallel tiles.
#include "lowering/cpu/strategy/OpStrategy.h"

namespace kiln::lowering::strategy {
namespace {

struct WindowPlan {
  /// Loops: n, oh, ow, c, kh, kw.
  SmallVector<int64_t> bounds;
  /// Output pixels x channels.
  RegisterTile rt{1, 1};
  /// Parallel tiles (n, oh, ow, c) when `parallel`.
  bool parallel = false;
  SmallVector<int64_t> forallSizes;
  /// The init and epilogue computed in the register tiles.
  bool inRegisters = false;
  /// Channels that no whole vector divides (ShuffleNet's 58, 116, 232):
  /// tiles of whole vectors (`rt`) over all but the last C % rt.n, which
  /// get a tile of their own, not narrow vectors over all of them.
  bool peelChannels = false;
};

class WindowStrategy final : public PlannedStrategy<WindowPlan> {
public:
  llvm::StringRef name() const override { return "window"; }

  bool recognize(linalg::LinalgOp op) const override {
    return isa<linalg::DepthwiseConv2DNhwcHwcOp, linalg::PoolingNhwcMaxOp, linalg::PoolingNhwcSumOp>(op) &&
           allF32(op);
  }

  std::optional<WindowPlan> choose(linalg::LinalgOp op, const ScheduleWriter &w) const override {
    WindowPlan p;
    p.bounds = op.getStaticLoopRanges();
    int64_t NB = p.bounds[0], OH = p.bounds[1], OW = p.bounds[2], C = p.bounds[3];
    p.rt = chooseRegisterTile(OW, C, w.tuning());
    if (p.rt.n < w.lanes() && C > w.lanes() && C % w.lanes()) {
      RegisterTile whole = chooseRegisterTile(OW, w.lanes(), w.tuning());
      if (whole.n == w.lanes()) {
        p.rt = whole;
        p.peelChannels = true;
      }
    }
    if (p.rt.n < 4) return std::nullopt;
    p.parallel = 2.0 * NB * OH * OW * C * p.bounds[4] * p.bounds[5] >= parallelMinFlops(w.tuning()) / 4;
    if (p.parallel) {
      int64_t ohb = rowBlockForThreads(OH, NB);
      p.parallel = NB * (OH / ohb) > 1;
      p.forallSizes = {NB > 1 ? 1 : 0, ohb == OH ? 0 : ohb, 0, 0};
      // Row blocks the threads share unevenly (sharedUnevenly: a 7x7 map's
      // 7 rows, 4 on one thread and 3 on the other) with the channels
      // halved too, where whole register tiles allow it.
      if (p.parallel && sharedUnevenly(NB * (OH / ohb)) && !p.peelChannels && C % (2 * p.rt.n) == 0)
        p.forallSizes[3] = C / 2;
      Fused f = w.fusedOf(op);
      // (Not an epilogue with a transcendental where there are 16 vector
      // registers: exp's polynomial constants and temporaries beside the
      // tile's accumulators and filter taps spill. EfficientNet-B0's 3x3
      // depthwise + SiLU on 56x56x144 took 0.62 ms in registers, 0.47
      // after each tile; the model 19.8 -> 19.2 ms on Zen 1. MobileNetV2's
      // ReLU6 stays in registers: 9.6 ms there, 10.0 after the tiles.)
      p.inRegisters = p.parallel && (f.init || f.epilogue) && !computedOperands(op, f) &&
                      !(w.tuning().vectorRegisters <= 16 && transcendentalEpilogue(f));
    }
    return p;
  }

  std::string describe(linalg::LinalgOp op, const WindowPlan &p, const ScheduleWriter &w) const override {
    const SmallVector<int64_t> &b = p.bounds;
    llvm::StringRef kind = isa<linalg::DepthwiseConv2DNhwcHwcOp>(op) ? "depthwise conv"
                           : isa<linalg::PoolingNhwcMaxOp>(op)       ? "max pool"
                                                                     : "sum pool";
    std::string out = llvm::formatv("{0} {1}x{2} on {3}x{4}x{5}: registers {6}x{7}", kind, b[4], b[5], b[1], b[2],
                                    b[3], p.rt.m, p.rt.n)
                          .str();
    if (p.peelChannels) out += llvm::formatv(" (+ {0}x{1} for the last {1} channels)", p.rt.m, b[3] % p.rt.n).str();
    if (!p.parallel) return out + ", one thread";
    const SmallVector<int64_t> &fs = p.forallSizes;
    out += llvm::formatv(", {0} parallel blocks",
                         (fs[0] ? b[0] / fs[0] : 1) * (fs[1] ? b[1] / fs[1] : 1) * (fs[3] ? b[3] / fs[3] : 1))
               .str();
    return out + ScheduleWriter::fusedText(w.fusedOf(op)) + (p.inRegisters ? " in registers" : "");
  }

  void write(linalg::LinalgOp op, const WindowPlan &p, ScheduleWriter &w) const override {
    Schedule &schedule = w.schedule();
    Fused f = w.fusedOf(op);
    int64_t NB = p.bounds[0];
    int64_t opSid = w.nextId();
    std::string h = w.tag(op);
    // (Peeled: channel tiles outermost, the loop inRegisterTiles peels.)
    if (p.inRegisters)
      return w.inRegisterTiles(h, p.bounds, p.forallSizes, f, opSid, {NB > 1 ? 1 : 0, 1, p.rt.m, p.rt.n},
                               p.peelChannels ? SmallVector<int64_t>{0, 3, 1, 2} : SmallVector<int64_t>{},
                               p.peelChannels);
    if (p.parallel)
      h = w.tileFused(h, p.bounds, p.forallSizes, f);
    else
      w.unfused(f);
    auto tiles = [&](const std::string &part, int64_t n) {
      std::string t = schedule.tile(part, {NB > 1 ? 1 : 0, 1, p.rt.m, n, 1, 1});
      schedule.vectorize(schedule.op("decompose", t));
    };
    if (!p.peelChannels) return tiles(h, p.rt.n);
    int64_t C = p.bounds[3];
    auto [whole, rest] = schedule.split(h, /*dim=*/3, C - C % p.rt.n);
    tiles(whole, p.rt.n);
    tiles(rest, C % p.rt.n);
  }
};

}  // namespace

const OpStrategy &windowStrategy() {
  static const WindowStrategy strategy;
  return strategy;
}

}  // namespace kiln::lowering::strategy
