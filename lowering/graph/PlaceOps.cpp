//===- PlaceOps.cpp - each op on JIT code or a handwritten kernel ----------===//
//
// kiln-place-ops: for every op of kiln_fn except constants, records where it
// runs (kiln.placement), and for kernel-placed ops which kernel and why
// (kiln.kernel, kiln.reason); a kernel requested but not available leaves
// the op on JIT with a kiln.note. Modes per op name (auto | jit | kernel)
// come from the options; lowerability from the op table; kernels from an
// injected KernelOracle (or, in kiln-opt, the `kernels` list). An `auto`
// anchor op both can run is marked kiln.alternative for placement by
// measurement, or placed on its kernel when the measurements say so.
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/OpView.h"
#include "lowering/graph/Passes.h"
#include "lowering/graph/ProgramImpl.h"
#include "runtime/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNPLACEOPS
#include "lowering/graph/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

std::set<std::string> splitList(llvm::StringRef list) {
  llvm::SmallVector<llvm::StringRef> items;
  list.split(items, ',', -1, /*KeepEmpty=*/false);
  std::set<std::string> out;
  for (llvm::StringRef i : items) out.insert(i.trim().str());
  return out;
}

/// kiln-opt's stand-in for the kernel registry: the listed ops have a
/// kernel that takes any use ("<op>_kernel").
class ListedKernels final : public KernelOracle {
public:
  explicit ListedKernels(std::set<std::string> ops) : ops_(std::move(ops)) {}
  llvm::Expected<std::string> kernelFor(llvm::StringRef op, llvm::ArrayRef<TensorType>, const ops::AttrMap &,
                                        llvm::ArrayRef<TensorType>) const override {
    if (!ops_.count(op.str())) return error(ErrorCode::kUnsupported, "no kernel");
    std::string name = op.str() + "_kernel";
    for (char &c : name)
      if (c == '.' || c == ':') c = '_';
    return name;
  }

private:
  std::set<std::string> ops_;
};

struct PlaceOps : impl::KilnPlaceOpsBase<PlaceOps> {
  using KilnPlaceOpsBase::KilnPlaceOpsBase;
  PlaceOps(const ops::PlacementOptions &m, const std::set<std::string> &force, const KernelOracle *o,
           const std::map<std::string, std::string> &measured)
      : placement(m), forced(force), oracle(o), measuredKernels(measured), injected(true) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(kSpecializedFnName);
    if (!fn || fn.isExternal()) {
      module.emitError() << "kiln-place-ops: no @" << kSpecializedFnName << " to place";
      return signalPassFailure();
    }
    ops::PlacementOptions modes = placement;
    std::set<std::string> force = forced;
    std::unique_ptr<ListedKernels> listed;
    const KernelOracle *kernels = oracle;
    if (!injected) {  // options from the pipeline text (kiln-opt)
      auto parsed = ops::parseOpModes(this->modes);
      if (!parsed) {
        module.emitError() << "kiln-place-ops: " << toStatus(parsed.takeError()).message;
        return signalPassFailure();
      }
      modes = *parsed;
      force = splitList(forceKernel);
      listed = std::make_unique<ListedKernels>(splitList(this->kernels));
      kernels = listed.get();
    }
    Builder b(module.getContext());
    for (Operation &op : fn.getBody().front().without_terminator()) {
      if (isFreeOp(&op)) continue;
      bool isTosa = op.getDialect() && op.getDialect()->getNamespace() == "tosa";
      KernelView view = kernelView(&op);
      std::string why;
      std::vector<TensorType> inTypes, outTypes;
      std::string kernel = kernelFor(&op, view, *kernels, why, &inTypes, &outTypes);
      bool canKernel = !kernel.empty();
      // kiln.winograd_filter (a Winograd-stored filter read back) lowers
      // through kiln-winograd-conv; the conv reading it runs in Winograd
      // form only on JIT, so it is not timed against a kernel.
      // kiln.grouped_conv2d lowers through kiln-grouped-conv-to-linalg.
      bool canJit = !isTosa || tosaOpHasLowering(op.getName().getStringRef()) || view.key == kWinogradFilterKey ||
                    view.key == kGroupedConvKey;
      bool winograd = false;
      if (auto conv = dyn_cast<tosa::Conv2DOp>(op))
        if (Operation *filter = conv.getWeight().getDefiningOp()) winograd = kernelKey(filter) == kWinogradFilterKey;
      bool forcedKernel = force.count(view.key) != 0;
      OpMode mode = forcedKernel ? OpMode::kKernel : modes.modeFor(view.key);
      bool onKernel;
      std::string reason;
      if (mode == OpMode::kKernel) {
        onKernel = canKernel;
        reason = forcedKernel ? "JIT compile failed" : "mode=kernel";
        if (!canKernel && !canJit) {
          op.emitError() << "'" << view.key << "' has no lowering and no kernel: " << why;
          return signalPassFailure();
        }
        if (!canKernel)
          op.setAttr(kNoteAttr, b.getStringAttr(view.key + ": mode=kernel, kept on JIT (" + why + ")"));
      } else {
        onKernel = !canJit;
        reason = "no lowering";
        if (!canJit && !canKernel) {
          op.emitError() << "'" << view.key << "' has no lowering and no kernel (" << why << ")";
          return signalPassFailure();
        }
        if (mode == OpMode::kAuto && canJit && canKernel && modes.measuring() && isAnchorOp(&op) &&
            !winograd) {
          // Placement by measurement: on the kernel once it was timed faster.
          auto measured = measuredKernels.find(opSignature(view.key, inTypes, view.attrs, outTypes));
          if (measured != measuredKernels.end()) {
            onKernel = true;
            reason = measured->second;
          } else {
            op.setAttr(kAlternativeAttr, b.getStringAttr(kernel));
          }
        }
      }
      op.setAttr(kPlacementAttr, b.getStringAttr(onKernel ? "kernel" : "jit"));
      if (onKernel) {
        op.setAttr(kKernelAttr, b.getStringAttr(kernel));
        op.setAttr(kReasonAttr, b.getStringAttr(reason));
      }
    }
  }

  ops::PlacementOptions placement;
  std::set<std::string> forced;
  const KernelOracle *oracle = nullptr;
  std::map<std::string, std::string> measuredKernels;
  bool injected = false;
};

}  // namespace

std::unique_ptr<Pass> createKilnPlaceOps(const ops::PlacementOptions &modes, const std::set<std::string> &forceKernel,
                                         const KernelOracle *oracle,
                                         const std::map<std::string, std::string> &measuredKernels) {
  return std::make_unique<PlaceOps>(modes, forceKernel, oracle, measuredKernels);
}

}  // namespace kiln::lowering
