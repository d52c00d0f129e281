//===- Partition.cpp - place ops on JIT or kernels, outline JIT clusters --===//
#include "lowering/Partition.h"
#include "ops/OpTable.h"
#include "lowering/Passes.h"
#include "lowering/ProgramImpl.h"
#include "runtime/Error.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
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

// --- kernel views of ops ---------------------------------------------------------

namespace {

bool isFreeOp(Operation *op) { return isa<tosa::ConstOp, tosa::ConstShapeOp, arith::ConstantOp>(op); }

std::string kernelKey(Operation *op) {
  if (auto c = dyn_cast<tosa::CustomOp>(op))
    return "tosa.custom:" + c.getDomainName().str() + "." + c.getOperatorName().str();
  return op->getName().getStringRef().str();
}

std::optional<ops::Attr> toKernelAttr(Attribute a) {
  if (auto b = dyn_cast<BoolAttr>(a)) return int64_t(b.getValue());
  if (auto i = dyn_cast<IntegerAttr>(a)) {
    if (i.getType().isInteger(1)) return int64_t(i.getValue().getZExtValue());
    return int64_t(i.getValue().getSExtValue());
  }
  if (auto f = dyn_cast<FloatAttr>(a)) return f.getValueAsDouble();
  if (auto l = dyn_cast<DenseI64ArrayAttr>(a)) return std::vector<int64_t>(l.asArrayRef().begin(), l.asArrayRef().end());
  if (auto l = dyn_cast<DenseI32ArrayAttr>(a)) return std::vector<int64_t>(l.asArrayRef().begin(), l.asArrayRef().end());
  if (auto t = dyn_cast<TypeAttr>(a)) return typeString(t.getValue());
  if (auto s = dyn_cast<StringAttr>(a)) return s.str();
  std::string text;
  llvm::raw_string_ostream os(text);
  a.print(os);
  return text;
}

/// A constant operand as a kernel attribute (shape lists, scalar tensors).
std::optional<ops::Attr> foldConstant(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def) return std::nullopt;
  Attribute value;
  if (auto c = dyn_cast<tosa::ConstShapeOp>(def)) value = c.getValues();
  else if (auto c = dyn_cast<tosa::ConstOp>(def)) value = c.getValues();
  else if (auto c = dyn_cast<arith::ConstantOp>(def)) value = c.getValue();
  auto dense = dyn_cast_or_null<DenseElementsAttr>(value);
  if (!dense) return std::nullopt;
  Type et = dense.getElementType();
  if (isa<tosa::ConstShapeOp>(def) || dense.getNumElements() > 1) {
    if (!et.isIntOrIndex()) return std::nullopt;
    std::vector<int64_t> out;
    for (const APInt &x : dense.getValues<APInt>()) out.push_back(x.getSExtValue());
    return out;
  }
  if (dense.getNumElements() != 1) return std::nullopt;
  if (isa<FloatType>(et)) return double((*dense.getValues<APFloat>().begin()).convertToDouble());
  if (et.isInteger(1)) return int64_t((*dense.getValues<APInt>().begin()).getZExtValue());
  return int64_t((*dense.getValues<APInt>().begin()).getSExtValue());
}

struct KernelView {
  std::string key;
  ops::AttrMap attrs;
  llvm::SmallVector<Value> data;
  std::string whyNot;
};

KernelView kernelView(Operation *op) {
  KernelView v;
  v.key = kernelKey(op);
  if (auto props = dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
    for (NamedAttribute a : props)
      if (auto k = toKernelAttr(a.getValue())) v.attrs.set(a.getName().str(), *k);
  for (NamedAttribute a : op->getDiscardableAttrs())
    if (auto k = toKernelAttr(a.getValue())) v.attrs.set(a.getName().str(), *k);
  const ops::OpSpec *spec = ops::lookupOp(op->getName().getStringRef());
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    const ops::OperandSpec *o = spec && i < spec->operands.size() ? &spec->operands[i] : nullptr;
    if (o && o->folded) {
      const std::string &name = o->name;
      auto folded = foldConstant(operand);
      if (!folded) {
        v.whyNot = "operand '" + name + "' is not a constant";
        return v;
      }
      v.attrs.set(name, *folded);
      continue;
    }
    v.data.push_back(operand);
  }
  if (isa<tosa::CastOp>(op))
    if (auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType()))
      v.attrs.set("to", typeString(t.getElementType()));
  return v;
}

/// The kernel that takes this op as specialized ("" and the reason when none).
std::string kernelFor(Operation *op, const KernelView &view, const KernelOracle &oracle, std::string &why) {
  if (!view.whyNot.empty()) {
    why = view.whyNot;
    return "";
  }
  if (op->getNumRegions()) {
    why = "ops with regions run as JIT code";
    return "";
  }
  std::vector<TensorType> in, want;
  for (Value v : view.data) {
    auto t = toTensorType(v.getType(), why);
    if (!t) return "";
    in.push_back(*t);
  }
  for (Value r : op->getResults()) {
    auto t = toTensorType(r.getType(), why);
    if (!t) return "";
    want.push_back(*t);
  }
  auto kernel = oracle.kernelFor(view.key, in, view.attrs, want);
  if (!kernel) {
    why = toStatus(kernel.takeError()).message;
    return "";
  }
  return *kernel;
}

/// Groups of placed ops with transitively closed dependencies.
struct Grouping {
  struct Group {
    bool jit;
    std::vector<Operation *> ops;
    llvm::BitVector deps;  // groups this one (transitively) reads from
    bool dead = false;
  };
  std::vector<Group> groups;
  llvm::DenseMap<Operation *, int> groupOf;

  void grow(size_t n) {
    for (Group &g : groups) g.deps.resize(n);
  }
  int create(bool jit, Operation *op, const llvm::BitVector &deps) {
    groups.push_back({jit, {op}, deps});
    grow(groups.size());
    groupOf[op] = int(groups.size() - 1);
    return int(groups.size() - 1);
  }
  /// Keeps every group's deps closed after `c`'s deps grew.
  void close(int c) {
    for (Group &g : groups)
      if (!g.dead && g.deps.size() > size_t(c) && g.deps.test(c)) g.deps |= groups[c].deps;
  }
  bool canMerge(int c, int d) const {
    for (size_t x = 0; x < groups.size(); ++x) {
      if (int(x) == c || int(x) == d || groups[x].dead) continue;
      if (groups[x].deps.test(d) && groups[c].deps.test(x)) return false;
      if (groups[x].deps.test(c) && groups[d].deps.test(x)) return false;
    }
    return true;
  }
  void merge(int c, int d) {  // d into c
    Group &gd = groups[d];
    for (Operation *op : gd.ops) groupOf[op] = c;
    groups[c].ops.insert(groups[c].ops.end(), gd.ops.begin(), gd.ops.end());
    groups[c].deps |= gd.deps;
    groups[c].deps.reset(c);
    groups[c].deps.reset(d);
    gd.ops.clear();
    gd.dead = true;
    for (Group &g : groups)
      if (!g.dead && g.deps.test(d)) {
        g.deps.reset(d);
        g.deps.set(c);
      }
    close(c);
  }
};

/// Every operand (also of nested ops) defined outside `op`.
llvm::SmallVector<Value> externalOperands(Operation *op) {
  llvm::SetVector<Value> out;
  op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      if (!op->isAncestor(v.getParentRegion()->getParentOp())) out.insert(v);
  });
  return {out.begin(), out.end()};
}

}  // namespace

// --- partitioning ----------------------------------------------------------------------

llvm::Expected<std::unique_ptr<PartitionedFunction>>
Program::partition(SpecializedFunction &spec, const PlacementOptions &options, const KernelOracle &oracle,
                   const std::set<std::string> &forceKernel) {
  std::lock_guard<std::mutex> lock(impl->mu);
  if (!spec.impl || !spec.impl->module)
    return error(ErrorCode::kInternal, "@%s was already lowered", spec.function.c_str());
  ModuleOp module = *spec.impl->module;
  auto fn = module.lookupSymbol<func::FuncOp>(kSpecializedFnName);
  auto out = std::make_unique<PartitionedFunction>();
  out->function = spec.function;
  out->inputTypes = spec.inputTypes;
  out->resultTypes = spec.resultTypes;
  out->weights = spec.weights;
  ExecPlan &plan = out->plan;

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

  // Placement and grouping, in program order.
  Block &body = fn.getBody().front();
  Grouping g;
  llvm::DenseMap<Operation *, KernelView> views;
  llvm::DenseMap<Operation *, std::string> kernelReason, kernelName;
  llvm::DenseMap<Operation *, size_t> order;
  for (Operation &op : body.without_terminator()) {
    order[&op] = order.size();
    if (isFreeOp(&op)) continue;
    std::string name = op.getName().getStringRef().str();
    bool isTosa = op.getDialect() && op.getDialect()->getNamespace() == "tosa";
    KernelView view = kernelView(&op);
    std::string why;
    std::string kernelImpl = kernelFor(&op, view, oracle, why);
    bool canKernel = !kernelImpl.empty();
    bool canJit = !isTosa || tosaOpHasLowering(name);
    OpMode mode = forceKernel.count(view.key) ? OpMode::kKernel : options.modeFor(view.key);
    bool kernel;
    std::string reason;
    if (mode == OpMode::kKernel) {
      kernel = canKernel;
      reason = forceKernel.count(view.key) ? "JIT compile failed" : "mode=kernel";
      if (!canKernel)
        out->summary.notes.push_back(view.key + ": mode=kernel, kept on JIT (" + why + ")");
      if (!canKernel && !canJit)
        return errorAt(ErrorCode::kUnsupported, locationString(op.getLoc()),
                       "'%s' has no lowering and no kernel: %s", view.key.c_str(), why.c_str());
    } else {
      kernel = !canJit;
      reason = "no lowering";
      if (!canJit && !canKernel)
        return errorAt(ErrorCode::kUnsupported, locationString(op.getLoc()),
                       "'%s' has no lowering and no kernel (%s)", view.key.c_str(), why.c_str());
    }
    // Producer groups of this op.
    llvm::SmallVector<int> producers;
    for (Value v : externalOperands(&op))
      if (Operation *d = v.getDefiningOp())
        if (auto it = g.groupOf.find(d); it != g.groupOf.end())
          if (!llvm::is_contained(producers, it->second)) producers.push_back(it->second);
    auto depsExcept = [&](int skip) {
      llvm::BitVector d(g.groups.size() + 1);
      for (int p : producers)
        if (p != skip) {
          llvm::BitVector pd = g.groups[p].deps;
          pd.resize(d.size());
          d |= pd;
          d.set(p);
        }
      return d;
    };
    if (kernel) {
      views[&op] = view;
      kernelReason[&op] = reason;
      kernelName[&op] = kernelImpl;
      g.create(false, &op, depsExcept(-1));
      continue;
    }
    int chosen = -1;
    for (int c : producers)
      if (g.groups[c].jit && !depsExcept(c).test(c)) {
        chosen = c;
        break;
      }
    if (chosen < 0) {
      g.create(true, &op, depsExcept(-1));
      continue;
    }
    llvm::BitVector nd = depsExcept(chosen);
    nd.resize(g.groups.size());
    g.groups[chosen].ops.push_back(&op);
    g.groupOf[&op] = chosen;
    g.groups[chosen].deps |= nd;
    g.close(chosen);
    for (int d : producers)  // merge other JIT producers when the graph stays acyclic
      if (d != chosen && g.groups[d].jit && !g.groups[d].dead && g.canMerge(chosen, d)) g.merge(chosen, d);
  }

  // Topological order of live groups (Kahn; ties by first op).
  std::vector<int> live;
  for (size_t i = 0; i < g.groups.size(); ++i)
    if (!g.groups[i].dead) {
      auto &ops = g.groups[i].ops;
      std::sort(ops.begin(), ops.end(), [&](Operation *a, Operation *b) { return order[a] < order[b]; });
      live.push_back(int(i));
    }
  std::vector<int> sorted;
  std::vector<bool> placed(g.groups.size(), false);
  while (sorted.size() < live.size()) {
    int pick = -1;
    for (int c : live) {
      if (placed[c]) continue;
      bool ready = true;
      for (int d : live)
        if (d != c && !placed[d] && g.groups[c].deps.test(d)) ready = false;
      if (ready && (pick < 0 || order[g.groups[c].ops[0]] < order[g.groups[pick].ops[0]])) pick = c;
    }
    if (pick < 0) return error(ErrorCode::kInternal, "placement produced a cycle");
    placed[pick] = true;
    sorted.push_back(pick);
  }

  // Steps.
  auto resultIds = [&](Operation *op, std::vector<int> &ids) -> llvm::Error {
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
  int clusterIndex = 0;
  Operation *terminator = body.getTerminator();
  for (int c : sorted) {
    auto &grp = g.groups[c];
    PlanStep step;
    if (!grp.jit) {
      Operation *op = grp.ops[0];
      const KernelView &view = views[op];
      step.kind = PlanStep::kKernel;
      step.op = view.key;
      step.name = view.key;
      step.attrs = view.attrs;
      step.location = locationString(op->getLoc());
      step.reason = kernelReason[op];
      step.kernel = kernelName[op];
      for (Value v : view.data) {
        auto id = valueId.count(v) ? llvm::Expected<int>(valueId[v]) : constantValue(v);
        if (!id) return id.takeError();
        step.inputs.push_back(*id);
      }
      if (auto err = resultIds(op, step.outputs)) return std::move(err);
      out->summary.kernels[{step.op, step.reason}]++;
      ++out->summary.kernelOps;
      ++out->summary.ops;
      plan.steps.push_back(std::move(step));
      out->clusters.push_back(nullptr);
      continue;
    }
    // Outline the cluster.
    llvm::DenseSet<Operation *> inside;
    for (Operation *op : grp.ops) op->walk([&](Operation *o) { inside.insert(o); });
    llvm::SetVector<Value> ext;
    llvm::SetVector<Operation *> freeOps;
    for (Operation *op : grp.ops)
      for (Value v : externalOperands(op)) {
        Operation *d = v.getDefiningOp();
        if (d && inside.count(d)) continue;
        if (d && isFreeOp(d)) freeOps.insert(d);
        else ext.insert(v);
      }
    llvm::SmallVector<Value> results;
    for (Operation *op : grp.ops)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !inside.count(u); }))
          results.push_back(r);
    OpBuilder b(module.getContext());
    auto clusterModule = ModuleOp::create(fn.getLoc());
    b.setInsertionPointToEnd(clusterModule.getBody());
    llvm::SmallVector<Type> argTypes, resTypes;
    for (Value v : ext) argTypes.push_back(v.getType());
    for (Value v : results) resTypes.push_back(v.getType());
    auto cf = func::FuncOp::create(b, fn.getLoc(), kSpecializedFnName, b.getFunctionType(argTypes, resTypes));
    Block *entry = cf.addEntryBlock();
    b.setInsertionPointToStart(entry);
    IRMapping map;
    for (auto [i, v] : llvm::enumerate(ext)) map.map(v, entry->getArgument(i));
    std::vector<Operation *> freeSorted(freeOps.begin(), freeOps.end());
    std::sort(freeSorted.begin(), freeSorted.end(), [&](Operation *a, Operation *c2) { return order[a] < order[c2]; });
    for (Operation *op : freeSorted) b.clone(*op, map);
    for (Operation *op : grp.ops) {
      b.clone(*op, map);
      step.ops.push_back(op->getName().getStringRef().str());
    }
    llvm::SmallVector<Value> mapped;
    for (Value r : results) mapped.push_back(map.lookup(r));
    func::ReturnOp::create(b, fn.getLoc(), mapped);

    step.kind = PlanStep::kJit;
    step.name = "cluster" + std::to_string(clusterIndex++);
    for (Value v : ext) step.inputs.push_back(valueId.at(v));
    for (Value r : results) {
      std::string why;
      auto t = toTensorType(r.getType(), why);
      if (!t) return error(ErrorCode::kUnsupported, "cluster result: %s", why.c_str());
      valueId[r] = int(plan.values.size());
      plan.values.push_back({PlanValue::kIntermediate, *t, -1, Tensor()});
      step.outputs.push_back(valueId[r]);
    }
    auto cluster = std::make_unique<SpecializedFunction>();
    cluster->impl = std::make_unique<SpecializedFunction::Impl>();
    cluster->impl->module = OwningOpRef<ModuleOp>(clusterModule);
    cluster->function = spec.function + "." + step.name;
    for (int id : step.inputs) cluster->inputTypes.push_back(plan.values[id].type);
    for (int id : step.outputs) cluster->resultTypes.push_back(plan.values[id].type);
    out->summary.jitOps += grp.ops.size();
    out->summary.ops += grp.ops.size();
    ++out->summary.clusters;
    plan.steps.push_back(std::move(step));
    out->clusters.push_back(std::move(cluster));
  }
  for (Value v : terminator->getOperands()) {
    auto id = valueId.count(v) ? llvm::Expected<int>(valueId[v]) : constantValue(v);
    if (!id) return id.takeError();
    plan.results.push_back(*id);
  }
  plan.summary = out->summary.str();
  for (const std::string &note : out->summary.notes) plan.summary += "\n  note: " + note;
  spec.impl->module = nullptr;  // consumed
  return std::move(out);
}

}  // namespace kiln::lowering
