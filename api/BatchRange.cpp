// Range code for batches (RuntimeOptions::batchRanges): a call of a
// function whose batch the analysis proves separable
// (lowering/graph/BatchDimension.h), at a batch size without code of its
// own, runs as calls of batch 1 on views of its inputs, each writing its
// view of the outputs (no copies), so one compile serves every batch size.
// The items run in a few chains (one per executor thread, at most), each
// item's call starting when the chain's previous one finished: every item's
// own steps are parallel already, and a few chains keep the cores busy
// between them without holding memory for the whole batch at once.
//
// A batch size called RuntimeOptions::hotBatchCalls times gets code of its
// own compiled in the background; it takes over only if it runs faster than
// the range code (both measured on the background thread, min of two runs
// after one to warm up), since a batch of N items in one kernel is not
// always faster than N kernels of one. Compiles take the cores from the
// calls (MobileNetV2, batch 1..16 on two cores: p50 60 ms with every hot size
// compiling behind the stream, 32 ms without), so once a size's own code
// lost, only sizes at least twice the largest tried are compiled.
#include "api/impl/ModuleImpl.h"

#include "runtime/Trace.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>

namespace kiln {
namespace {

/// Item `item` of `t`, whose dimension `dim` holds `batch` items (the dims
/// before it are 1, so each item is one contiguous block): a view, no copy.
Tensor itemOf(const Tensor &t, int dim, int64_t batch, int64_t item) {
  Shape shape(t.shape().begin(), t.shape().end());
  shape[dim] /= batch;
  size_t bytes = t.byteSize() / size_t(batch);
  auto keep = std::make_shared<llvm::IntrusiveRefCntPtr<Buffer>>(t.buffer());
  return Tensor::wrap(t.dtype(), shape, static_cast<char *>(t.rawData()) + bytes * size_t(item), std::move(keep));
}

/// The first error among `values`, if any.
std::optional<Status> firstError(const std::vector<AsyncValueRef<Tensor>> &values) {
  for (const auto &v : values)
    if (v->isError()) return v->error();
  return std::nullopt;
}

/// `types` with each batched input's dim 0 set to 1: the signature of one item.
std::vector<TensorType> itemTypesOf(const BatchDimension &b, std::vector<TensorType> types) {
  for (size_t i = 0; i < types.size() && i < b.inputs.size(); ++i)
    if (b.inputs[i] && !types[i].shape.empty()) types[i].shape[0] = 1;
  return types;
}

}  // namespace

struct Module::RangeCall {
  const FunctionSignature *signature = nullptr;
  std::vector<Tensor> inputs;                 // whole
  int64_t batch = 0;
  std::shared_ptr<CancellationToken> cancel;
  std::vector<Tensor> outputs;                // whole: the caller's, or allocated once item code's types are known
  bool outputsReady = false;                  // set before any item but the first starts
  std::vector<AsyncValueRef<Tensor>> results;
  bool counted = true;
  Clock::time_point start = Clock::now();
  std::mutex mu;
  int64_t next = 0;               // under mu: the next item to start
  int chains = 0;                 // under mu: chains still running
  std::optional<Status> failure;  // under mu: the error of the lowest item that failed
  int64_t failedItem = -1;        // under mu: that item

  std::optional<Status> prepareOutputs(const std::vector<TensorType> &itemTypes);
  /// Chains of items to run at once: one per executor thread, at most one per item.
  int chainsOn(const HostExecutor &executor) const {
    return int(std::min<int64_t>(batch, std::max(1, executor.numThreads())));
  }
};

int64_t Module::rangeBatch(const FunctionSignature &s, llvm::ArrayRef<TensorType> types) {
  const BatchDimension &b = s.batch;
  if (b.inputs.size() != types.size()) return 0;
  int64_t batch = -1;
  for (size_t i = 0; i < types.size(); ++i) {
    if (!b.inputs[i]) continue;
    if (types[i].shape.empty()) return 0;
    int64_t n = types[i].shape[0];
    if (batch >= 0 && n != batch) return 0;  // batched inputs disagree: compile this signature as it is
    batch = n;
  }
  return batch;
}

/// The whole outputs from item code's result types: the caller's tensors
/// where given (checked), else new ones.
std::optional<Status> Module::RangeCall::prepareOutputs(const std::vector<TensorType> &itemTypes) {
  const FunctionSignature &s = *signature;
  for (size_t r = 0; r < outputs.size(); ++r) {
    TensorType whole = itemTypes[r];
    int dim = s.batch.results[r];
    if (dim >= int(whole.shape.size()))
      return Status{ErrorCode::kInternal, "@" + s.name + ": result " + std::to_string(r) + " has no dimension " +
                                              std::to_string(dim) + " to hold the batch", {}};
    whole.shape[dim] *= batch;
    if (outputs[r].valid()) {
      if (outputs[r].type() != whole)
        return Status{ErrorCode::kInvalidArgument, "output " + std::to_string(r) + ": the given tensor is tensor<" +
                                                       outputs[r].type().str() + ">, the result is tensor<" +
                                                       whole.str() + ">", {}};
      for (const Tensor &in : inputs) {
        auto *o = static_cast<const char *>(outputs[r].rawData()), *i = static_cast<const char *>(in.rawData());
        if (in.byteSize() && outputs[r].byteSize() && o < i + in.byteSize() && i < o + outputs[r].byteSize())
          return Status{ErrorCode::kInvalidArgument, "output " + std::to_string(r) + " overlaps an input (kiln reads "
                                                     "inputs while it writes outputs: give separate memory)", {}};
      }
      continue;
    }
    auto t = Tensor::allocate(whole.dtype, whole.shape, "output " + std::to_string(r));
    if (!t) return toStatus(t.takeError());
    outputs[r] = std::move(*t);
  }
  outputsReady = true;
  return std::nullopt;
}

std::vector<TensorType> Module::servingTypes(llvm::StringRef function, std::vector<TensorType> types) const {
  const FunctionSignature *s = impl_->program->lookup(function);
  if (!impl_->batchRanges || !s || !s->batch.separable || rangeBatch(*s, types) <= 1) return types;
  return itemTypesOf(s->batch, std::move(types));
}

std::vector<AsyncValueRef<Tensor>> Module::startRange(const FunctionSignature &s, llvm::ArrayRef<Tensor> inputs,
                                                      int64_t batch, std::shared_ptr<CancellationToken> cancel,
                                                      std::vector<Tensor> outputs, bool counted) {
  if (!outputs.empty() && outputs.size() != s.results.size())
    return errorValues(s.results.size(), Status{ErrorCode::kInvalidArgument,
                                                std::to_string(outputs.size()) + " output tensors given for " +
                                                    std::to_string(s.results.size()) + " outputs",
                                                {}});
  auto call = std::make_shared<RangeCall>();
  call->signature = &s;
  call->inputs.assign(inputs.begin(), inputs.end());
  call->batch = batch;
  call->cancel = std::move(cancel);
  call->counted = counted;
  for (size_t i = 0; i < s.results.size(); ++i) call->results.push_back(makeUnavailable<Tensor>());
  call->outputs = outputs.empty() ? std::vector<Tensor>(s.results.size()) : std::move(outputs);

  // With code (or a kernel plan) for batch 1 at hand the outputs are known
  // and every chain starts now; else item 0 runs alone first (compiling it,
  // as the policy says) and the others follow it.
  std::vector<TensorType> types;
  for (const Tensor &t : inputs) types.push_back(t.type());
  cache::ShapeSignature itemSig = cache::ShapeSignature::of(itemTypesOf(s.batch, std::move(types)));
  Impl::Compiled code = impl_->find(s.name, itemSig);
  if (!code) code = impl_->findPlan(s.name, itemSig);
  int chains = 1;
  if (code) {
    std::vector<TensorType> resultTypes;
    for (size_t r = 0; r < s.results.size(); ++r) resultTypes.push_back(code->executable->outputType(r));
    if (std::optional<Status> bad = call->prepareOutputs(resultTypes)) return errorValues(s.results.size(), *bad);
    chains = call->chainsOn(*impl_->executor);
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->firstCallsInFlight;  // items start from callbacks: the module stays until the last has
  }
  {
    std::lock_guard<std::mutex> lock(call->mu);
    call->chains = chains;
    call->next = chains;
  }
  auto results = call->results;
  for (int c = 0; c < chains; ++c) runItem(call, c);
  return results;
}

void Module::runItem(const std::shared_ptr<RangeCall> &call, int64_t item) {
  const FunctionSignature &s = *call->signature;
  std::vector<Tensor> inputs, outputs;
  for (size_t i = 0; i < call->inputs.size(); ++i)
    inputs.push_back(s.batch.inputs[i] ? itemOf(call->inputs[i], 0, call->batch, item) : call->inputs[i]);
  if (call->outputsReady)
    for (size_t r = 0; r < call->outputs.size(); ++r)
      outputs.push_back(itemOf(call->outputs[r], s.batch.results[r], call->batch, item));
  // A compile this item's first call queues waits for the whole call's answer.
  auto results =
      startUnlimited(s.name, inputs, /*inlineFirstStep=*/false, call->cancel, std::move(outputs), call->results);
  whenAllAvailable(results, [this, call, item, results] { itemDone(call, item, results); });
}

void Module::itemDone(const std::shared_ptr<RangeCall> &call, int64_t item,
                      std::vector<AsyncValueRef<Tensor>> results) {
  const FunctionSignature &s = *call->signature;
  std::optional<Status> error = firstError(results);
  int extra = 0;
  if (!error && !call->outputsReady) {  // item 0 of a cold start: now the outputs are known
    std::vector<TensorType> types;
    for (const auto &r : results) types.push_back(r->get().type());
    error = call->prepareOutputs(types);
    for (size_t r = 0; !error && r < results.size(); ++r) {
      Tensor to = itemOf(call->outputs[r], s.batch.results[r], call->batch, 0);
      std::memcpy(to.rawData(), results[r]->get().rawData(), to.byteSize());
    }
    extra = call->chainsOn(*impl_->executor) - 1;
  }
  std::vector<int64_t> start;
  bool finished = false;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    // Items in flight on other chains may fail too (a cancellation reaches
    // them all): the call reports the lowest, whichever finished first.
    if (error && (!call->failure || item < call->failedItem)) {
      call->failedItem = item;
      call->failure = *error;
      call->failure->message = "@" + s.name + ", item " + std::to_string(item) + " of a batch of " +
                               std::to_string(call->batch) + " (run as calls of batch 1): " + error->message;
    }
    call->chains += extra;
    for (int slot = 0; slot < 1 + extra; ++slot) {
      if (!call->failure && call->next < call->batch) start.push_back(call->next++);
      else --call->chains;
    }
    finished = call->chains == 0;
  }
  for (int64_t next : start) runItem(call, next);
  if (finished) finishRange(call);
}

void Module::finishRange(const std::shared_ptr<RangeCall> &call) {
  auto done = llvm::scope_exit([this] { impl_->leave(); });
  const FunctionSignature &s = *call->signature;
  // Counted before the results are set: a caller that sees them sees the count.
  std::vector<TensorType> types;
  std::string key;
  size_t event = SIZE_MAX;
  if (!call->failure && call->counted) {
    for (const Tensor &t : call->inputs) types.push_back(t.type());
    cache::ShapeSignature sig = cache::ShapeSignature::of(types);
    key = s.name + '\0' + sig.str();
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->tiers.rangeCalls;
    uint64_t calls = ++impl_->rangeCallCounts[key];
    bool promising = impl_->hotSizes[s.name].promising(call->batch);
    if (impl_->hotBatchCalls > 0 && calls == uint64_t(impl_->hotBatchCalls) && promising &&
        impl_->policy != RuntimeOptions::CompilePolicy::kKernelsOnly && impl_->background.insert(key).second) {
      ++impl_->firstCallsInFlight;  // the queued compile's
      ++impl_->tiers.backgroundCompiles;
      ++impl_->tiers.hotSizeCompiles;
      event = impl_->tiers.events.size();
      impl_->tiers.events.push_back("@" + s.name + " (" + sig.str() + "): batch " + std::to_string(call->batch) +
                                    " ran " + std::to_string(calls) + " times as calls of batch 1");
    }
  }
  if (std::shared_ptr<TraceRecorder> trace = impl_->executor->trace()) {  // the call around its items' steps
    TraceEvent e;
    e.name = "@" + s.name + ": batch " + std::to_string(call->batch) + " as calls of batch 1";
    e.category = "call";
    trace->add(std::move(e), call->start, Clock::now());
  }
  for (size_t r = 0; r < call->results.size(); ++r) {
    if (call->failure) call->results[r]->setError(*call->failure);
    else call->results[r]->emplace(call->outputs[r]);
  }
  if (event != SIZE_MAX) compileInBackground(s.name, types, event, /*hotSize=*/true);
}

void Module::finishHotSize(const std::string &function, const std::vector<TensorType> &types, size_t event,
                           Clock::time_point start) {
  auto done = llvm::scope_exit([this] { impl_->leave(); });
  const FunctionSignature *s = impl_->program->lookup(function);
  cache::ShapeSignature sig = cache::ShapeSignature::of(types);
  int64_t batch = s ? rangeBatch(*s, types) : 0;
  {
    // Sizes turn hot together; by the time this one's turn comes, sizes
    // measured before it may have shown that its own code will lose.
    std::lock_guard<std::mutex> lock(impl_->mu);
    const Impl::HotSizes &tried = impl_->hotSizes[function];
    if (!tried.promising(batch)) {
      ++impl_->tiers.rangeKept;
      if (event < impl_->tiers.events.size())
        impl_->tiers.events[event] += "; not compiled: batch " + std::to_string(tried.largestTried) +
                                      "'s own code lost to calls of batch 1 already";
      return;
    }
  }
  auto code = impl_->service->getOrCompile(*impl_->program, function, types, &impl_->closing);
  std::string problem = code ? "" : toStatus(code.takeError()).str();
  double compileMs = msSince(start);

  // Both forms on the same zeros, alternating, after a run of each to warm
  // up: the size's own code takes over only if it is faster.
  double own = 1e300, range = 1e300;
  std::vector<Tensor> inputs;
  for (const TensorType &t : types) {
    if (!problem.empty()) break;
    auto z = Tensor::allocate(t.dtype, t.shape, "an input to measure with");
    if (!z) {
      problem = toStatus(z.takeError()).str();
      break;
    }
    std::memset(z->rawData(), 0, z->byteSize());
    inputs.push_back(std::move(*z));
  }
  auto timed = [&](std::vector<AsyncValueRef<Tensor>> results, Clock::time_point t0) -> double {
    bool ok = true;
    for (auto &r : results)
      if (auto v = r.awaitValue(); !v) {
        llvm::consumeError(v.takeError());
        ok = false;
      }
    return ok ? msSince(t0) : 1e300;
  };
  for (int round = 0; round < 3 && problem.empty() && s && !impl_->closing.cancelled(); ++round) {
    auto t0 = Clock::now();
    double a = timed((*code)->executable->execute(inputs, *impl_->executor, ExecuteOptions()), t0);
    t0 = Clock::now();
    double b = timed(startRange(*s, inputs, batch, nullptr, {}, /*counted=*/false), t0);
    if (round == 0) continue;
    own = std::min(own, a);
    range = std::min(range, b);
  }
  bool tookOver = problem.empty() && own < 0.97 * range;
  if (tookOver) impl_->insert(impl_->tables, function, sig, *code);
  std::string line =
      !problem.empty() ? "; its own code could not be had (" + problem + "), the calls of batch 1 keep serving it"
      : own >= 1e300   ? "; its own code ready " + llvm::formatv("{0:f1}", compileMs).str() +
                           " ms after the size turned hot, not measured (the module closed or a run failed): the calls of batch 1 keep serving it"
                       : llvm::formatv("; its own code (ready {0:f1} ms after the size turned hot) runs in {1:f2} ms, as calls of batch 1 "
                                       "{2:f2} ms: {3}",
                                       compileMs, own, range, tookOver ? "its own code took over" : "kept the calls of batch 1")
                             .str();
  if (std::shared_ptr<TraceRecorder> trace = impl_->executor->trace()) {
    TraceEvent e;
    e.name = (tookOver ? "hot batch size: own code took over @" : "hot batch size: batch-1 code kept @") + function;
    e.category = "compile";
    e.args = {{"signature", sig.str()}};
    trace->add(std::move(e), start, Clock::now());
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  ++(tookOver ? impl_->tiers.swaps : impl_->tiers.rangeKept);
  if (s && own < 1e300) {  // measured: what the next hot sizes of this function may expect
    Impl::HotSizes &tried = impl_->hotSizes[function];
    tried.keptInARow = tookOver ? 0 : tried.keptInARow + 1;
    tried.largestTried = std::max(tried.largestTried, batch);
  }
  if (event < impl_->tiers.events.size()) impl_->tiers.events[event] += line;
}

}  // namespace kiln
