// The shared pieces of kiln-cpu-strategy's schedules (see Writer.h).
#include "lowering/cpu/strategy/Writer.h"
#include "lowering/cpu/strategy/OpStrategy.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/bit.h"

#include <algorithm>

namespace kiln::lowering::strategy {

ScheduleWriter::ScheduleWriter(MLIRContext *context, const CpuTuning &tuning)
    : tuning_(tuning), lanes_(tuning.lanes()), builder_(context) {}

void ScheduleWriter::fuseIntoAnchors(ModuleOp module) {
  SmallVector<linalg::LinalgOp> anchors;
  module.walk([&](linalg::LinalgOp op) {
    if (isAnchor(op)) anchors.push_back(op);
  });
  for (linalg::LinalgOp op : anchors) {
    Fused f = fusable(op);
    if (f.init) claimed_.insert(f.init);
    // (The strategy decides with the fused ops known.)
    fused_[op] = f;
    if (f.epilogue) {
      const OpStrategy *owner = strategyFor(op);
      if (canAccumulateApart(f) && owner && owner->accumulatesApart(op, *this))
        accumulateApart(f.init);
      else
        f.epilogue = inPlaceEpilogue(f.epilogue, op->getResult(0));
      claimed_.insert(f.epilogue);
    }
    fused_[op] = f;
  }
}

std::string ScheduleWriter::tag(Operation *op) {
  op->setAttr(kStrategyIdAttr, builder_.getI64IntegerAttr(sid_));
  return schedule_.match(sid_++);
}

std::string ScheduleWriter::description() const {
  std::vector<std::pair<bool, std::string>> lines = described_;
  std::stable_sort(lines.begin(), lines.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<std::pair<std::string, int>> counted;
  for (const auto &[minor, line] : lines) {
    auto it = std::find_if(counted.begin(), counted.end(), [&](const auto &c) { return c.first == line; });
    if (it == counted.end())
      counted.push_back({line, 1});
    else
      ++it->second;
  }
  std::string out;
  for (const auto &[line, n] : counted)
    out += (out.empty() ? "" : "; ") + line + (n > 1 ? " x" + std::to_string(n) : "");
  return out;
}

std::string ScheduleWriter::fusedText(const Fused &f) {
  std::string out;
  if (f.init) out += isa<linalg::FillOp>(f.init) ? " + fill" : " + init";
  if (!f.epilogue) return out;
  // The epilogue's arithmetic, each op once: arith.maximumf -> maximum.
  SmallVector<std::string> names;
  linalg::GenericOp epilogue = f.epilogue;
  for (Operation &op : epilogue.getBody()->without_terminator()) {
    llvm::StringRef name = op.getName().stripDialect();
    if (op.getDialect() && op.getDialect()->getNamespace() == "arith" && name.ends_with("f") && name != "negf")
      name = name.drop_back();
    if (name == "constant" || llvm::is_contained(names, name.str())) continue;
    names.push_back(name.str());
  }
  if (names.size() > 5) {
    names.resize(5);
    names.push_back("...");
  }
  return out + " + epilogue(" + llvm::join(names, ", ") + ")";
}

int64_t ScheduleWriter::idOf(linalg::LinalgOp op) { return op->getAttrOfType<IntegerAttr>(kStrategyIdAttr).getInt(); }

void ScheduleWriter::elementwise(const std::string &h0, llvm::ArrayRef<int64_t> bounds) {
  int64_t inner = bounds.back();
  int64_t width = int64_t(llvm::bit_floor(uint64_t(std::min(inner, 2 * lanes_))));
  SmallVector<int64_t> sizes(bounds.size(), 1), vec(bounds.size(), 1);
  for (size_t i = 0; i < bounds.size(); ++i)
    if (bounds[i] == 1) sizes[i] = 0;
  sizes.back() = width == inner ? 0 : width;
  vec.back() = width;
  int loops = 0;
  for (int64_t t : sizes) loops += t != 0;
  std::string h = schedule_.tile(h0, sizes);
  if (inner % width == 0) {
    schedule_.vectorize(h);
    return;
  }
  // Full tiles, then one static remainder: no masks once the bounds
  // fold (vector sizes equal the tiles').
  auto [main, rest] = schedule_.peelInnermost(h, loops);
  schedule_.vectorize(main, vec);
  vec.back() = inner % width;
  schedule_.vectorize(rest, vec);
}

std::string ScheduleWriter::parallelRows(const std::string &h, linalg::LinalgOp op, SmallVector<int64_t> &bounds) {
  SmallVector<int64_t> blocks = parallelRowBlocks(op, bounds);
  if (blocks.empty()) return h;
  for (size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i]) bounds[i] = blocks[i];
  return schedule_.tileForall(h, blocks);
}

ScheduleWriter::FusedParts ScheduleWriter::tileFusedParts(std::string h, llvm::ArrayRef<int64_t> bounds,
                                                          llvm::ArrayRef<int64_t> sizes, const Fused &f) {
  FusedParts parts;
  std::string forall;
  if (f.epilogue) {
    auto [epi, loop] = schedule_.tileForallWithLoop(tag(f.epilogue), sizes);
    parts.epilogue = epi;
    std::tie(h, forall) = schedule_.fuseInto(h, loop);
  } else {
    SmallVector<int64_t> opSizes(sizes.begin(), sizes.end());
    opSizes.resize(bounds.size(), 0);
    std::tie(h, forall) = schedule_.tileForallWithLoop(h, opSizes);
  }
  parts.op = h;
  if (f.init) parts.init = schedule_.fuseInto(tag(f.init), forall).first;
  return parts;
}

std::string ScheduleWriter::tileFused(const std::string &h, llvm::ArrayRef<int64_t> bounds,
                                      llvm::ArrayRef<int64_t> sizes, const Fused &f) {
  SmallVector<int64_t> tileBounds(bounds.begin(), bounds.begin() + sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i]) tileBounds[i] = sizes[i];
  FusedParts parts = tileFusedParts(h, bounds, sizes, f);
  if (f.epilogue) elementwise(parts.epilogue, tileBounds);
  if (f.init) elementwise(parts.init, tileBounds);
  return parts.op;
}

void ScheduleWriter::unfused(Fused f) {
  if (f.init) elementwise(tag(f.init), f.init.getStaticLoopRanges());
  if (f.epilogue) elementwise(tag(f.epilogue), f.epilogue.getStaticLoopRanges());
}

void ScheduleWriter::inRegisterTiles(const std::string &h, llvm::ArrayRef<int64_t> bounds,
                                     llvm::ArrayRef<int64_t> forallSizes, const Fused &f, int64_t opSid,
                                     llvm::ArrayRef<int64_t> regSizes, llvm::ArrayRef<int64_t> order,
                                     bool peelFilters) {
  FusedParts parts = tileFusedParts(h, bounds, forallSizes, f);
  // (Tiled named ops lose their tag.)
  schedule_.retag(parts.op, opSid);
  if (f.epilogue) schedule_.retag(parts.epilogue, idOf(f.epilogue));
  if (f.init) schedule_.retag(parts.init, idOf(f.init));
  SmallVector<int64_t> sizes(regSizes), loops(order), reductions(bounds.size(), 1);
  if (!f.epilogue) {
    sizes.resize(bounds.size(), 0);
    if (!loops.empty())
      for (size_t d = regSizes.size(); d < bounds.size(); ++d) loops.push_back(int64_t(d));
  }
  std::fill_n(reductions.begin(), regSizes.size(), 0);
  Schedule &r = registerPhase_;
  std::string loop = r.fuse(r.match(f.epilogue ? idOf(f.epilogue) : opSid), sizes, loops).second;
  auto finish = [&](auto handleOf) {
    std::string t = r.tile(handleOf(opSid), reductions);
    r.vectorize(r.op("decompose", t));
    if (f.epilogue) r.vectorize(handleOf(idOf(f.epilogue)));
    if (f.init) r.vectorize(handleOf(idOf(f.init)));
  };
  if (!peelFilters) return finish([&](int64_t id) { return r.matchIn(id, loop); });
  // The filter loop peeled, its bounds folded, each op's two tiles
  // (whole, rest) taken in turn.
  r.peelLoop(loop);
  r.canonicalize();
  llvm::DenseMap<int64_t, SmallVector<std::string>> halves;
  for (int64_t id : {opSid, f.epilogue ? idOf(f.epilogue) : -1, f.init ? idOf(f.init) : -1})
    if (id >= 0) halves[id] = r.splitHandle(r.match(id), 2);
  for (int piece : {0, 1})
    finish([&](int64_t id) { return halves[id][piece]; });
}

}  // namespace kiln::lowering::strategy
