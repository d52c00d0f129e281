//===- OutlineClusters.cpp - JIT-placed ops into cluster functions ---------===//
//
// kiln-outline-clusters: after kiln-place-ops, groups JIT-placed ops of
// kiln_fn into clusters — connected groups grown greedily in program order,
// merged while the graph of clusters and kernel ops stays acyclic — and
// moves each into `func.func private @kiln_cluster<N>(reads...) -> writes...`
// (with copies of the constants it uses), called from kiln_fn. Kernel ops
// stay in place. kiln_fn's body ends up in a topological order of calls and
// kernel ops (ties by first op): the order of the execution plan's steps.
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/OpView.h"
#include "lowering/graph/Passes.h"
#include "lowering/graph/ProgramImpl.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNOUTLINECLUSTERS
#include "lowering/graph/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// Groups of placed ops with transitively closed dependencies.
struct Grouping {
  struct Group {
    bool jit;
    std::vector<Operation *> ops;
    llvm::BitVector deps;  // groups this one (transitively) reads from
    bool dead = false;
    int anchors = 0;
  };
  std::vector<Group> groups;
  llvm::DenseMap<Operation *, int> groupOf;

  /// Bit vectors grow lazily: a bit past the end is clear.
  static bool has(const llvm::BitVector &b, int i) { return size_t(i) < b.size() && b.test(i); }
  int create(bool jit, Operation *op, const llvm::BitVector &deps) {
    groups.push_back({jit, {op}, deps});
    groupOf[op] = int(groups.size() - 1);
    return int(groups.size() - 1);
  }
  /// Keeps every group's deps closed after `c`'s deps grew.
  void close(int c) {
    for (Group &g : groups)
      if (!g.dead && has(g.deps, c)) g.deps |= groups[c].deps;
  }
  bool canMerge(int c, int d) const {
    for (size_t x = 0; x < groups.size(); ++x) {
      if (int(x) == c || int(x) == d || groups[x].dead) continue;
      if (has(groups[x].deps, d) && has(groups[c].deps, int(x))) return false;
      if (has(groups[x].deps, c) && has(groups[d].deps, int(x))) return false;
    }
    return true;
  }
  void merge(int c, int d) {  // d into c
    Group &gd = groups[d];
    for (Operation *op : gd.ops) groupOf[op] = c;
    groups[c].ops.insert(groups[c].ops.end(), gd.ops.begin(), gd.ops.end());
    groups[c].deps |= gd.deps;
    if (has(groups[c].deps, c)) groups[c].deps.reset(c);
    if (has(groups[c].deps, d)) groups[c].deps.reset(d);
    groups[c].anchors += gd.anchors;
    gd.ops.clear();
    gd.dead = true;
    for (Group &g : groups)
      if (!g.dead && has(g.deps, d)) {
        g.deps.reset(d);
        if (g.deps.size() <= size_t(c)) g.deps.resize(c + 1);
        g.deps.set(c);
      }
    close(c);
  }
};

struct OutlineClusters : impl::KilnOutlineClustersBase<OutlineClusters> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(kSpecializedFnName);
    if (!fn || fn.isExternal()) {
      module.emitError() << "kiln-outline-clusters: no @" << kSpecializedFnName;
      return signalPassFailure();
    }
    Block &body = fn.getBody().front();
    Grouping g;
    llvm::DenseMap<Operation *, size_t> order;
    if (failed(group(body, g, order))) return signalPassFailure();
    FailureOr<std::vector<int>> sorted = topologicalOrder(g, order);
    if (failed(sorted)) {
      fn.emitError() << "kiln-outline-clusters: internal error: the clusters form a cycle";
      return signalPassFailure();
    }
    outline(module, body, g, *sorted, order);
  }

  /// Attention's second matmul, softmax(Q Kᵀ) x V: a tosa.matmul whose
  /// left operand comes, through reshapes, elementwise ops and reductions
  /// of the last axis only, from the one anchor of JIT group `c`, itself a
  /// tosa.matmul; both matmuls of activations. Returns that group (-1 for
  /// any other op). Clustered together, kiln-cpu-strategy runs the pair as
  /// one loop over (batch, row block) whose scores stay in cache
  /// (lowering/cpu/strategy/RowFusion.cpp). A matmul on a weight, a layer
  /// norm and a matmul on another weight is no attention: each row block
  /// would read both weights again.
  int attentionGroup(Operation *op, const Grouping &g) const {
    // Weights are constants or (hoisted) arguments past the inputs (all
    // arguments where the pass is not told how many are inputs), read
    // through their layouts' views.
    auto weight = [this](Operation *m) {
      Value v = m->getOperand(1);
      while (Operation *d = v.getDefiningOp()) {
        if (isFreeOp(d)) return true;
        if (!isa<tosa::ReshapeOp, tosa::TransposeOp, tosa::SliceOp, tosa::CustomOp>(d)) return false;
        v = d->getOperand(0);
      }
      return inputs < 0 || int64_t(cast<BlockArgument>(v).getArgNumber()) >= inputs;
    };
    auto mm = dyn_cast<tosa::MatMulOp>(op);
    if (!mm || weight(mm)) return -1;
    Operation *def = mm->getOperand(0).getDefiningOp();
    auto it = def ? g.groupOf.find(def) : g.groupOf.end();
    if (it == g.groupOf.end()) return -1;
    int c = it->second;
    if (!g.groups[c].jit || g.groups[c].anchors != 1) return -1;
    auto rowWise = [](Operation *o) {
      if (isa<tosa::ReshapeOp, tosa::CastOp, tosa::MulOp>(o) || o->hasTrait<OpTrait::tosa::TosaElementwiseOperator>())
        return true;
      if (isa<tosa::ReduceMaxOp, tosa::ReduceSumOp>(o)) {
        auto t = dyn_cast<RankedTensorType>(o->getOperand(0).getType());
        auto axis = o->getAttrOfType<IntegerAttr>("axis");
        return t && axis && axis.getInt() == t.getRank() - 1;
      }
      return false;
    };
    llvm::SmallVector<Operation *> work = {def};
    llvm::DenseSet<Operation *> seen;
    bool reached = false;
    while (!work.empty()) {
      Operation *o = work.pop_back_val();
      if (!seen.insert(o).second) continue;
      if (isa<tosa::MatMulOp>(o)) {
        if (weight(o)) return -1;
        reached = true;
        continue;
      }
      if (!rowWise(o)) return -1;
      for (Value v : o->getOperands())
        if (Operation *d = v.getDefiningOp(); d && !isFreeOp(d))
          if (auto dt = g.groupOf.find(d); dt != g.groupOf.end() && dt->second == c) work.push_back(d);
    }
    return reached ? c : -1;
  }

  /// Groups the ops of `body` (in `order`, numbered as they come): each
  /// kernel op alone, JIT ops into clusters of at most anchorsPerCluster
  /// anchors and maxOps ops, merged while the graph of groups stays acyclic.
  LogicalResult group(Block &body, Grouping &g, llvm::DenseMap<Operation *, size_t> &order) {
    const int limit = int(anchorsPerCluster);
    const size_t opLimit = maxOps > 0 ? size_t(maxOps) : SIZE_MAX;
    auto fits = [&](int anchors) { return limit <= 0 || anchors <= limit; };
    // A slice is a view: in its consumer's cluster generated code folds it
    // into its loads, while in its producer's it would be a copy that cluster
    // writes out (ResNet-50's stage ends wrote a 55x55x256 copy of their
    // 56x56x256 output for the next stage's stride-2 downsample conv). So a
    // slice whose one user is a JIT op of kiln_fn waits and joins that user's
    // group (a chain of such slices too).
    llvm::DenseSet<Operation *> waiting;
    auto placedOnJit = [](Operation *op) {
      auto p = op->getAttrOfType<StringAttr>(kPlacementAttr);
      return p && p.getValue() != "kernel";
    };
    auto joinsUser = [&](Operation *op) {
      if (!isa<tosa::SliceOp>(op) || !placedOnJit(op) || !op->hasOneUse()) return false;
      Operation *user = *op->getUsers().begin();
      return user->getBlock() == &body && !user->hasTrait<OpTrait::IsTerminator>() && !isFreeOp(user) &&
             placedOnJit(user);
    };
    for (Operation &op : body.without_terminator()) {
      order[&op] = order.size();
      if (isFreeOp(&op)) continue;
      auto placement = op.getAttrOfType<StringAttr>(kPlacementAttr);
      if (!placement) {
        op.emitError() << "kiln-outline-clusters: op is not placed (run kiln-place-ops first)";
        return failure();
      }
      if (joinsUser(&op)) {
        waiting.insert(&op);
        continue;
      }
      bool kernel = placement.getValue() == "kernel";
      // Waiting slices this op reads (through chains of them), producers first.
      llvm::SmallVector<Operation *> joining;
      std::function<void(Operation *)> collect = [&](Operation *o) {
        for (Value v : externalOperands(o))
          if (Operation *d = v.getDefiningOp(); d && waiting.erase(d)) {
            collect(d);
            joining.push_back(d);
          }
      };
      collect(&op);
      // Producer groups of this op (and of the slices joining it).
      llvm::SmallVector<int> producers;
      auto addProducers = [&](Operation *o) {
        for (Value v : externalOperands(o))
          if (Operation *d = v.getDefiningOp())
            if (auto it = g.groupOf.find(d); it != g.groupOf.end())
              if (!llvm::is_contained(producers, it->second)) producers.push_back(it->second);
      };
      addProducers(&op);
      for (Operation *j : joining) addProducers(j);
      auto addJoining = [&](int c) {
        for (Operation *j : joining) {
          g.groups[c].ops.push_back(j);
          g.groupOf[j] = c;
        }
      };
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
      if (kernel) {  // (no slice waits for a kernel op)
        g.create(false, &op, depsExcept(-1));
        continue;
      }
      int anchor = isAnchorOp(&op) ? 1 : 0;
      int chosen = -1;
      // Attention's x V joins the group of its scores (Q Kᵀ, softmax) as no
      // anchor of its own (limit 1 only: that is what it is sized for).
      if (int c = limit == 1 && attention ? attentionGroup(&op, g) : -1;
          c >= 0 && llvm::is_contained(producers, c) && g.groups[c].ops.size() < opLimit && !depsExcept(c).test(c)) {
        anchor = 0;
        chosen = c;
      }
      for (int c : producers)
        if (chosen < 0)
          if (g.groups[c].jit && fits(g.groups[c].anchors + anchor) && g.groups[c].ops.size() < opLimit &&
              !depsExcept(c).test(c))
            chosen = c;
      if (chosen < 0) {
        int c = g.create(true, &op, depsExcept(-1));
        g.groups[c].anchors = anchor;
        addJoining(c);
        continue;
      }
      llvm::BitVector nd = depsExcept(chosen);
      nd.resize(g.groups.size());
      addJoining(chosen);
      g.groups[chosen].ops.push_back(&op);
      g.groups[chosen].anchors += anchor;
      g.groupOf[&op] = chosen;
      g.groups[chosen].deps |= nd;
      g.close(chosen);
      for (int d : producers)  // merge other JIT producers when the graph stays acyclic
        if (d != chosen && g.groups[d].jit && !g.groups[d].dead &&
            fits(g.groups[chosen].anchors + g.groups[d].anchors) &&
            g.groups[chosen].ops.size() + g.groups[d].ops.size() <= opLimit && g.canMerge(chosen, d))
          g.merge(chosen, d);
    }

    return success();
  }

  /// The live groups in an order their dependences allow (Kahn over direct
  /// producer edges, ties by first op); failure when they form a cycle.
  FailureOr<std::vector<int>> topologicalOrder(Grouping &g, llvm::DenseMap<Operation *, size_t> &order) {
    std::vector<int> live;
    for (size_t i = 0; i < g.groups.size(); ++i)
      if (!g.groups[i].dead) {
        auto &ops = g.groups[i].ops;
        std::sort(ops.begin(), ops.end(), [&](Operation *a, Operation *b) { return order[a] < order[b]; });
        live.push_back(int(i));
      }
    std::vector<llvm::SmallVector<int, 4>> consumers(g.groups.size());
    std::vector<int> indegree(g.groups.size(), 0);
    for (int c : live) {
      llvm::SmallDenseSet<int, 8> producers;
      for (Operation *op : g.groups[c].ops)
        for (Value v : externalOperands(op))
          if (Operation *d = v.getDefiningOp())
            if (auto it = g.groupOf.find(d); it != g.groupOf.end() && it->second != c)
              producers.insert(it->second);
      for (int p : producers) {
        consumers[p].push_back(c);
        ++indegree[c];
      }
    }
    auto later = [&](int a, int b) { return order[g.groups[a].ops[0]] > order[g.groups[b].ops[0]]; };
    std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
    for (int c : live)
      if (indegree[c] == 0) ready.push(c);
    std::vector<int> sorted;
    while (!ready.empty()) {
      int c = ready.top();
      ready.pop();
      sorted.push_back(c);
      for (int n : consumers[c])
        if (--indegree[n] == 0) ready.push(n);
    }
    if (sorted.size() != live.size()) {
      return failure();
    }

    return sorted;
  }

  /// Constants first, then each group in `sorted` order: kernel ops move,
  /// clusters become private functions and calls.
  void outline(ModuleOp module, Block &body, Grouping &g, const std::vector<int> &sorted,
               llvm::DenseMap<Operation *, size_t> &order) {
    // Constants first, then each group in order: kernel ops move, clusters
    // become calls.
    Operation *terminator = body.getTerminator();
    std::vector<Operation *> freeOps;
    for (Operation &op : body.without_terminator())
      if (isFreeOp(&op)) freeOps.push_back(&op);
    for (Operation *op : freeOps) op->moveBefore(terminator);
    OpBuilder b(module.getContext());
    int clusterIndex = 0;
    for (int c : sorted) {
      auto &grp = g.groups[c];
      if (!grp.jit) {
        grp.ops[0]->moveBefore(terminator);
        continue;
      }
      llvm::DenseSet<Operation *> inside;
      for (Operation *op : grp.ops) op->walk([&](Operation *o) { inside.insert(o); });
      llvm::SetVector<Value> ext;
      llvm::SetVector<Operation *> usedFree;
      for (Operation *op : grp.ops)
        for (Value v : externalOperands(op)) {
          Operation *d = v.getDefiningOp();
          if (d && inside.count(d)) continue;
          if (d && isFreeOp(d)) usedFree.insert(d);
          else ext.insert(v);
        }
      llvm::SmallVector<Value> results;
      for (Operation *op : grp.ops)
        for (Value r : op->getResults())
          if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !inside.count(u); })) results.push_back(r);
      llvm::SmallVector<Type> argTypes, resTypes;
      for (Value v : ext) argTypes.push_back(v.getType());
      for (Value v : results) resTypes.push_back(v.getType());
      std::string name = (kClusterPrefix + llvm::Twine(clusterIndex++)).str();
      b.setInsertionPointToEnd(module.getBody());
      auto cf = func::FuncOp::create(b, grp.ops[0]->getLoc(), name, b.getFunctionType(argTypes, resTypes));
      cf.setPrivate();
      Block *entry = cf.addEntryBlock();
      b.setInsertionPointToStart(entry);
      IRMapping map;
      for (auto [i, v] : llvm::enumerate(ext)) map.map(v, entry->getArgument(i));
      std::vector<Operation *> freeSorted(usedFree.begin(), usedFree.end());
      std::sort(freeSorted.begin(), freeSorted.end(), [&](Operation *a, Operation *c2) { return order[a] < order[c2]; });
      for (Operation *op : freeSorted) b.clone(*op, map);
      for (Operation *op : grp.ops) b.clone(*op, map);
      llvm::SmallVector<Value> mapped;
      for (Value r : results) mapped.push_back(map.lookup(r));
      func::ReturnOp::create(b, cf.getLoc(), mapped);
      // The call replaces the cluster in kiln_fn.
      b.setInsertionPoint(terminator);
      auto call = func::CallOp::create(b, grp.ops[0]->getLoc(), cf, llvm::SmallVector<Value>(ext.begin(), ext.end()));
      for (auto [r, v] : llvm::zip(results, call.getResults())) r.replaceAllUsesWith(v);
      for (auto it = grp.ops.rbegin(); it != grp.ops.rend(); ++it) (*it)->erase();
    }
    // Constants only clusters used are dead in kiln_fn now.
    for (Operation *op : freeOps)
      if (op->use_empty()) op->erase();
  }
};

}  // namespace
}  // namespace kiln::lowering
