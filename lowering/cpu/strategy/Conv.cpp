// conv_2d_nhwc_fhwc / conv_2d_nhwc_hwcf (f32): the filter as HWCF (a
// packed constant filter's transpose cancels: see kiln-hoist-constants),
// parallel blocks of output rows and of output channels sized for L2 (a
// filter that streams from memory: blocks of one register tile of filters,
// each read from its own contiguous panel), then a register tile over
// (output width, output channels), decomposed to 1-D convolutions and
// vectorized like matmul. The conv's init and epilogue run in its parallel
// tiles, or, where a register tile's filter columns fit the cache
// (inRegisters), in its register tiles: the bias starts the accumulator,
// the epilogue finishes it, one store (the register phase).
//
// 1x1 convs (strided ones too) whose matmul tile is better became matmuls before
// (Prepare.cpp); Winograd convs are a pass of their own (WinogradConv.cpp).
//
// Where every register tile waits on loads (AVX2 on 7-wide maps), the
// output columns are first split (transform.structured.split) into whole
// tiles of a better size and one static tail tile (chooseRegisterTile).
#include "lowering/cpu/strategy/OpStrategy.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace kiln::lowering::strategy {
namespace {

struct ConvPlan {
  /// Loops: n, oh, ow, f, kh, kw, c (both layouts).
  SmallVector<int64_t> bounds;
  /// Too few channels to vectorize well: loops, but on an HWCF filter all
  /// the same, so that a packed filter's transpose cancels.
  bool loops = false;
  /// Filters per block, and the register tile within a block.
  int64_t fc = 1;
  RegisterTile reg{1, 1};
  /// Parallel tiles (n, oh, ow, f) when `parallel`.
  bool parallel = false;
  SmallVector<int64_t> forallSizes;
  /// The init and epilogue computed in register tiles `cols` (with the
  /// filter loop peeled into whole vectors and the rest: `peelCols`).
  bool inRegisters = false;
  RegisterTile cols{1, 1};
  bool peelCols = false;
  /// Input channels per block (C: one block).
  int64_t cb = 1;
  /// A filter count that no register tile of at least 4 lanes divides
  /// (ShuffleNet's 58), or blocks of filters no whole vector divides
  /// whose dividing tiles are narrower than a vector (RegNet's 440 in
  /// blocks of 40 at 512 bits: tiles of 8): tiles of whole vectors (`reg`)
  /// over each block's filters but the last fc % reg.n, which get a tile
  /// of their own.
  bool raggedF = false;
};

/// The shortest reduction (KH x KW x C) over which one-vector-wide conv
/// tiles in an odd number of vectors give way to two-vector tiles and one
/// of the last vector (ConvStrategy::choose): 27 lost, 48 won (Zen 1).
constexpr int64_t kTwoVectorMinReduction = 32;

/// A tile of whole vectors over a block of fc filters no vector divides,
/// two vectors wide where the filters left after whole two-vector tiles
/// are the same as after one-vector tiles (40: 32 + 8, not 16 + 16 + 8;
/// ShuffleNet's 232; not 116 or 88) and the registers hold the 2 x rows
/// accumulators (not AVX2's 16 with 7 rows): half the broadcasts per FMA
/// and twice the accumulator chains. RegNetY-400MF's 1x1 440 -> 440 on 7x7
/// (blocks of 40), one thread, a one-op model: 0.35 -> 0.27-0.28 ms.
RegisterTile twoVectorsWhereTheRestStays(RegisterTile t, int64_t fc, const CpuTuning &tuning) {
  const int64_t lanes = tuning.lanes();
  if (t.n == lanes && fc >= 2 * lanes && fc % (2 * lanes) == fc % lanes && 2 * t.m + 3 <= tuning.vectorRegisters)
    t.n = 2 * lanes;
  return t;
}

/// The register tiles a conv computes its init and epilogue in: `reg`,
/// or where its vectors would be partly empty (24 filters: 3 tiles of 8
/// lanes of 16), tiles of whole vectors and one of the rest (16 + 8;
/// `peel`), or narrower ones where `reg`'s filter columns would not fit.
RegisterTile registerColumns(const RegisterTile &reg, int64_t OW, int64_t F, int64_t fc, int64_t reduction,
                             const ScheduleWriter &w, bool &peel) {
  const CpuTuning &tuning = w.tuning();
  int64_t lanes = w.lanes();
  RegisterTile cols = reg;
  peel = false;
  if (reg.n < lanes && fc > lanes && fc % lanes) {
    cols = chooseRegisterTile(OW, lanes, tuning);
    peel = cols.n == lanes && OW % cols.m == 0;
    cols = peel ? twoVectorsWhereTheRestStays(cols, fc, tuning) : reg;
  } else if (reduction * reg.n * 4 > kRegisterFusedColumnBytes && reg.n / 2 >= lanes) {
    // Narrower tiles where the tile's filter columns would not fit
    // (1x1 convs over 512 channels on 28-wide maps: 7 x 32, not
    // 4 x 64), while they still do enough FMAs per load.
    RegisterTile narrow = chooseRegisterTile(OW, reg.n / 2, tuning);
    if (narrow.n == reg.n / 2 && !narrow.tail && tileScore(narrow.m, narrow.n, tuning) >= kNarrowTileScore)
      cols = narrow;
  }
  return cols;
}

/// Input-channel blocks whose filter slice (KH x KW x cb x one
/// register tile of filters) stays in L1 while every output row and
/// column tile of the block reuses it: without them each output row
/// streams the whole filter block from L2 again (a 1x1 conv with
/// 2048 channels ran at 6% of peak, blocked at 85%).
/// The block's rows of the (unpacked, HWCF) filter lie F floats
/// apart: with many filters each row is on a page of its own, and
/// with F * 4 a multiple of 4 KiB all of them fall into the same L1
/// sets. The rows a block spans are capped at 128 KiB: on an AVX2
/// host (Zen) the stride-2 1x1 conv 13x13x1024 -> 2048 went from
/// 7.2-7.4 to 2.7-3.4 ms per call (BM_ResNet50Conv/20). (Huge pages
/// do not remove such aliasing: it is in the L1 sets.)
/// Constant filters are now stored with padded rows (kiln-hoist-
/// constants), which removes the aliasing itself; the cap stays for
/// filters that are not, and dropping it for padded ones measured
/// within the noise.
/// A filter read from panels spans the panel's width, not F: layer
/// 4's 3x3 convs take blocks of 16 channels, not 4, its stride-2 1x1
/// 128, not 16 (those kernels 0.92-0.97x their time, ResNet-50 in
/// kiln profile --serial, alternating).
int64_t channelBlock(linalg::LinalgOp op, int64_t KH, int64_t KW, int64_t C, int64_t F, const RegisterTile &rt,
                     const CpuTuning &tuning) {
  int64_t panel = panelWidth(op);
  int64_t spanF = panel > 0 ? std::min(F, panel) : F;
  int64_t cbLimit =
      std::min<int64_t>(tuning.l1Bytes / (KH * KW * rt.n * 4), kFilterBlockSpanBytes / (KH * KW * spanF * 4));
  int64_t cb = blockOf(C, 1, std::max<int64_t>(1, cbLimit));
  // A block of a panel-stored (streamed) filter keeps its channel blocks
  // too: reading its whole reduction at once, the panel came from memory
  // during the first output row only while the other rows computed from
  // L2 and memory idled; in channel blocks every output row computes on a
  // block as it arrives. ResNet-50's layer-4 3x3 512->512 convs 1.64-1.72
  // -> 1.41-1.51 ms, its layer-4 1x1s 6.02-6.49 -> 5.74-5.85 ms in all
  // (medians of 150 calls from kiln profile --serial's trace, three
  // alternating runs each; alone with the weight out of cache, as in the
  // model, the 3x3 1.65-1.82 -> 1.40-1.56 ms, 0.995 ms with it in cache).
  // (Means of fewer calls had said the opposite: 0.80-0.90x with the
  // whole reduction.)
  return cb;
}

class ConvStrategy final : public PlannedStrategy<ConvPlan> {
public:
  llvm::StringRef name() const override { return "conv"; }

  bool recognize(linalg::LinalgOp op) const override {
    return isa<linalg::Conv2DNhwcFhwcOp, linalg::Conv2DNhwcHwcfOp>(op) && allF32(op);
  }

  std::optional<ConvPlan> choose(linalg::LinalgOp op, const ScheduleWriter &w) const override {
    const CpuTuning &tuning = w.tuning();
    ConvPlan p;
    p.bounds = op.getStaticLoopRanges();
    const SmallVector<int64_t> &bounds = p.bounds;
    int64_t NB = bounds[0], OH = bounds[1], OW = bounds[2], F = bounds[3], KH = bounds[4], KW = bounds[5],
            C = bounds[6];
    RegisterTile rt = chooseRegisterTile(OW, F, tuning);
    p.raggedF = rt.n < 4 && F > w.lanes();
    if (rt.n < 4 && !p.raggedF) {
      p.loops = true;
      return p;
    }
    bool streaming = false;
    if (p.raggedF) {
      // One block of every filter, in tiles of whole vectors (the rest
      // split off: write); no register tile divides F, so no filter
      // blocks or panels either.
      p.fc = F;
      p.reg = twoVectorsWhereTheRestStays(chooseRegisterTile(OW, w.lanes(), tuning, /*allowTail=*/true), F, tuning);
    } else {
      int64_t filterRowBytes = KH * KW * C * 4;
      // A conv that streams its filter (streamingFilterBlock): blocks of
      // filters wide enough to read long runs of each filter row, every
      // output row in each block, so that one thread reads each filter
      // byte once.
      int64_t streamBlock = streamingFilterBlock(KH, KW, C, F, OW, NB * OH * OW, tuning);
      // A filter stored in panels for a smaller batch (kiln-hoist-constants
      // lays out a dynamic batch's filters for batch 1, which its range code
      // runs) is read in blocks of one panel at any batch: a block that
      // spans panels would read the whole filter back through its
      // transposes on every call (ResNet-50's 1x1 1024 -> 2048 at batch 8
      // with its fused ops: 37 ms, in panels 6.4). So do convs that stream
      // at both batches in blocks of other widths: MobileNetV2's 576 -> 160
      // on 7x7 streams in half-width blocks of 16 at batch 1 (odd rows) and
      // of 32 at batch 2, whose code read the panels of 16 back through
      // "loops: transpose 10x16x1x1x576" on every call.
      // (A conv that streams anyway takes panels of whole vectors, whose
      // register tiles are chosen within the block below.)
      if (int64_t panel = panelWidth(op);
          panel > 0 && F % panel == 0 && (panel % rt.n == 0 || (streamBlock > 0 && panel % w.lanes() == 0)))
        streamBlock = panel;
      streaming = streamBlock > 0;
      p.fc = streaming ? streamBlock : blockOf(F, rt.n, std::max<int64_t>(rt.n, tuning.l2Bytes / 2 / filterRowBytes));
      // The register tile within a block of fc filters (a multiple of the
      // tile the blocks were sized by), rows split off where a tile that
      // does not divide OW fits the registers better.
      p.reg = chooseRegisterTile(OW, p.fc, tuning, /*allowTail=*/true);
      // Where that tile is narrower than a vector in a block no whole
      // vector divides (40 filters: five tiles of 8 at 512 bits, one load
      // per 7 half-width FMAs), whole vectors and one tile of the rest
      // (16 + 16 + 8), as for the filter counts above.
      //
      // Where the tile is one vector wide in a block of an odd number of
      // vectors (RegNet's 104 filters at 256 bits: 8x8 or 7x8 tiles, fewer
      // than one FMA per load), tiles of two vectors and one tile of the
      // last vector (96 + 8) where they score kTailGain better: RegNetY's
      // 1x1 48 -> 104 on 56x56 0.56 -> 0.52 ms, 104 -> 104 on 28x28
      // 0.28 -> 0.24 (one-cluster models, kiln profile, Zen 1) though their
      // epilogues leave the registers (ragged tiles do); with fixed
      // placement (kiln run, 7 alternating pairs) RegNetY 0.981,
      // MobileNetV3-small 0.964, EfficientNet-B0 0.988, MobileNetV2 0.998.
      // Not over a short reduction, where the epilogue's pass out of the
      // registers costs more than the loads saved: ShuffleNetV2's stem
      // (3x3x3 -> 24) 0.45 -> 0.49 ms. With 32 registers, only where the
      // one-vector tile has too few rows for the FMA's latency
      // (kMinAccumulatorChains; a 1x1 map): its 7 or 8 rows keep the
      // epilogue in registers, which the two-vector tiles lose — on Zen 4
      // EfficientNet-B0's 40 -> 240 on 28x28 190 us against 200-204,
      // RegNetY's 32 -> 48 on 112x112 372 against 454, 104 -> 208 on 28x28
      // 304 against 315, MobileNetV3-small's 40 -> 240 on 14x14 39-41
      // against 42-43 (kiln profile --serial, medians of 3 alternating
      // runs); its squeeze-and-excitation 1152 -> 48 on 1x1 keeps 1x32 +
      // 1x16 (9-11 us against 13-21 with 1x16).
      if (RegisterTile two = chooseRegisterTile(OW, 2 * w.lanes(), tuning, /*allowTail=*/true);
          (tuning.vectorRegisters <= 16 || p.reg.m < kMinAccumulatorChains) && p.reg.n == w.lanes() &&
          p.fc > 2 * w.lanes() && p.fc % (2 * w.lanes()) == w.lanes() &&
          KH * KW * C >= kTwoVectorMinReduction && two.n == 2 * w.lanes() &&
          registerTileScore(two, OW, tuning) > registerTileScore(p.reg, OW, tuning) * kTailGain) {
        rt = p.reg;
        p.raggedF = true;
        p.reg = two;
      } else if (p.reg.n < w.lanes() && p.fc > w.lanes() && p.fc % w.lanes()) {
        rt = p.reg;
        p.raggedF = true;
        p.reg = twoVectorsWhereTheRestStays(chooseRegisterTile(OW, w.lanes(), tuning, /*allowTail=*/true), p.fc,
                                            tuning);
      }
    }
    // (A group of a grouped conv in a block of rows that runs in parallel
    // with the others stays on its thread: Prepare.cpp.)
    p.parallel = 2.0 * NB * OH * OW * F * KH * KW * C >= parallelMinFlops(tuning) && !insideParallelLoop(op);
    if (p.parallel) {
      // Blocks of output rows (and filter blocks) for the threads, each
      // image blocked as at batch 1: a batch adds tasks, it does not make
      // them bigger. (Whole images per task at batch 8 kept a 1x1 conv's
      // 56 x 56 x 256 input slab, 3.2 MB, streaming from memory once per
      // register tile of filters: 10.7-12.2 -> 8.8-9.0 ms a call,
      // ResNet-50 at batch 8 in kiln profile --serial, alternating.)
      int64_t ohb = streaming ? OH : rowBlockForThreads(OH, F / p.fc);
      // Except where the threads would share those blocks unevenly
      // (sharedUnevenly: 3 blocks run as 2 and 1). Then the rows are
      // halved too, each block of filters read twice: MobileNetV2's 1x1
      // 576 -> 96 on 14x14 (3 blocks of 32) 0.45 -> 0.32 ms, 384 -> 96
      // 0.29 -> 0.21 (kiln profile --serial, Zen 1), the model 3.4% faster;
      // RegNetY's 208 -> 208 on 14x14 (13 blocks of 16), the model 1.5%.
      if (streaming && sharedUnevenly(NB * (F / p.fc)) && OH % 2 == 0)
        ohb = OH / 2;
      p.parallel = NB * (OH / ohb) * (F / p.fc) > 1;
      p.forallSizes = {NB > 1 ? 1 : 0, ohb == OH ? 0 : ohb, 0, p.fc == F ? 0 : p.fc};
      // (Ragged filters: from the tile that divides F, whole vectors and
      // the rest, or no registers phase when those do not fit OW.)
      p.cols = registerColumns(p.raggedF ? rt : p.reg, OW, F, p.fc, KH * KW * C, w, p.peelCols);
      p.inRegisters = p.parallel && (!p.raggedF || p.peelCols) && inRegisters(op, w.fusedOf(op), p.cols, KH * KW * C);
    }
    p.cb = channelBlock(op, KH, KW, C, F, p.raggedF ? p.reg : rt, tuning);
    return p;
  }

  std::string describe(linalg::LinalgOp op, const ConvPlan &p, const ScheduleWriter &w) const override {
    const SmallVector<int64_t> &b = p.bounds;
    int64_t NB = b[0], OH = b[1], OW = b[2], F = b[3], KH = b[4], KW = b[5], C = b[6];
    std::string out = llvm::formatv("conv {0}x{1} {2}->{3} on {4}x{5}", KH, KW, C, F, OH, OW).str();
    if (NB > 1) out += llvm::formatv(" x{0}", NB).str();
    if (p.loops) return out + ": loops (too few filters for vectors)";
    if (p.inRegisters) {
      // The tiles the code computes in (registerColumns): with peelCols,
      // whole vectors of filters and one tile of the rest (116 filters:
      // 7x16 tiles and a 7x4 one), not the tile that divides F (7x4).
      out += llvm::formatv(": registers {0}x{1}", p.cols.m, p.cols.n).str();
      if (p.peelCols && p.fc % p.cols.n)
        out += llvm::formatv(" (+ {0}x{1} for the last {1} filters{2})", p.cols.m, p.fc % p.cols.n,
                             p.fc < F ? " of each block" : "")
                   .str();
    } else {
      out += llvm::formatv(": registers {0}x{1}", p.reg.m, p.reg.n).str();
      if (p.reg.tail) out += llvm::formatv(" (+{0} columns)", p.reg.tail).str();
      if (p.raggedF)
        out += llvm::formatv(" (+ {0}x{1} for the last {1} filters{2})", p.reg.m, p.fc % p.reg.n,
                             p.fc < F ? " of each block" : "")
                   .str();
    }
    if (p.fc < F) out += llvm::formatv(", blocks of {0} filters", p.fc).str();
    // (Register tiles that compute the init and epilogue run the whole
    // reduction in registers: no channel blocks.)
    if (p.cb < C && !p.inRegisters) out += llvm::formatv(", {0} channels at a time", p.cb).str();
    if (int64_t panel = panelWidth(op)) out += llvm::formatv(", filter panels of {0}", panel).str();
    if (p.parallel) {
      const SmallVector<int64_t> &fs = p.forallSizes;
      int64_t tasks = (fs[0] ? NB / fs[0] : 1) * (fs[1] ? OH / fs[1] : 1) * (fs[3] ? F / fs[3] : 1);
      out += llvm::formatv(", {0} parallel blocks", tasks).str();
    } else if (auto blocks = op->getParentOfType<scf::ForallOp>()) {
      // A grouped conv's group: the groups in parallel, or the groups one
      // after another in row blocks that run in parallel (Prepare.cpp).
      int64_t n = blocks.getStaticUpperBound().front();
      out += isa<scf::ForOp>(op->getParentOp())
                 ? llvm::formatv(", every group over a block of rows, {0} row blocks in parallel", n).str()
                 : llvm::formatv(", one thread per group, {0} groups in parallel", n).str();
    } else {
      out += ", one thread";
    }
    if (!p.parallel) return out;
    return out + ScheduleWriter::fusedText(w.fusedOf(op)) + (p.inRegisters ? " in registers" : "");
  }

  void write(linalg::LinalgOp op, const ConvPlan &p, ScheduleWriter &w) const override {
    Schedule &schedule = w.schedule();
    Fused f = w.fusedOf(op);
    if (p.loops) {
      if (isa<linalg::Conv2DNhwcFhwcOp>(op)) schedule.op("transpose_conv2d", w.tag(op));
      return w.unfused(f);
    }
    int64_t convSid = w.nextId();
    std::string h = w.tag(op);
    if (isa<linalg::Conv2DNhwcFhwcOp>(op)) h = schedule.op("transpose_conv2d", h);
    const SmallVector<int64_t> &bounds = p.bounds;
    int64_t NB = bounds[0], OW = bounds[2], F = bounds[3], C = bounds[6];
    if (p.inRegisters) {
      // The init and the epilogue in the register tiles: each tile's
      // accumulator starts from the init (the bias) in registers, runs
      // the whole reduction, and is finished (bias, activation,
      // residual) and stored once. Loops: filter tiles outermost (a
      // tile's filter columns stay in cache for every pixel), then
      // rows, then column tiles.
      w.inRegisterTiles(h, bounds, p.forallSizes, f, convSid, {NB > 1 ? 1 : 0, 1, p.cols.m, p.cols.n}, {0, 3, 1, 2},
                        p.peelCols);
      return;
    }
    if (p.parallel)
      h = w.tileFused(h, bounds, p.forallSizes, f);
    else {
      w.unfused(f);
      h = schedule.tile(h, {0, 0, 0, p.fc == F ? 0 : p.fc, 0, 0, 0});
    }
    if (p.cb < C) h = schedule.tile(h, {0, 0, 0, 0, 0, 0, p.cb});
    RegisterTile reg = p.reg;
    auto tiles = [&](const std::string &part, int64_t n) {
      w.registerTiles(part, /*rowDim=*/2, OW, reg, [&](int64_t rows) {
        return SmallVector<int64_t>{NB > 1 ? 1 : 0, 1, rows, n, 1, 1, 1};
      });
    };
    if (!p.raggedF) return tiles(h, reg.n);
    // (Within each block of fc filters: the op's filter loop is the block's.)
    auto [whole, rest] = schedule.split(h, /*dim=*/3, p.fc - p.fc % reg.n);
    tiles(whole, reg.n);
    tiles(rest, p.fc % reg.n);
  }
};

}  // namespace

const OpStrategy &convStrategy() {
  static const ConvStrategy strategy;
  return strategy;
}

}  // namespace kiln::lowering::strategy
