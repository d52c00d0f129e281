#include "api/Eager.h"
#include "runtime/Trace.h"

#include "llvm/ADT/ScopeExit.h"

#include "jit/Compiler.h"
#include "jit/HostTarget.h"
#include "jit/RuntimeSymbols.h"
#include "kernels/KernelRegistry.h"
#include "lowering/graph/GraphBuilder.h"
#include "lowering/graph/Program.h"

#include "llvm/ADT/StringExtras.h"

#include <cfloat>
#include <cstring>

namespace kiln::eager {
namespace {

using ops::hashAttr;
using ops::hashMix;
constexpr uint64_t kSeed = ops::kAttrHashSeed;
// Attribute names of the typed ops, hashed at compile time.
constexpr ops::AttrName kAZp("a_zp");
constexpr ops::AttrName kBZp("b_zp");
constexpr ops::AttrName kAccType("acc_type");
constexpr ops::AttrName kAxis("axis");
constexpr ops::AttrName kDilation("dilation");
constexpr ops::AttrName kInputZp("input_zp");
constexpr ops::AttrName kKernel("kernel");
constexpr ops::AttrName kMaxVal("max_val");
constexpr ops::AttrName kMinVal("min_val");
constexpr ops::AttrName kPad("pad");
constexpr ops::AttrName kPerms("perms");
constexpr ops::AttrName kShape("shape");
constexpr ops::AttrName kShift("shift");
constexpr ops::AttrName kStride("stride");
constexpr ops::AttrName kWeightZp("weight_zp");

std::string typesText(llvm::ArrayRef<const EagerTensor *> inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i)
    s += (i ? ", " : "") + (inputs[i]->type().shape.empty() && inputs[i]->isError()
                                ? std::string("<error>")
                                : "tensor<" + inputs[i]->type().str() + ">");
  return s;
}
std::string typesText(llvm::ArrayRef<EagerTensor> inputs) {
  std::vector<const EagerTensor *> p;
  for (const EagerTensor &t : inputs) p.push_back(&t);
  return typesText(p);
}

/// Non-atomic-RMW counter bump: exact single-threaded, approximate under
/// concurrency, and no locked instruction on the dispatch path.
inline void bump(std::atomic<uint64_t> &c) { c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

/// The concrete tensor of a ready input, or null.
const Tensor *readyTensor(const Tensor &ready, const AsyncValueRef<Tensor> &pending) {
  if (ready.valid()) return &ready;
  if (pending && pending->isConcrete()) return &pending->get();
  return nullptr;
}

}  // namespace

struct Context::Counters {
  std::atomic<uint64_t> dispatches{0}, hits{0}, misses{0}, inlineRuns{0}, executorRuns{0}, jitOps{0};
};

struct Context::Entry {
  uint64_t key = 0, attrHash = 0;
  llvm::SmallVector<TensorType, 4> inputTypes;
  ops::AttrMap attrs;
  TensorType outType;
  const kernels::KernelDef *kernel = nullptr;  // kernel path
  std::unique_ptr<Module> module;              // JIT path: the single-op graph
  std::shared_ptr<const jit::CompiledFunction> jit;
  jit::CompiledFunction::EntryFn direct = nullptr;  // JIT code callable with (inputs..., output)
};

struct OpHandle::Impl {
  std::string name;
  bool jit = false;
  static constexpr size_t kSlots = 64;
  std::array<std::atomic<Context::Entry *>, kSlots> slots{};
  std::vector<std::unique_ptr<Context::Entry>> owned;  // under Context::insertMu_
};

struct Context::Trace {
  struct Node {
    std::string op;
    ops::AttrMap attrs;
    std::vector<int> inputs;
    int output;
  };
  std::vector<TensorType> types;         // by value id
  std::vector<std::pair<int, Tensor>> constants;
  std::vector<Node> nodes;
  size_t numArgs = 0;
};

llvm::Expected<Tensor> EagerTensor::value() const {
  if (!error_.message.empty()) return makeError(error_);
  if (ready_.valid()) return ready_;
  if (pending_) return pending_.awaitValue();
  if (traceId_ >= 0)
    return error(ErrorCode::kInvalidArgument, "a symbolic tensor (being traced) has no value; call the traced function");
  return error(ErrorCode::kInvalidArgument, "empty EagerTensor");
}

Context::Context(Runtime &runtime) : runtime_(runtime), counters_(std::make_unique<Counters>()) {
  for (const std::string &name : kernels::registry().ops()) {
    auto impl = std::make_unique<OpHandle::Impl>();
    impl->name = name;
    // Eager runs kernels (the thin path) unless the op is set to JIT.
    impl->jit = runtime.options().placement.modeFor(name) == ops::OpMode::kJit;
    ops_[name] = std::move(impl);
  }
#define KILN_HANDLE_none(NAME, METHOD)
#define KILN_HANDLE_unary(NAME, METHOD) METHOD##_ = op(NAME);
#define KILN_HANDLE_binary(NAME, METHOD) METHOD##_ = op(NAME);
#define KILN_OP(NAME, LOWERS, OPERANDS, ATTRS, EAGER, METHOD) KILN_HANDLE_##EAGER(NAME, METHOD)
#include "ops/Ops.def"
#undef KILN_OP
#undef KILN_HANDLE_none
#undef KILN_HANDLE_unary
#undef KILN_HANDLE_binary
  mul_ = op("tosa.mul"), clamp_ = op("tosa.clamp"), matmul_ = op("tosa.matmul");
  conv2d_ = op("tosa.conv2d"), maxPool2d_ = op("tosa.max_pool2d"), reduceSum_ = op("tosa.reduce_sum");
  reduceMax_ = op("tosa.reduce_max"), transpose_ = op("tosa.transpose"), reshape_ = op("tosa.reshape");
}

Context::~Context() = default;

EagerStats Context::stats() const {
  EagerStats s;
  s.dispatches = counters_->dispatches, s.hits = counters_->hits, s.misses = counters_->misses;
  s.inlineRuns = counters_->inlineRuns, s.executorRuns = counters_->executorRuns, s.jitOps = counters_->jitOps;
  return s;
}

OpHandle Context::op(llvm::StringRef name) {
  {
    std::shared_lock<std::shared_mutex> lock(opsMu_);
    auto it = ops_.find(name);
    if (it != ops_.end()) return OpHandle{it->second.get()};
  }
  // A kernel registered (kiln::registerKernel) after this context was made.
  std::vector<std::string> registered = kernels::registry().ops();
  if (!llvm::is_contained(registered, name.str())) return OpHandle{nullptr};
  std::unique_lock<std::shared_mutex> lock(opsMu_);
  auto &slot = ops_[name];
  if (!slot) {
    slot = std::make_unique<OpHandle::Impl>();
    slot->name = name.str();
    slot->jit = runtime_.options().placement.modeFor(name) == ops::OpMode::kJit;
  }
  return OpHandle{slot.get()};
}

EagerTensor Context::fail(llvm::StringRef op, Inputs inputs, Status why) const {
  EagerTensor t;
  why.message = "kiln eager: " + op.str() + "(" + typesText(inputs) + "): " + why.message;
  t.error_ = std::move(why);
  return t;
}

Context::Entry *Context::lookup(OpHandle::Impl &op, uint64_t key, Inputs inputs, uint64_t attrHash) const {
  for (size_t probe = 0; probe < OpHandle::Impl::kSlots; ++probe) {
    Entry *e = op.slots[(key + probe) % OpHandle::Impl::kSlots].load(std::memory_order_acquire);
    if (!e) return nullptr;
    if (e->key != key || e->attrHash != attrHash || e->inputTypes.size() != inputs.size()) continue;
    bool same = true;
    for (size_t i = 0; same && i < inputs.size(); ++i) same = e->inputTypes[i] == inputs[i]->type();
    if (same) return e;
  }
  return nullptr;
}

llvm::Expected<Context::Entry *> Context::insert(OpHandle::Impl &op, uint64_t key, Inputs inputs,
                                                 uint64_t attrHash, ops::AttrMap attrs) {
  std::lock_guard<std::mutex> lock(insertMu_);
  if (Entry *e = lookup(op, key, inputs, attrHash)) return e;
  for (auto &e : op.owned)  // entries that did not fit the table
    if (e->key == key && e->attrHash == attrHash && e->inputTypes.size() == inputs.size()) {
      bool same = true;
      for (size_t i = 0; same && i < inputs.size(); ++i) same = e->inputTypes[i] == inputs[i]->type();
      if (same) return e.get();
    }
  auto entry = std::make_unique<Entry>();
  entry->key = key;
  entry->attrHash = attrHash;
  for (const EagerTensor *t : inputs) entry->inputTypes.push_back(t->type());
  entry->attrs = std::move(attrs);
  std::vector<TensorType> inTypes(entry->inputTypes.begin(), entry->inputTypes.end());
  // The same kernel choice and shape function graph placement makes.
  auto choice = kernels::registry().select(op.name, inTypes, entry->attrs);
  if (!choice) return choice.takeError();
  if (choice->results.size() != 1) return error(ErrorCode::kUnsupported, "eager dispatch supports single-result ops");
  entry->outType = choice->results[0];
  if (auto err = checkAllocatable(entry->outType.byteSize(), "the result tensor<" + entry->outType.str() + ">"))
    return std::move(err);
  if (op.jit) {
    // A single-op graph, built with MLIR builders and compiled (and
    // disk-cached) like any model.
    lowering::GraphBuilder g("main", "eager:" + op.name);
    std::vector<lowering::GraphBuilder::Value> args;
    for (const TensorType &t : inTypes) args.push_back(g.argument(t));
    auto result = g.op(op.name, args, entry->attrs, {entry->outType});
    if (!result) return result.takeError();
    auto program = g.finish(*result);
    if (!program) return program.takeError();
    auto module = runtime_.loadProgram(std::move(*program));
    if (!module) return module.takeError();
    auto fn = (*module)->compile("main", inTypes);
    if (!fn) return fn.takeError();
    entry->module = std::move(*module);
    entry->jit = *fn;
    const lowering::ExecPlan &plan = entry->jit->plan;
    bool simple = plan.steps.size() == 1 && plan.steps[0].kind == lowering::PlanStep::kJit &&
                  plan.results.size() == 1 &&
                  plan.steps[0].outputs.size() == 1 && plan.steps[0].outputs[0] == plan.results[0] &&
                  plan.steps[0].inputs.size() == inTypes.size();
    for (size_t i = 0; simple && i < inTypes.size(); ++i)
      simple = plan.values[plan.steps[0].inputs[i]].kind == lowering::PlanValue::kInput &&
               plan.values[plan.steps[0].inputs[i]].index == int(i);
    if (simple) entry->direct = entry->jit->directEntry(0);
    counters_->jitOps++;
  } else {
    entry->kernel = choice->def;
  }
  Entry *raw = entry.get();
  bool placed = false;
  for (size_t probe = 0; probe < OpHandle::Impl::kSlots && !placed; ++probe) {
    auto &slot = op.slots[(key + probe) % OpHandle::Impl::kSlots];
    if (!slot.load(std::memory_order_relaxed)) {
      slot.store(raw, std::memory_order_release);
      placed = true;
    }
  }
  op.owned.push_back(std::move(entry));
  return raw;
}

EagerTensor Context::execute(llvm::StringRef name, llvm::ArrayRef<EagerTensor> inputs,
                             const ops::AttrMap &attrs) {
  OpHandle h = op(name);
  llvm::SmallVector<const EagerTensor *, 4> in;
  for (const EagerTensor &t : inputs) in.push_back(&t);
  if (!h.impl)
    return fail(name, in, Status{ErrorCode::kInvalidArgument, "unknown op (eager ops are the ones with handwritten kernels: " +
                              llvm::join(kernels::registry().ops(), ", ") + ")", {}});
  return execute(h, inputs, attrs);
}

EagerTensor Context::execute(OpHandle h, llvm::ArrayRef<EagerTensor> inputs, const ops::AttrMap &attrs) {
  llvm::SmallVector<const EagerTensor *, 4> in;
  for (const EagerTensor &t : inputs) in.push_back(&t);
  if (!h.impl) return fail("<unknown op>", in, Status{ErrorCode::kInvalidArgument, "invalid op handle", {}});
  return dispatch(*h.impl, in, attrs.hash(), [&] { return attrs; });
}

EagerTensor Context::record(OpHandle::Impl &op, Inputs inputs, ops::AttrMap attrs) {
  Trace &t = *trace_;
  std::vector<TensorType> types;
  Trace::Node node;
  for (const EagerTensor *inp : inputs) {
    const EagerTensor &in = *inp;
    types.push_back(in.type());
    if (in.traceId_ >= 0) {
      node.inputs.push_back(in.traceId_);
      continue;
    }
    auto v = in.value();  // a concrete tensor used while tracing becomes a constant
    if (!v) return fail(op.name, inputs, toStatus(v.takeError()));
    int id = int(t.types.size());
    t.types.push_back(v->type());
    t.constants.push_back({id, *v});
    node.inputs.push_back(id);
  }
  auto outs = kernels::registry().select(op.name, types, attrs);
  if (!outs) return fail(op.name, inputs, toStatus(outs.takeError()));
  node.op = op.name;
  node.attrs = std::move(attrs);
  node.output = int(t.types.size());
  t.types.push_back(outs->results[0]);
  t.nodes.push_back(std::move(node));
  EagerTensor r;
  r.type_ = outs->results[0];
  r.traceId_ = t.nodes.back().output;
  return r;
}

EagerTensor Context::dispatch(OpHandle::Impl &op, Inputs inputs, uint64_t attrHash,
                              llvm::function_ref<ops::AttrMap()> makeAttrs) {
  bump(counters_->dispatches);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i]->error_.message.empty()) {
      Status s = inputs[i]->error_;
      s.message = "input " + std::to_string(i) + " failed: " + s.message;
      return fail(op.name, inputs, std::move(s));
    }
  // The same check graph calls make: booleans hold 0 or 1, else a kernel
  // and generated code would read them differently.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->type_.dtype == DType::i1 && inputs[i]->ready_.valid())
      if (auto err = checkBooleans(inputs[i]->ready_, "input " + std::to_string(i)))
        return fail(op.name, inputs, toStatus(std::move(err)));
  if (trace_) return record(op, inputs, makeAttrs());

  uint64_t key = attrHash;
  for (const EagerTensor *t : inputs) {
    key = hashMix(key, uint64_t(t->type_.dtype) | (uint64_t(t->type_.shape.size()) << 8));
    for (int64_t d : t->type_.shape) key = hashMix(key, uint64_t(d));
  }
  Entry *e = lookup(op, key, inputs, attrHash);
  if (e) {
    bump(counters_->hits);
  } else {
    bump(counters_->misses);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i]->ready_.valid() && !inputs[i]->pending_)
        return fail(op.name, inputs, Status{ErrorCode::kInvalidArgument, "input " + std::to_string(i) + " is an empty tensor", {}});
    auto inserted = insert(op, key, inputs, attrHash, makeAttrs());
    if (!inserted) return fail(op.name, inputs, toStatus(inserted.takeError()));
    e = *inserted;
  }

  // Inline when tiny and the inputs are ready.
  const Tensor *ready[8];
  bool allReady = inputs.size() <= 8;
  for (size_t i = 0; allReady && i < inputs.size(); ++i)
    allReady = (ready[i] = readyTensor(inputs[i]->ready_, inputs[i]->pending_)) != nullptr;
  if (allReady && e->outType.numElements() <= inlineLimit_) {
    bump(counters_->inlineRuns);
    auto allocated = Tensor::allocate(e->outType.dtype, e->outType.shape, "the result");
    if (!allocated) return fail(op.name, inputs, toStatus(allocated.takeError()));
    Tensor out = std::move(*allocated);
    // Profiles see inline ops too (one relaxed load when none records).
    std::shared_ptr<TraceRecorder> trace = runtime_.executor().trace();
    Clock::time_point start = trace ? Clock::now() : Clock::time_point();
    llvm::scope_exit traced([&] {
      if (!trace) return;
      TraceEvent ev;
      ev.name = std::string(e->kernel ? "eager-kernel:" : "eager-jit:") + op.name;
      ev.category = e->kernel ? "kernel" : "jit";
      ev.ops = op.name;
      ev.outputType = e->outType.str();
      ev.bytes = double(e->outType.byteSize());
      for (size_t i = 0; i < inputs.size(); ++i) ev.bytes += double(ready[i]->type().byteSize());
      trace->add(std::move(ev), start, Clock::now());
    });
    if (e->kernel) {
      const void *in[8];
      for (size_t i = 0; i < inputs.size(); ++i) in[i] = ready[i]->rawData();
      void *o[1] = {out.rawData()};
      HostExecutor &ex = runtime_.executor();
      if (llvm::Error err = e->kernel->run(kernels::KernelArgs{
              llvm::ArrayRef<const void *>(in, inputs.size()), e->inputTypes, o, e->outType, e->attrs, ex}))
        return fail(op.name, inputs, toStatus(std::move(err)));
      return EagerTensor(std::move(out));
    }
    if (e->direct) {
      void *buffers[9];
      for (size_t i = 0; i < inputs.size(); ++i) buffers[i] = ready[i]->rawData();
      buffers[inputs.size()] = out.rawData();
      jit::takeFault();
      {
        HostExecutor::ParallelScope scope(runtime_.executor());
        e->direct(buffers);
      }
      if (llvm::Error err = jit::faultError(jit::takeFault(), e->jit->plan.steps[0].faultSites))
        return fail(op.name, inputs, toStatus(std::move(err)));
      return EagerTensor(std::move(out));
    }
  }

  // On the executor: once every input is available.
  bump(counters_->executorRuns);
  EagerTensor result;
  result.type_ = e->outType;
  result.pending_ = makeUnavailable<Tensor>();
  struct Pending {
    std::vector<EagerTensor> inputs;
    AsyncValueRef<Tensor> result;
    Entry *entry;
    std::string op;
    std::atomic<int> waiting;
    HostExecutor *executor;
  };
  auto p = std::make_shared<Pending>();
  for (const EagerTensor *t : inputs) p->inputs.push_back(*t);
  p->result = result.pending_;
  p->entry = e;
  p->op = op.name;
  p->executor = &runtime_.executor();
  auto run = [p] {
    std::vector<Tensor> in;
    for (size_t i = 0; i < p->inputs.size(); ++i) {
      auto v = p->inputs[i].value();
      if (!v) {
        p->result->setError(withContext(v.takeError(), "kiln eager: " + p->op + "(" + typesText(p->inputs) +
                                                           "): input " + std::to_string(i) + " failed: "));
        return;
      }
      in.push_back(*v);
    }
    Entry *e = p->entry;
    if (e->kernel) {  // the kernel and output type chosen at dispatch
      auto allocated = Tensor::allocate(e->outType.dtype, e->outType.shape, "the result");
      if (!allocated) {
        p->result->setError(withContext(allocated.takeError(), "kiln eager: " + p->op + ": "));
        return;
      }
      Tensor out = std::move(*allocated);
      llvm::SmallVector<const void *, 8> ptrs;
      for (const Tensor &t : in) ptrs.push_back(t.rawData());
      void *o[1] = {out.rawData()};
      std::shared_ptr<TraceRecorder> trace = p->executor->trace();
      Clock::time_point start = trace ? Clock::now() : Clock::time_point();
      llvm::Error err = e->kernel->run(kernels::KernelArgs{ptrs, e->inputTypes, o, e->outType, e->attrs, *p->executor});
      if (trace) {
        TraceEvent ev;
        ev.name = "eager-kernel:" + p->op;
        ev.category = "kernel";
        ev.ops = p->op;
        ev.outputType = e->outType.str();
        ev.bytes = double(e->outType.byteSize());
        for (const Tensor &t : in) ev.bytes += double(t.type().byteSize());
        trace->add(std::move(ev), start, Clock::now());
      }
      if (err) p->result->setError(withContext(std::move(err), "kiln eager: " + p->op + ": "));
      else p->result->emplace(std::move(out));
      return;
    }
    auto outs = e->jit->executable->run(in, *p->executor);
    if (!outs) p->result->setError(withContext(outs.takeError(), "kiln eager: " + p->op + ": "));
    else p->result->emplace((*outs)[0]);
  };
  int waiting = 0;
  for (const EagerTensor &in : p->inputs)
    if (in.pending_ && !in.pending_->isAvailable()) ++waiting;
  p->waiting = waiting + 1;
  auto arrive = [p, run] {
    if (p->waiting.fetch_sub(1, std::memory_order_acq_rel) == 1) p->executor->spawn(run);
  };
  for (const EagerTensor &in : p->inputs)
    if (in.pending_ && !in.pending_->isAvailable()) in.pending_->andThen(arrive);
  arrive();
  return result;
}

// --- typed ops -----------------------------------------------------------------------
//
// Each typed op passes the hash of exactly the attributes its makeAttrs
// builds (ops::hashAttr over the names in sorted order, as AttrMap::hash),
// so a typed call and a generic execute() with the same attributes share a
// dispatch entry; the map itself is only built on a miss.

namespace {
ops::AttrMap none() { return {}; }
}  // namespace

#define KILN_EAGER_none(NAME, METHOD)
#define KILN_EAGER_unary(NAME, METHOD)                                                      \
  EagerTensor Context::METHOD(const EagerTensor &x) {                                       \
    const EagerTensor *in[1] = {&x};                                                        \
    if (!METHOD##_.impl) return fail(NAME, in, Status{ErrorCode::kUnsupported, "no kernel", {}}); \
    return dispatch(*METHOD##_.impl, in, kSeed, none);                                      \
  }
#define KILN_EAGER_binary(NAME, METHOD)                                                     \
  EagerTensor Context::METHOD(const EagerTensor &a, const EagerTensor &b) {                 \
    const EagerTensor *in[2] = {&a, &b};                                                    \
    if (!METHOD##_.impl) return fail(NAME, in, Status{ErrorCode::kUnsupported, "no kernel", {}}); \
    return dispatch(*METHOD##_.impl, in, kSeed, none);                                      \
  }
#define KILN_OP(NAME, LOWERS, OPERANDS, ATTRS, EAGER, METHOD) KILN_EAGER_##EAGER(NAME, METHOD)
#include "ops/Ops.def"
#undef KILN_OP
#undef KILN_EAGER_none
#undef KILN_EAGER_unary
#undef KILN_EAGER_binary

EagerTensor Context::mul(const EagerTensor &a, const EagerTensor &b) {
  const EagerTensor *in[2] = {&a, &b};
  return dispatch(*mul_.impl, in, hashAttr(kSeed, kShift, int64_t(0)), [] {
    ops::AttrMap m;
    m.set("shift", int64_t(0));
    return m;
  });
}

EagerTensor Context::clamp(const EagerTensor &x, double lo, double hi) {
  uint64_t h = hashAttr(hashAttr(kSeed, kMaxVal, hi), kMinVal, lo);
  return dispatch(*clamp_.impl, {&x}, h, [&] {
    ops::AttrMap m;
    m.set("min_val", lo);
    m.set("max_val", hi);
    return m;
  });
}

EagerTensor Context::relu(const EagerTensor &x) { return clamp(x, 0.0, double(FLT_MAX)); }

EagerTensor Context::reshape(const EagerTensor &x, std::vector<int64_t> shape) {
  return dispatch(*reshape_.impl, {&x}, hashAttr(kSeed, kShape, llvm::ArrayRef<int64_t>(shape)), [&] {
    ops::AttrMap m;
    m.set("shape", shape);
    return m;
  });
}

EagerTensor Context::matmul(const EagerTensor &a, const EagerTensor &b) {
  auto zp = [] {
    ops::AttrMap m;
    m.set("a_zp", 0.0);
    m.set("b_zp", 0.0);
    return m;
  };
  uint64_t h = hashAttr(hashAttr(kSeed, kAZp, 0.0), kBZp, 0.0);
  if (a.type().shape.size() == 2 && b.type().shape.size() == 2) {
    EagerTensor a3 = reshape(a, {1, a.type().shape[0], a.type().shape[1]});
    EagerTensor b3 = reshape(b, {1, b.type().shape[0], b.type().shape[1]});
    const EagerTensor *in[2] = {&a3, &b3};
    EagerTensor y = dispatch(*matmul_.impl, in, h, zp);
    if (y.isError()) return y;
    return reshape(y, {a.type().shape[0], b.type().shape[1]});
  }
  const EagerTensor *in[2] = {&a, &b};
  return dispatch(*matmul_.impl, in, h, zp);
}

EagerTensor Context::conv2d(const EagerTensor &x, const EagerTensor &w, const EagerTensor &bias,
                            std::array<int64_t, 4> pad, std::array<int64_t, 2> stride,
                            std::array<int64_t, 2> dilation) {
  uint64_t h = hashAttr(kSeed, kAccType, llvm::StringRef("f32"));
  h = hashAttr(h, kDilation, llvm::ArrayRef<int64_t>(dilation));
  h = hashAttr(h, kInputZp, 0.0);
  h = hashAttr(h, kPad, llvm::ArrayRef<int64_t>(pad));
  h = hashAttr(h, kStride, llvm::ArrayRef<int64_t>(stride));
  h = hashAttr(h, kWeightZp, 0.0);
  const EagerTensor *in[3] = {&x, &w, &bias};
  return dispatch(*conv2d_.impl, in, h, [&] {
    ops::AttrMap m;
    m.set("pad", std::vector<int64_t>(pad.begin(), pad.end()));
    m.set("stride", std::vector<int64_t>(stride.begin(), stride.end()));
    m.set("dilation", std::vector<int64_t>(dilation.begin(), dilation.end()));
    m.set("acc_type", std::string("f32"));
    m.set("input_zp", 0.0);
    m.set("weight_zp", 0.0);
    return m;
  });
}

EagerTensor Context::maxPool2d(const EagerTensor &x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                               std::array<int64_t, 4> pad) {
  uint64_t h = hashAttr(kSeed, kKernel, llvm::ArrayRef<int64_t>(kernel));
  h = hashAttr(h, kPad, llvm::ArrayRef<int64_t>(pad));
  h = hashAttr(h, kStride, llvm::ArrayRef<int64_t>(stride));
  return dispatch(*maxPool2d_.impl, {&x}, h, [&] {
    ops::AttrMap m;
    m.set("kernel", std::vector<int64_t>(kernel.begin(), kernel.end()));
    m.set("stride", std::vector<int64_t>(stride.begin(), stride.end()));
    m.set("pad", std::vector<int64_t>(pad.begin(), pad.end()));
    return m;
  });
}

EagerTensor Context::reduceSum(const EagerTensor &x, int64_t axis) {
  return dispatch(*reduceSum_.impl, {&x}, hashAttr(kSeed, kAxis, axis), [&] {
    ops::AttrMap m;
    m.set("axis", axis);
    return m;
  });
}

EagerTensor Context::reduceMax(const EagerTensor &x, int64_t axis) {
  return dispatch(*reduceMax_.impl, {&x}, hashAttr(kSeed, kAxis, axis), [&] {
    ops::AttrMap m;
    m.set("axis", axis);
    return m;
  });
}

EagerTensor Context::transpose(const EagerTensor &x, std::vector<int64_t> perms) {
  return dispatch(*transpose_.impl, {&x}, hashAttr(kSeed, kPerms, llvm::ArrayRef<int64_t>(perms)), [&] {
    ops::AttrMap m;
    m.set("perms", perms);
    return m;
  });
}

EagerTensor Context::softmax(const EagerTensor &x, int64_t axis) {
  EagerTensor m = reduceMax(x, axis);
  EagerTensor e = exp(sub(x, m));
  return mul(e, reciprocal(reduceSum(e, axis)));
}

// --- tracing ----------------------------------------------------------------------------

llvm::Expected<TracedFunction>
trace(Context &ctx, const std::function<std::vector<EagerTensor>(Context &, llvm::ArrayRef<EagerTensor>)> &fn,
      llvm::ArrayRef<TensorType> exampleTypes) {
  if (ctx.trace_) return error(ErrorCode::kInvalidArgument, "kiln::eager::trace: this context is already tracing");
  Context::Trace t;
  std::vector<EagerTensor> args;
  for (const TensorType &type : exampleTypes) {
    if (!type.isStatic())
      return error(ErrorCode::kInvalidArgument, "kiln::eager::trace: example input tensor<%s> must be static",
                                     type.str().c_str());
    EagerTensor a;
    a.type_ = type;
    a.traceId_ = int(t.types.size());
    t.types.push_back(type);
    args.push_back(a);
  }
  t.numArgs = args.size();
  ctx.trace_ = &t;
  std::vector<EagerTensor> outs = fn(ctx, args);
  ctx.trace_ = nullptr;
  if (outs.empty()) return error(ErrorCode::kInvalidArgument, "kiln::eager::trace: the function returned no tensors");
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].isError()) return withContext(makeError(outs[i].error_), "kiln::eager::trace: output " + std::to_string(i) + ": ");
    if (outs[i].traceId_ < 0)
      return error(ErrorCode::kInvalidArgument, "kiln::eager::trace: output %zu does not depend on the traced inputs", i);
  }
  // The recorded graph, built with MLIR builders: arguments, then the
  // constants captured from concrete tensors, then the ops in call order.
  lowering::GraphBuilder g("main", "trace");
  std::vector<lowering::GraphBuilder::Value> value(t.types.size(), -1);
  for (size_t i = 0; i < t.numArgs; ++i) value[i] = g.argument(t.types[i]);
  for (const auto &[id, tensor] : t.constants) {
    auto c = g.constant(tensor);
    if (!c) return c.takeError();
    value[id] = *c;
  }
  for (const Context::Trace::Node &n : t.nodes) {
    std::vector<lowering::GraphBuilder::Value> operands;
    for (int in : n.inputs) operands.push_back(value[in]);
    auto r = g.op(n.op, operands, n.attrs, {t.types[n.output]});
    if (!r) return withContext(r.takeError(), "kiln::eager::trace: ");
    value[n.output] = (*r)[0];
  }
  std::vector<lowering::GraphBuilder::Value> results;
  for (const EagerTensor &o : outs) results.push_back(value[o.traceId_]);
  if (auto err = g.setResults(results)) return std::move(err);
  std::string text = g.str();  // with its func.return: the text loads again
  auto program = g.finish();
  if (!program) return program.takeError();
  auto module = ctx.runtime().loadProgram(std::move(*program));
  if (!module) return module.takeError();
  TracedFunction f;
  f.mlir = text;
  f.module = std::move(*module);
  f.inputTypes.assign(exampleTypes.begin(), exampleTypes.end());
  return f;
}

}  // namespace kiln::eager
