//===- Partition.cpp - a specialized function as an execution plan --------===//
//
// Program::partition runs kiln-place-ops (each op on JIT or a kernel, asking
// the injected KernelOracle) and kiln-outline-clusters (JIT ops into
// @kiln_cluster<N> functions called from kiln_fn), then reads the plan off
// kiln_fn: each call is a JIT step (its cluster becomes a module of its own,
// `kiln_fn`, for the target's pipeline), each kernel-placed op a kernel
// step, in kiln_fn's order.
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/Partition.h"
#include "lowering/graph/OpView.h"
#include "lowering/graph/Passes.h"
#include "lowering/graph/ProgramImpl.h"
#include "ops/OpTable.h"
#include "runtime/Error.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <functional>
#include <map>
#include <sstream>

namespace kiln::lowering {

KernelOracle::~KernelOracle() = default;

bool tosaOpHasLowering(llvm::StringRef op) {
  const ops::OpSpec *spec = ops::lookupOp(op);
  return spec && spec->lowers;
}

std::string PlacementSummary::str() const {
  std::ostringstream os;
  os << ops << " ops: " << jitOps << " JIT in " << clusters << (clusters == 1 ? " kernel" : " kernels")
     << ", " << kernelOps << " handwritten";
  if (!kernels.empty()) {
    os << " (";
    bool first = true;
    for (const auto &[key, n] : kernels) {
      os << (first ? "" : "; ") << key.first << " x" << n << ": " << key.second;
      first = false;
    }
    os << ")";
  }
  return os.str();
}

namespace {

double numElements(Type t) {
  auto s = dyn_cast<ShapedType>(t);
  if (!s || !s.hasStaticShape()) return 0;
  return double(s.getNumElements());
}

/// Arithmetic `op` does (a multiply-add counts 2), from its static shapes;
/// ops without a formula count one per result element.
double opFlops(Operation *op) {
  if (op->getNumResults() == 0) return 0;
  // Data movement computes nothing.
  if (isa<tosa::TransposeOp, tosa::ReshapeOp, tosa::SliceOp, tosa::PadOp, tosa::ConcatOp, tosa::TileOp,
          tosa::GatherOp, tosa::ScatterOp, tosa::IdentityOp, tosa::ReverseOp>(op))
    return 0;
  double out = numElements(op->getResult(0).getType());
  auto dims = [](Value v) {
    auto s = dyn_cast<ShapedType>(v.getType());
    return s && s.hasStaticShape() ? llvm::SmallVector<int64_t>(s.getShape()) : llvm::SmallVector<int64_t>();
  };
  if (isa<tosa::Conv2DOp>(op)) {  // filter FHWC
    auto w = dims(op->getOperand(1));
    return w.size() == 4 ? 2 * out * double(w[1] * w[2] * w[3]) : out;
  }
  if (isa<tosa::DepthwiseConv2DOp>(op)) {  // filter HWCM
    auto w = dims(op->getOperand(1));
    return w.size() == 4 ? 2 * out * double(w[0] * w[1]) : out;
  }
  if (isGroupedConv(op)) {  // filter GFHWC
    auto w = dims(op->getOperand(1));
    return w.size() == 5 ? 2 * out * double(w[2] * w[3] * w[4]) : out;
  }
  if (isa<tosa::MatMulOp>(op)) {  // [B, M, K] x [B, K, N]
    auto a = dims(op->getOperand(0));
    return a.size() == 3 ? 2 * out * double(a[2]) : out;
  }
  if (auto p = dyn_cast<tosa::MaxPool2dOp>(op)) return out * double(p.getKernel()[0] * p.getKernel()[1]);
  if (auto p = dyn_cast<tosa::AvgPool2dOp>(op)) return out * double(p.getKernel()[0] * p.getKernel()[1]);
  if (isa<tosa::ReduceSumOp, tosa::ReduceMaxOp, tosa::ReduceMinOp, tosa::ReduceProductOp>(op))
    return numElements(op->getOperand(0).getType());
  if (auto l = dyn_cast<linalg::LinalgOp>(op)) {  // the iteration space; x2 with reductions (multiply-add)
    double space = 1;
    for (int64_t r : l.getStaticLoopRanges()) {
      if (ShapedType::isDynamic(r)) return out;
      space *= double(r);
    }
    return l.getNumReductionLoops() ? 2 * space : space;
  }
  return out;
}

/// Most ops in one host cluster: a 1,000-op chain compiles in ~0.2 s;
/// one cluster of 60,000 took 20 s (vectorization, lowering and LLVM code
/// generation of one huge function grow faster than linearly).
constexpr int64_t kMaxClusterOps = 1000;

std::string stringAttr(Operation *op, llvm::StringRef name) {
  auto a = op->getAttrOfType<StringAttr>(name);
  return a ? a.str() : std::string();
}

/// Whether operand `index` of `user` is data an elementwise op reads (any
/// tensor value may stand there), not an operand TOSA needs constant (a
/// shift, a zero point, a shape, a pad value).
bool takesDataOperand(Operation *user, unsigned index) {
  if (isa<tosa::AddOp, tosa::SubOp, tosa::MaximumOp, tosa::MinimumOp, tosa::PowOp, tosa::IntDivOp, tosa::EqualOp,
          tosa::GreaterOp, tosa::GreaterEqualOp, tosa::LogicalAndOp, tosa::LogicalOrOp, tosa::LogicalXorOp,
          tosa::BitwiseAndOp, tosa::BitwiseOrOp, tosa::BitwiseXorOp, tosa::LogicalLeftShiftOp,
          tosa::LogicalRightShiftOp, tosa::ArithmeticRightShiftOp, tosa::SelectOp>(user))
    return true;
  return isa<tosa::MulOp>(user) && index < 2;  // not the shift
}

/// Constants of at most this many elements may become a cluster's arguments.
constexpr int64_t kLiftedConstantElements = 256;

/// Moves `callee`'s small data constants (read only as elementwise operands)
/// out into arguments, in body order; with `call`, the call passes a copy
/// of each (in kiln_fn, where it becomes a constant of the plan).
void liftConstants(func::FuncOp callee, func::CallOp call) {
  llvm::SmallVector<Operation *> liftable;
  for (Operation &op : callee.getBody().front()) {
    auto c = dyn_cast<tosa::ConstOp>(op);
    if (!c || c->use_empty()) continue;
    auto t = dyn_cast<RankedTensorType>(c.getType());
    if (!t || !t.hasStaticShape() || t.getNumElements() > kLiftedConstantElements) continue;
    if (llvm::all_of(c->getUses(), [](OpOperand &u) { return takesDataOperand(u.getOwner(), u.getOperandNumber()); }))
      liftable.push_back(c);
  }
  for (Operation *c : liftable) {
    unsigned index = callee.getNumArguments();
    if (failed(callee.insertArgument(index, c->getResult(0).getType(), DictionaryAttr(), c->getLoc()))) return;
    c->getResult(0).replaceAllUsesWith(callee.getArgument(index));
    if (call) {
      OpBuilder b(call);
      Operation *copy = b.clone(*c);
      call->insertOperands(call->getNumOperands(), copy->getResult(0));
    }
    c->erase();
  }
}

/// Clusters that differ only in small data constants (20,000 independent
/// `x + c_i`, a stack of layers with their own scales) take those constants
/// as arguments, so that they are identical and compile once (the compiler
/// shares code between clusters with one fingerprint). A cluster like no
/// other keeps its constants in its code, where they fold.
void shareClustersDifferingInConstants(SymbolTable &symbols, func::FuncOp fn) {
  struct Cluster {
    func::FuncOp callee;
    func::CallOp call;
    std::string exact;
  };
  std::map<std::string, std::vector<Cluster>> byLifted;
  auto text = [](Operation *op) {
    std::string s;
    llvm::raw_string_ostream os(s);
    op->print(os, OpPrintingFlags().printGenericOpForm());
    return s;
  };
  for (Operation &op : fn.getBody().front()) {
    auto call = dyn_cast<func::CallOp>(op);
    if (!call || !call.getCallee().starts_with(kClusterPrefix)) continue;
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (!callee) continue;
    auto clone = cast<func::FuncOp>(callee->clone());
    clone.setSymName("kiln_cluster");  // names aside
    std::string exact = text(clone);
    liftConstants(clone, nullptr);
    std::string lifted = text(clone);
    clone->erase();
    if (lifted != exact) byLifted[lifted].push_back({callee, call, exact});
  }
  for (auto &[lifted, group] : byLifted) {
    if (group.size() < 2 || llvm::all_of(group, [&](const Cluster &c) { return c.exact == group[0].exact; }))
      continue;
    for (Cluster &c : group) liftConstants(c.callee, c.call);
  }
}
}  // namespace

std::string opSignature(llvm::StringRef op, llvm::ArrayRef<TensorType> inputs, const ops::AttrMap &attrs,
                        llvm::ArrayRef<TensorType> results) {
  std::string s = op.str() + "(";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].str();
  s += ") -> ";
  for (size_t i = 0; i < results.size(); ++i) s += (i ? ", " : "") + results[i].str();
  return s + " " + attrs.str();
}

llvm::Expected<std::unique_ptr<PartitionedFunction>>
Program::partition(SpecializedFunction &spec, const PlacementOptions &options, const KernelOracle &oracle,
                   const std::set<std::string> &forceKernel, int64_t anchorsPerCluster,
                   const std::map<std::string, std::string> &measuredKernels) {
  std::lock_guard<std::shared_mutex> lock(impl->mu);
  auto unlowered = Impl::unloweredModule(spec);
  if (!unlowered) return unlowered.takeError();
  ModuleOp module = *unlowered;
  if (auto err = impl->diagnose(ErrorCode::kUnsupported, "cannot place the ops of @" + spec.function, [&] {
        // Verified once after the three passes (as specialization is): a
        // verification of the whole function after each cost every new
        // shape's first call ~1.5-3 ms apiece.
        PassManager pm(impl->ctx.get());
        pm.enableVerifier(false);
        pm.addPass(createKilnPlaceOps(options, forceKernel, &oracle, measuredKernels));
        // After specialization's canonicalizations, which would fold the
        // pads back; on JIT-placed ops only.
        pm.addPass(createKilnSplitConvPadding());
        // Clusters of kernels built around anchors (the host's) also stop at
        // kMaxClusterOps ops; a whole-graph cluster (a GPU's) does not.
        pm.addPass(createKilnOutlineClusters(
            KilnOutlineClustersOptions{anchorsPerCluster, anchorsPerCluster > 0 ? kMaxClusterOps : 0,
                                       int64_t(spec.inputTypes.size()), options.attentionOn()}));
        if (failed(pm.run(module))) return failure();
        return verify(module);
      }))
    return std::move(err);

  auto fn = module.lookupSymbol<func::FuncOp>(kSpecializedFnName);
  SymbolTable symbols(module);  // lookups by name in O(1): graphs may have 20,000 clusters
  shareClustersDifferingInConstants(symbols, fn);
  auto out = std::make_unique<PartitionedFunction>();
  out->function = spec.function;
  out->inputTypes = spec.inputTypes;
  out->resultTypes = spec.resultTypes;
  out->weights = spec.weights;
  ExecPlan &plan = out->plan;
  PlacementSummary &summary = out->summary;

  // Values: arguments first (inputs, then weights).
  llvm::DenseMap<Value, int> valueId;
  for (BlockArgument arg : fn.getArguments()) {
    PlanValue v;
    v.index = int(arg.getArgNumber());
    bool weight = arg.getArgNumber() >= spec.inputTypes.size();
    v.kind = weight ? PlanValue::kWeight : PlanValue::kInput;
    v.type = weight ? spec.weights[v.index - spec.inputTypes.size()].type() : spec.inputTypes[v.index];
    if (weight) v.index -= int(spec.inputTypes.size());
    valueId[arg] = int(plan.values.size());
    plan.values.push_back(v);
  }
  auto constantValue = [&](Value v) -> llvm::Expected<int> {
    if (auto it = valueId.find(v); it != valueId.end()) return it->second;
    Operation *def = v.getDefiningOp();
    ElementsAttr attr;
    if (auto c = dyn_cast<tosa::ConstOp>(def)) attr = c.getValues();
    else if (auto c = dyn_cast<arith::ConstantOp>(def)) attr = dyn_cast<ElementsAttr>(c.getValue());
    std::string why;
    auto type = toTensorType(v.getType(), why);
    if (!attr || !type) return errorAt(ErrorCode::kUnsupported, locationString(def->getLoc()),
                                                       "cannot materialize constant: %s", why.c_str());
    auto t = impl->weightTensor(attr, *type);
    if (!t) return t.takeError();
    PlanValue pv{PlanValue::kConstant, *type, -1, *t};
    valueId[v] = int(plan.values.size());
    plan.values.push_back(pv);
    return valueId[v];
  };

  auto results = [&](Operation *op, std::vector<int> &ids) -> llvm::Error {
    for (Value r : op->getResults()) {
      std::string why;
      auto t = toTensorType(r.getType(), why);
      if (!t) return errorAt(ErrorCode::kUnsupported, locationString(op->getLoc()), "result of %s: %s",
                             op->getName().getStringRef().str().c_str(), why.c_str());
      valueId[r] = int(plan.values.size());
      plan.values.push_back({PlanValue::kIntermediate, *t, -1, Tensor()});
      ids.push_back(valueId[r]);
    }
    return llvm::Error::success();
  };

  // Steps, in kiln_fn's (topological) order.
  for (Operation &op : fn.getBody().front().without_terminator()) {
    if (isFreeOp(&op)) continue;
    PlanStep step;
    if (auto call = dyn_cast<func::CallOp>(op); call && call.getCallee().starts_with(kClusterPrefix)) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      step.kind = PlanStep::kJit;
      step.name = call.getCallee().drop_front(strlen("kiln_")).str();  // "cluster0"
      for (Value v : call.getOperands()) {
        auto id = constantValue(v);
        if (!id) return id.takeError();
        step.inputs.push_back(*id);
      }
      if (auto err = results(call, step.outputs)) return std::move(err);
      // Whether a value in the cluster comes from weights and constants only.
      std::function<bool(Value)> fromConstants = [&](Value v) {
        if (auto arg = dyn_cast<BlockArgument>(v)) {
          if (arg.getOwner() != &callee.getBody().front() || arg.getArgNumber() >= step.inputs.size()) return false;
          PlanValue::Kind kind = plan.values[size_t(step.inputs[arg.getArgNumber()])].kind;
          return kind == PlanValue::kWeight || kind == PlanValue::kConstant;
        }
        Operation *def = v.getDefiningOp();
        if (!def || def->getNumRegions() != 0 || !isMemoryEffectFree(def)) return false;
        return def->hasTrait<OpTrait::ConstantLike>() || llvm::all_of(def->getOperands(), fromConstants);
      };
      std::vector<Operation *> altOps;  // the op of each alternative
      for (Operation &inner : callee.getBody().front().without_terminator()) {
        if (isFreeOp(&inner)) continue;
        step.ops.push_back(kernelKey(&inner));  // custom ops by their names
        step.flops += opFlops(&inner);
        step.locations.push_back(locationString(inner.getLoc()));
        if (std::string note = stringAttr(&inner, kNoteAttr); !note.empty()) summary.notes.push_back(note);
        if (std::string kernel = stringAttr(&inner, kAlternativeAttr); !kernel.empty()) {
          KernelView view = kernelView(&inner);
          PlanStep::Alternative alt{view.key, kernel, "", locationString(inner.getLoc()), view.attrs, {}, {}};
          std::string why;
          bool typed = true;
          // The op as the graph has it (and as kiln-place-ops named it):
          // with the padding kiln-split-conv-padding moved into a tosa.pad.
          auto unsplit = inner.getAttrOfType<DenseI64ArrayAttr>(kUnsplitPadAttr);
          if (unsplit) alt.attrs.set("pad", std::vector<int64_t>(unsplit.asArrayRef().begin(), unsplit.asArrayRef().end()));
          for (auto [i, v] : llvm::enumerate(view.data)) {
            auto t = toTensorType(v.getType(), why);
            if (!t) {
              typed = false;
              continue;
            }
            // The input before padding (its tosa.pad may be in another
            // cluster: the shape tells it).
            if (unsplit && i == 0 && t->shape.size() == 4 && unsplit.size() == 4) {
              t->shape[1] -= unsplit[0] + unsplit[1];
              t->shape[2] -= unsplit[2] + unsplit[3];
            }
            alt.inputs.push_back(*t);
            alt.constantInputs.push_back(fromConstants(v));
          }
          for (Value r : inner.getResults())
            if (auto t = toTensorType(r.getType(), why)) alt.results.push_back(*t);
            else typed = false;
          alt.signature = opSignature(alt.op, alt.inputs, alt.attrs, alt.results);
          if (typed) {
            step.alternatives.push_back(std::move(alt));
            altOps.push_back(&inner);
          }
        }
      }
      // Layout changes of weights (a filter read transposed, padded rows
      // sliced off, a Winograd filter) are read in place by the code, not
      // computed per call.
      auto weightLayout = [&](Operation &o) {
        std::string key = kernelKey(&o);
        return (key == "tosa.transpose" || key == "tosa.reshape" || key == "tosa.slice" ||
                key == kWinogradFilterKey) &&
               llvm::all_of(o.getResults(), fromConstants);
      };
      for (size_t a = 0; a < altOps.size(); ++a)
        step.alternatives[a].aloneInStep =
            llvm::all_of(callee.getBody().front().without_terminator(), [&](Operation &o) {
              return &o == altOps[a] || isFreeOp(&o) || weightLayout(o);
            });
      // The cluster as a module of its own: kiln_fn(inputs...) -> outputs...
      auto cluster = std::make_unique<SpecializedFunction>();
      cluster->impl = std::make_unique<SpecializedFunction::Impl>();
      cluster->impl->module = OwningOpRef<ModuleOp>(ModuleOp::create(fn.getLoc()));
      OpBuilder b(module.getContext());
      b.setInsertionPointToEnd(cluster->impl->module->getBody());
      auto copy = cast<func::FuncOp>(b.clone(*callee));
      copy.setSymName(kSpecializedFnName);
      copy.setPublic();
      // Inputs belong to the caller (graph inputs, weights, other steps'
      // results that further steps read): bufferization must copy before
      // writing into one (linalg exports write into their `outs` operands,
      // e.g. one linalg.fill shared by several matmuls).
      for (unsigned a = 0; a < copy.getNumArguments(); ++a)
        copy.setArgAttr(a, "bufferization.writable", BoolAttr::get(module.getContext(), false));
      copy.walk([](Operation *o) {
        for (llvm::StringRef a : {kPlacementAttr, kKernelAttr, kReasonAttr, kNoteAttr, kAlternativeAttr, kUnsplitPadAttr})
          o->removeAttr(a);
      });
      cluster->function = spec.function + "." + step.name;
      {
        std::string text;
        llvm::raw_string_ostream os(text);
        cluster->impl->module->print(os, OpPrintingFlags().printGenericOpForm());
        cluster->fingerprint = llvm::utohexstr(llvm::xxh3_64bits(text)) + "-" + llvm::utohexstr(text.size());
      }
      for (int id : step.inputs) cluster->inputTypes.push_back(plan.values[id].type);
      for (int id : step.outputs) cluster->resultTypes.push_back(plan.values[id].type);
      summary.jitOps += step.ops.size();
      summary.ops += step.ops.size();
      ++summary.clusters;
      plan.steps.push_back(std::move(step));
      out->clusters.push_back(std::move(cluster));
      continue;
    }
    if (stringAttr(&op, kPlacementAttr) != "kernel")
      return errorAt(ErrorCode::kInternal, locationString(op.getLoc()), "%s is neither a cluster call nor a kernel op",
                     op.getName().getStringRef().str().c_str());
    KernelView view = kernelView(&op);
    step.kind = PlanStep::kKernel;
    step.op = view.key;
    step.name = view.key;
    step.attrs = view.attrs;
    step.kernel = stringAttr(&op, kKernelAttr);
    step.reason = stringAttr(&op, kReasonAttr);
    step.location = locationString(op.getLoc());
    step.flops = opFlops(&op);
    step.locations = {step.location};
    for (Value v : view.data) {
      auto id = constantValue(v);
      if (!id) return id.takeError();
      step.inputs.push_back(*id);
    }
    if (auto err = results(&op, step.outputs)) return std::move(err);
    summary.kernels[{step.op, step.reason}]++;
    ++summary.kernelOps;
    ++summary.ops;
    plan.steps.push_back(std::move(step));
    out->clusters.push_back(nullptr);
  }
  for (Value v : fn.getBody().front().getTerminator()->getOperands()) {
    auto id = constantValue(v);
    if (!id) return id.takeError();
    plan.results.push_back(*id);
  }
  plan.summary = summary.str();
  for (const std::string &note : summary.notes) plan.summary += "\n  note: " + note;
  spec.impl->module = nullptr;  // consumed
  return std::move(out);
}

}  // namespace kiln::lowering
