// The names kiln's IR conventions use across every room of lowering/ (and
// the runtime symbols generated code calls): the specialized function, the
// runtime entry points, module and argument attributes, custom ops. Only
// names here: no MLIR, so any room (and jit/) may include it.
//
// Thread-safety: constants.
#pragma once

#include "llvm/ADT/StringRef.h"

namespace kiln::lowering {

/// The function a specialization keeps (kiln-specialize-shapes) and every
/// later stage works on.
inline constexpr llvm::StringLiteral kSpecializedFnName = "kiln_fn";

/// The packed entry point (`void kiln_entry(void **buffers)`: inputs, then
/// weights, then outputs; kiln-entry-wrapper).
inline constexpr llvm::StringLiteral kEntryName = "kiln_entry";

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

/// Module attribute: what kiln-cpu-strategy made of the kernel's ops, in a
/// few words per op (profiles show it beside each kernel's %peak).
inline constexpr llvm::StringLiteral kStrategyAttr = "kiln.strategy";

/// Prefix of the functions kiln-outline-clusters creates.
inline constexpr llvm::StringLiteral kClusterPrefix = "kiln_cluster";

/// Attribute on a hoisted weight argument that carries its value.
inline constexpr llvm::StringLiteral kWeightAttrName = "kiln.weight";
/// tosa.custom domain and name of the op that reads a Winograd-stored
/// filter back as FHWC (implementation_attrs "m=4"), and its op key.
inline constexpr llvm::StringLiteral kWinogradDomain = "kiln";
inline constexpr llvm::StringLiteral kWinogradFilterOp = "winograd_filter";
inline constexpr llvm::StringLiteral kWinogradFilterKey = "tosa.custom:kiln.winograd_filter";
/// tosa.custom (domain kWinogradDomain, "kiln") of a grouped conv, which
/// TOSA has no op for (ResNeXt, RegNet): input [N, H, W, G, C], filter [G,
/// F, KH, KW, C], result [N, OH, OW, G, F]; discardable attributes stride
/// [2] and dilation [2] (ones when absent), pad [4] (top, bottom, left,
/// right; zeros when absent). kiln-raise-linalg makes it; it runs on its
/// handwritten kernel (kernels/NN.cpp) or, lowered by
/// kiln-grouped-conv-to-linalg, as linalg.conv_2d_nhwgc_gfhwc.
inline constexpr llvm::StringLiteral kGroupedConvOp = "grouped_conv2d";
inline constexpr llvm::StringLiteral kGroupedConvKey = "tosa.custom:kiln.grouped_conv2d";

}  // namespace kiln::lowering
