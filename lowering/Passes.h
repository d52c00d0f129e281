// kiln's own MLIR passes (declared in Passes.td, one per file).
#pragma once

#include "lowering/Partition.h"
#include "lowering/Program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <map>
#include <set>
#include <string>

namespace kiln::lowering {

#define GEN_PASS_DECL
#include "lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/Passes.h.inc"

/// kiln-place-ops asking `oracle` which kernels exist (the runtime's
/// registry, injected by the compile service); `measuredKernels` maps the
/// signatures of `auto` ops a kernel ran faster to the figures (the reason).
std::unique_ptr<mlir::Pass> createKilnPlaceOps(const ops::PlacementOptions &modes,
                                               const std::set<std::string> &forceKernel,
                                               const KernelOracle *oracle,
                                               const std::map<std::string, std::string> &measuredKernels = {});

/// The function generated code calls on a fault (kiln-guard-traps), and the
/// module attribute listing the fault sites' messages, by site id.
inline constexpr llvm::StringLiteral kFaultSymbol = "kiln_report_fault";
inline constexpr llvm::StringLiteral kFaultSitesAttr = "kiln.fault_sites";
/// What generated loops call to learn that their call was cancelled
/// (kiln-cancel-points): `int64_t kiln_cancel_requested(void)`, non-zero = stop.
inline constexpr llvm::StringLiteral kCancelSymbol = "kiln_cancel_requested";

/// What a kernel calls for its scratch buffer (kiln-scratch-buffers):
/// `void *kiln_scratch_acquire(int64_t bytes)` at its start and
/// `void kiln_scratch_release(void *)` before it returns; the module
/// attribute holding the bytes.
inline constexpr llvm::StringLiteral kScratchAcquireSymbol = "kiln_scratch_acquire";
inline constexpr llvm::StringLiteral kScratchReleaseSymbol = "kiln_scratch_release";
inline constexpr llvm::StringLiteral kScratchBytesAttr = "kiln.scratch_bytes";

/// Prefix of the functions kiln-outline-clusters creates.
inline constexpr llvm::StringLiteral kClusterPrefix = "kiln_cluster";

/// Attribute on a hoisted weight argument that carries its value.
inline constexpr llvm::StringLiteral kWeightAttrName = "kiln.weight";
/// tosa.custom domain and name of the op that reads a Winograd-stored
/// filter back as FHWC (implementation_attrs "m=4"), and its op key.
inline constexpr llvm::StringLiteral kWinogradDomain = "kiln";
inline constexpr llvm::StringLiteral kWinogradFilterOp = "winograd_filter";
inline constexpr llvm::StringLiteral kWinogradFilterKey = "tosa.custom:kiln.winograd_filter";

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
