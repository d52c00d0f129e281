// The transform-dialect schedule kiln-cpu-strategy writes, as text: one
// method per transform op, handles named %h<N>, and the epilogue that
// lowers what the schedule vectorized (internal to lowering/cpu).
//
// Thread-safety: one Schedule per pass run.
#pragma once

#include "lowering/cpu/strategy/Support.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>
#include <utility>

namespace kiln::lowering::strategy {

/// The schedule text, one op after another.
class Schedule {
public:
  /// `%out` = tile `%in` by `sizes`, the loops in the order `interchange`
  /// when given; returns the tiled op's handle.
  std::string tile(const std::string &in, llvm::ArrayRef<int64_t> sizes, llvm::ArrayRef<int64_t> interchange = {}) {
    if (llvm::all_of(sizes, [](int64_t s) { return s == 0; })) return in;
    return tiling("tile_using_for", in, sizes, interchange.empty() ? "" : " interchange = " + list(interchange));
  }
  /// Peels the innermost loop of the tiling that produced `tiled` into full
  /// tiles and the remainder; returns the ops tiled inside each.
  std::pair<std::string, std::string> peelInnermost(const std::string &tiled, int loops) {
    return peelLoop(tiled, loops - 1);
  }
  /// Peels loop `index` (0: outermost) of the tiling that produced `tiled`
  /// into full tiles and the remainder; returns the ops tiled inside each.
  std::pair<std::string, std::string> peelLoop(const std::string &tiled, int index) {
    std::string loop = fresh(), main = fresh(), rest = fresh();
    body += llvm::formatv("    {0} = transform.cast {1}_loops#{2} : !transform.any_op to !transform.op<\"scf.for\">\n"
                          "    {3}, {4} = transform.loop.peel {0} : (!transform.op<\"scf.for\">) "
                          "-> (!transform.any_op, !transform.any_op)\n",
                          loop, tiled, index, main, rest)
                .str();
    std::string a = fresh(), b = fresh();
    body += llvm::formatv("    {0} = transform.structured.match interface{{LinalgOp} in {1} : (!transform.any_op) -> !transform.any_op\n"
                          "    {2} = transform.structured.match interface{{LinalgOp} in {3} : (!transform.any_op) -> !transform.any_op\n",
                          a, main, b, rest)
                .str();
    return {a, b};
  }
  /// Splits `in` along loop `dim` after `at` iterations; returns the two
  /// parts' handles (both static when `in` is).
  std::pair<std::string, std::string> split(const std::string &in, int64_t dim, int64_t at) {
    std::string parts = fresh(), low = fresh(), high = fresh();
    body += llvm::formatv("    {0} = transform.structured.split {1} after {2} {{dimension = {3} : i64} : !transform.any_op\n"
                          "    {4}, {5} = transform.split_handle {0} : (!transform.any_op) -> (!transform.any_op, "
                          "!transform.any_op)\n",
                          parts, in, at, dim, low, high)
                .str();
    return {low, high};
  }
  /// Tiles `in` by `sizes` into an scf.forall (parallel tiles); returns the
  /// tiled op's handle.
  std::string tileForall(const std::string &in, llvm::ArrayRef<int64_t> sizes) {
    std::string out = fresh();
    body += llvm::formatv("    {0}, {0}_forall = transform.structured.tile_using_forall {1} tile_sizes {2} "
                          ": (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n",
                          out, in, list(sizes))
                .str();
    return out;
  }
  /// Like tileForall, and also returns the scf.forall's handle.
  std::pair<std::string, std::string> tileForallWithLoop(const std::string &in, llvm::ArrayRef<int64_t> sizes) {
    std::string out = tileForall(in, sizes);
    return {out, out + "_forall"};
  }
  /// Fuses the producer `producer` into the loop `loop` (tiles of it as
  /// the loop's body needs them); returns the fused op's and the loop's new
  /// handles.
  std::pair<std::string, std::string> fuseInto(const std::string &producer, const std::string &loop) {
    std::string op = fresh(), newLoop = fresh();
    body += llvm::formatv("    {0}, {1} = transform.structured.fuse_into_containing_op {2} into {3} "
                          ": (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)\n",
                          op, newLoop, producer, loop)
                .str();
    return {op, newLoop};
  }
  /// Splits the reduction of `in` into vectors of `sizes`' width
  /// (partial results in a vector, merged once at the end) and vectorizes
  /// the three parts.
  void tileReduction(const std::string &in, llvm::ArrayRef<int64_t> sizes) {
    std::string fill = fresh(), split = fresh(), comb = fresh(), loop = fresh();
    body += llvm::formatv("    {0}, {1}, {2}, {3} = transform.structured.tile_reduction_using_for {4} by tile_sizes = {5} "
                          ": (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, "
                          "!transform.any_op)\n",
                          fill, split, comb, loop, in, list(sizes))
                .str();
    vectorize(split);
    vectorize(comb);
    vectorize(fill);
  }
  /// Tiles `in` by `sizes` (loops in the order `interchange`, when given)
  /// and fuses its producers into the tiles greedily, through destinations
  /// too (an accumulator init becomes a tile's init); returns the tiled
  /// op's handle and the outermost loop's.
  std::pair<std::string, std::string> fuse(const std::string &in, llvm::ArrayRef<int64_t> sizes,
                                           llvm::ArrayRef<int64_t> interchange) {
    std::string out =
        tiling("fuse", in, sizes, (interchange.empty() ? "" : " interchange " + list(interchange)) + " {apply_cleanup}");
    return {out, out + "_loops#0"};
  }
  /// Tags the ops of `h` with `sid` (tiled named ops lose the tag of the
  /// op they were tiled from), for a later schedule to match.
  void retag(const std::string &h, int64_t sid) {
    std::string p = fresh();
    body += llvm::formatv("    {0} = transform.param.constant {1} : i64 -> !transform.param<i64>\n"
                          "    transform.annotate {2} \"{3}\" = {0} : !transform.any_op, !transform.param<i64>\n",
                          p, sid, h, kStrategyIdAttr)
                .str();
  }
  /// Peels the scf.for `loop` into its whole steps and the remainder;
  /// returns the two loops' handles.
  std::pair<std::string, std::string> peelLoop(const std::string &loop) {
    std::string l = fresh(), main = fresh(), rest = fresh();
    body += llvm::formatv("    {0} = transform.cast {1} : !transform.any_op to !transform.op<\"scf.for\">\n"
                          "    {2}, {3} = transform.loop.peel {0} : (!transform.op<\"scf.for\">) "
                          "-> (!transform.any_op, !transform.any_op)\n",
                          l, loop, main, rest)
                .str();
    return {main, rest};
  }
  /// Canonicalizes the functions (handles to ops it replaces die).
  void canonicalize() {
    std::string fns = fresh();
    body += llvm::formatv("    {0} = transform.structured.match ops{{[\"func.func\"]} in %root "
                          ": (!transform.any_op) -> !transform.any_op\n"
                          "    transform.apply_patterns to {0} {{\n      transform.apply_patterns.canonicalization\n"
                          "    } : !transform.any_op\n",
                          fns)
                .str();
  }
  /// The `n` ops of `h`, one handle each (in the order of the IR).
  SmallVector<std::string> splitHandle(const std::string &h, int n) {
    SmallVector<std::string> parts;
    std::string types, names;
    for (int i = 0; i < n; ++i) {
      parts.push_back(fresh());
      names += (i ? ", " : "") + parts.back();
      types += std::string(i ? ", " : "") + "!transform.any_op";
    }
    body += llvm::formatv("    {0} = transform.split_handle {1} : (!transform.any_op) -> ({2})\n", names, h, types)
                .str();
    return parts;
  }
  /// The op tagged `sid` inside `container`.
  std::string matchIn(int64_t sid, const std::string &container) {
    std::string h = fresh();
    body += llvm::formatv("    {0} = transform.structured.match attributes{{{1} = {2} : i64} in {3} "
                          ": (!transform.any_op) -> !transform.any_op\n",
                          h, kStrategyIdAttr, sid, container)
                .str();
    return h;
  }
  std::string match(int64_t sid) {
    std::string h = fresh();
    body += llvm::formatv("    {0} = transform.structured.match attributes{{{1} = {2} : i64} in %root "
                          ": (!transform.any_op) -> !transform.any_op\n",
                          h, kStrategyIdAttr, sid)
                .str();
    return h;
  }
  std::string op(llvm::StringRef name, const std::string &in) {
    std::string h = fresh();
    body += llvm::formatv("    {0} = transform.structured.{1} {2} : (!transform.any_op) -> !transform.any_op\n", h,
                          name, in)
                .str();
    return h;
  }
  void vectorize(const std::string &h, llvm::ArrayRef<int64_t> sizes = {}) {
    body += "    transform.structured.vectorize " + h;
    if (!sizes.empty()) body += " vector_sizes " + list(sizes);
    body += " : !transform.any_op\n";
  }
  /// The schedule; `cleanup`: with the vector cleanup and lowering after
  /// the ops (once, after the last schedule applied); `foldSubsets`: the
  /// cleanup also folds the slices between vector reads and writes (where
  /// ops' inits and epilogues were fused into their register tiles: the
  /// init then reaches the accumulator and the accumulator the epilogue in
  /// registers).
  std::string text(bool cleanup = true, bool foldSubsets = false) const {
    return std::string("module attributes {transform.with_named_sequence} {\n"
                       "  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {\n") +
           body + (cleanup ? epilogue(foldSubsets) : std::string()) + "    transform.yield\n  }\n}\n";
  }
  bool empty() const { return body.empty(); }

private:
  /// `%out`, `%out_loops` = transform.structured.`op` `in` tile_sizes
  /// `sizes` `extra` (a loop per nonzero size); returns `%out`.
  std::string tiling(llvm::StringRef op, const std::string &in, llvm::ArrayRef<int64_t> sizes,
                     const std::string &extra) {
    int loops = 0;
    for (int64_t s : sizes) loops += s != 0;
    std::string types = "!transform.any_op";
    for (int i = 0; i < loops; ++i) types += ", !transform.any_op";
    std::string out = fresh();
    body += llvm::formatv("    {0}, {0}_loops:{1} = transform.structured.{2} {3} tile_sizes {4}{5} "
                          ": (!transform.any_op) -> ({6})\n",
                          out, loops, op, in, list(sizes), extra, types)
                .str();
    return out;
  }
  static std::string epilogue(bool foldSubsets) {
    std::string subsets = foldSubsets ? "      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers\n"
                                        "      transform.apply_patterns.tensor.merge_consecutive_insert_extract_slice\n"
                                      : "";
    return R"(    %fns = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %fns {
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.sink_ops
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %fns {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
)" + subsets + R"(      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fns : !transform.any_op
    %loops = transform.structured.match ops{["scf.for"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.foreach %loops : !transform.any_op {
    ^bb0(%l: !transform.any_op):
      transform.loop.hoist_loop_invariant_subsets %l : !transform.any_op
    }
    transform.apply_patterns to %fns {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fns : !transform.any_op
    transform.apply_patterns to %fns {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_shape_cast
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerreduction"
    } : !transform.any_op
)";
  }
  std::string fresh() { return "%h" + std::to_string(next++); }
  std::string body;
  int next = 0;
};

}  // namespace kiln::lowering::strategy
