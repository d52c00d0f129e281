// kiln's graph passes on TOSA: rewrites at load, weight hoisting, shape specialization, placement and cluster outlining.
// Declared in Passes.td beside this file, one pass per file.
#pragma once

#include "lowering/ir/Conventions.h"
#include "lowering/graph/Partition.h"
#include "lowering/graph/Program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <map>
#include <set>
#include <string>

namespace kiln::lowering {

#define GEN_PASS_DECL
#include "lowering/graph/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/graph/Passes.h.inc"

/// Resource keys of the blobs kiln makes at load, which no one else holds:
/// weight literals decoded outside MLIR's parser (`__kiln_hex_N`,
/// HexLiterals.cpp) and values kiln-fold-constants computed
/// (`kiln_folded...`, the blob manager suffixing repeats). kiln-fold-constants
/// may change those in place.
inline constexpr llvm::StringLiteral kLiftedBlobPrefix = "__kiln_hex_";
inline constexpr llvm::StringLiteral kFoldedBlobName = "kiln_folded";

/// Registers every kiln pass (each room's) and the pipeline stages, with
/// MLIR's own passes (once): what kiln-opt and the runtime parse pipelines
/// against.
void registerKilnPassesAndPipelines();

/// kiln-place-ops asking `oracle` which kernels exist (the runtime's
/// registry, injected by the compile service); `measuredKernels` maps the
/// signatures of `auto` ops a kernel ran faster to the figures (the reason).
std::unique_ptr<mlir::Pass> createKilnPlaceOps(const ops::PlacementOptions &modes,
                                               const std::set<std::string> &forceKernel,
                                               const KernelOracle *oracle,
                                               const std::map<std::string, std::string> &measuredKernels = {});

/// Specializes `function` in `module` to `argTypes` (see kiln-specialize-shapes).
mlir::LogicalResult specializeShapes(mlir::ModuleOp module, llvm::StringRef function,
                                     llvm::ArrayRef<mlir::Type> argTypes);
/// The constants kiln-hoist-constants turns into weights, in argument
/// order (walk order, identical (value, type) pairs once), and every op it
/// replaces. The runtime uses the same plan to find a function's weights
/// without compiling (warm cache starts).
struct HoistedWeight {
  mlir::ElementsAttr value;  // in the stored layout
  mlir::Type type;           // of `value`
  mlir::Location loc;
  /// Stored HWCF for a graph that reads FHWC (see WeightLayouts).
  bool filterHWCF = false;
  /// Stored Winograd-transformed for F(m x m, 3 x 3) (0: not), read back
  /// through tosa.custom kiln.winograd_filter (see WeightLayouts).
  int winogradTile = 0;
  /// Elements of padding at the end of each row (the innermost dimension),
  /// read back through tosa.slice (see WeightLayouts::padMatmulWeights).
  int64_t rowPadding = 0;
  /// Filters per panel of a filter stored [F/fc, KH, KW, C, fc] (0: not;
  /// see WeightLayouts::panelStreamingFilters).
  int64_t filterBlock = 0;
  /// Columns per panel of a matmul B weight stored [N/w, K, w] (0: not;
  /// see WeightLayouts::panelMatmulWeights).
  int64_t matmulPanel = 0;
};
struct HoistPlan {
  std::vector<HoistedWeight> weights;
  std::vector<std::pair<mlir::Operation *, unsigned>> uses;  // op -> weight index
};
inline constexpr int64_t kDefaultHoistMinElements = 16;
HoistPlan planHoisting(mlir::func::FuncOp fn, int64_t minElements, const WeightLayouts &layouts = {});
/// Hoists large constants of every public function (see kiln-hoist-constants).
mlir::LogicalResult hoistConstants(mlir::ModuleOp module, int64_t minElements, const WeightLayouts &layouts = {});


}  // namespace kiln::lowering
