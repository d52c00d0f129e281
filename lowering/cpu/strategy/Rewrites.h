// The rewrites kiln-cpu-strategy makes around its schedules (internal to
// lowering/cpu). Before the schedule, in this order (Prepare.cpp, Pad.cpp,
// RowFusion.cpp),
// so that the op strategies see the forms they schedule well; after it
// (Panels.cpp), reads of panel-stored weights become slices of the panels.
//
// Thread-safety: each rewrites the module it is given.
#pragma once

#include "lowering/cpu/CpuStrategy.h"

#include "mlir/IR/BuiltinOps.h"

namespace kiln::lowering::strategy {

/// depthwise_conv_2d_nhwc_hwcm with one filter per channel (what TOSA's
/// depthwise_conv2d lowers to) as depthwise_conv_2d_nhwc_hwc; elementwise
/// ops after it lose their unit innermost loop.
void dropUnitMultiplier(mlir::ModuleOp module);
/// A grouped conv (conv_2d_nhwgc_gfhwc, what kiln-raise-linalg makes of a
/// linalg export's grouped convs) as a loop over its groups of FHWC convs
/// on slices, each scheduled by the conv strategy.
void groupedConvsAsLoops(mlir::ModuleOp module, const CpuTuning &tuning);
/// An FHWC conv whose filter is the transpose of an HWCF tensor reads the
/// HWCF tensor itself (conv_2d_nhwc_hwcf).
void hwcfFilters(mlir::ModuleOp module);
/// tensor.pad of static shapes with a constant value: the source copied
/// into the interior of a new tensor, fills of the border only. (Pad.cpp)
void decomposePads(mlir::ModuleOp module);
/// 1x1 convs whose matmul register tile is better as linalg.matmul on
/// collapsed views, with their init and epilogue (strided ones on a copy
/// of the pixels they read).
void convs1x1AsMatmuls(mlir::ModuleOp module, const CpuTuning &tuning);
/// The loops fuseAttention and fuseRowChains make carry what they fused
/// ("row chain in blocks of 4 rows, in parallel") for the strategy's
/// description.
inline constexpr llvm::StringLiteral kFusedRowsAttr = "kiln.fused_rows";
/// Attention, softmax(Q Kᵀ) x V, as one scf.forall over (batch, blocks of
/// query rows) with the softmax and Q Kᵀ fused into its tiles.
/// (RowFusion.cpp)
void fuseAttention(mlir::ModuleOp module, const CpuTuning &tuning);
/// Chains of row-wise ops with row reductions (layer norms, RMS norms, a
/// softmax) as one loop over blocks of rows with the chain fused into it.
/// (RowFusion.cpp)
void fuseRowChains(mlir::ModuleOp module, const CpuTuning &tuning);
/// A batch-1 batch_matmul flattened for its elementwise epilogue as a 2-D
/// matmul, and the elementwise op after the epilogue fused into it.
void flattenMatmulEpilogues(mlir::ModuleOp module);

/// Slices of panel-stored conv filters (after the schedule) as slices of
/// the panels. (Panels.cpp)
void readPanels(mlir::ModuleOp module);
/// Slices of panel-stored matmul weights as slices of the panels.
/// (Panels.cpp)
void readMatmulPanels(mlir::ModuleOp module);

}  // namespace kiln::lowering::strategy
