// Module::Impl: what a loaded module holds (its program, the code of each
// shape signature, tiered execution's plans and background queue, range
// code's call counts), shared by the files that implement Module
// (Kiln.cpp, BatchRange.cpp). Private to api/.
#pragma once

#include "api/Kiln.h"
#include "api/impl/WhenAllAvailable.h"

#include "cache/CacheKey.h"
#include "jit/CompileService.h"
#include "lowering/graph/Program.h"
#include "runtime/Clock.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>

namespace kiln {

/// The first call on a kernel plan and the compile it queued share the two
/// cores: at the calls' priority the compile's threads took one of them
/// for the call's whole run (MobileNetV2's first call on its plan 29 ms
/// alone, 40-56 ms beside its compile). The compile waits until the call
/// has answered, at most kMaxWait: one call's delay on a compile of
/// seconds, and the first call gets the machine.
struct Module::RunGate {
  static constexpr std::chrono::milliseconds kMaxWait{2000};
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu);
      opened = true;
    }
    cv.notify_all();
  }
  /// Blocks until open, `closing` is cancelled, or kMaxWait has passed.
  void wait(const CancellationToken &closing) {
    auto until = std::chrono::steady_clock::now() + kMaxWait;
    std::unique_lock<std::mutex> lock(mu);
    while (!opened && !closing.cancelled() && std::chrono::steady_clock::now() < until)
      cv.wait_for(lock, std::chrono::milliseconds(10));  // `closing` has no wake-up of its own
  }

 private:
  std::mutex mu;
  std::condition_variable cv;
  bool opened = false;
};

struct Module::Impl {
  using Compiled = std::shared_ptr<const jit::CompiledFunction>;
  /// (function, signature) -> code.
  using Table =
      llvm::StringMap<llvm::DenseMap<uint64_t, llvm::SmallVector<std::pair<cache::ShapeSignature, Compiled>, 1>>>;
  std::shared_ptr<jit::CompileService> service;
  std::shared_ptr<HostExecutor> executor;
  std::unique_ptr<lowering::Program> program;
  double callTimeoutSeconds = 0;  // RuntimeOptions::callTimeoutSeconds
  bool serialSteps = false;       // RuntimeOptions::serialSteps
  RuntimeOptions::CompilePolicy policy = RuntimeOptions::CompilePolicy::kWait;
  bool batchRanges = true;  // RuntimeOptions::batchRanges
  int hotBatchCalls = 8;    // RuntimeOptions::hotBatchCalls (0 = never)
  int hotShapeCalls = 2;    // RuntimeOptions::hotShapeCalls
  std::shared_ptr<CallLimiter> calls;  // RuntimeOptions::maxCallsInFlight
  WarningSink warn;
  // Read-mostly, the call fast path: the code of each signature, and the
  // kernel plans serving signatures whose code compiles in the background
  // (tiered execution; a signature leaves `plans` when its code enters
  // `tables`).
  mutable std::shared_mutex tableMu;
  Table tables, plans;
  std::mutex mu;
  std::condition_variable idle;
  int firstCallsInFlight = 0;  // callAsync compiles and background compiles that still use this module
  /// Stops background compiles when the module goes.
  CancellationToken closing;
  /// Under mu: the signatures ("function\0signature") whose background
  /// compile started, and what tiered execution did.
  std::set<std::string> background;
  /// Under mu: calls the range code served, by "function\0signature".
  std::map<std::string, uint64_t> rangeCallCounts;
  /// Under mu: signatures of dynamic dimensions served by their kernel plan
  /// whose compile waits until they are hot (RuntimeOptions::hotShapeCalls),
  /// with their calls so far; one leaves when its compile is queued.
  struct DeferredShape {
    std::vector<TensorType> types;
    uint64_t calls = 0;
    std::string ready;  // "kernel plan ready in 3.1 ms", for the event line
  };
  std::map<std::string, DeferredShape> deferred;
  std::atomic<bool> anyDeferred{false};  // deferred was ever used: calls on plans count there
  /// Hot: called hotShapeCalls times, and at least one in 16 of the calls
  /// kernel plans served (a stream of ever-new sizes compiles none of them).
  bool hotShape(uint64_t calls) const {
    return calls >= uint64_t(hotShapeCalls) && calls * 16 >= kernelPlanCalls.load(std::memory_order_relaxed);
  }
  /// Under mu: one more call of the deferred shape `it` (whose key is
  /// "function\0signature"). Once hot, it leaves `deferred`, its compile
  /// starts (startBackgroundLocked) and `event` gets its line's index;
  /// returns the shape's types then, nothing while it is not hot.
  std::optional<std::vector<TensorType>> countDeferredCallLocked(std::map<std::string, DeferredShape>::iterator it,
                                                                 const std::string &header, size_t &event) {
    if (!hotShape(++it->second.calls)) return std::nullopt;
    std::vector<TensorType> types = std::move(it->second.types);
    std::string line =
        header + it->second.ready + "; hot after " + std::to_string(it->second.calls) + " calls";
    std::string key = it->first;
    deferred.erase(it);
    ++tiers.hotShapeCompiles;
    event = startBackgroundLocked(key, std::move(line));
    return types;
  }
  /// Under mu: the background compile of `key` ("function\0signature")
  /// starts: counted, its event line added; returns the line's index.
  size_t startBackgroundLocked(const std::string &key, std::string line) {
    background.insert(key);
    ++firstCallsInFlight;
    ++tiers.backgroundCompiles;
    tiers.events.push_back(std::move(line));
    return tiers.events.size() - 1;
  }
  /// Under mu, by function: how its hot sizes' own code fared. Once one
  /// lost to the calls of batch 1, only sizes at least twice the largest
  /// tried are compiled (batched code that lost at 8 loses at 6; at 16 its
  /// bigger tiles may win).
  struct HotSizes {
    int keptInARow = 0;
    int64_t largestTried = 0;
    bool promising(int64_t batch) const { return keptInARow == 0 || batch >= 2 * largestTried; }
  };
  std::map<std::string, HotSizes> hotSizes;
  TierStats tiers;
  /// Under mu: compiles waiting for the background thread, and whether it runs.
  struct BackgroundJob {
    std::string function;
    std::vector<TensorType> types;
    size_t event = 0;
    Clock::time_point queued;
    uint64_t callsBefore = 0;  // kernelPlanCalls when queued
    bool hotSize = false;      // a batch size the range code served often (finishHotSize)
    bool lowPriority = false;  // below the calls' priority: code for one hot size or shape only
    std::shared_ptr<RunGate> gate;  // starts once open, when set
  };
  std::deque<BackgroundJob> queue;
  bool compiling = false;
  std::atomic<uint64_t> kernelPlanCalls{0};

  /// One use of the module (a first call's task, a queued background
  /// compile, the background thread) ends: the destructor may go on once
  /// none is left. `Locked`: the caller holds mu.
  void leaveLocked() {
    --firstCallsInFlight;
    idle.notify_all();
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mu);
    leaveLocked();
  }

  static Compiled findIn(const Table &table, llvm::StringRef function, const cache::ShapeSignature &sig) {
    auto t = table.find(function);
    if (t == table.end()) return nullptr;
    auto b = t->second.find(sig.hash());
    if (b == t->second.end()) return nullptr;
    for (const auto &[s, fn] : b->second)
      if (s == sig) return fn;
    return nullptr;
  }
  /// Compiled code for (function, signature), or null.
  Compiled find(llvm::StringRef function, const cache::ShapeSignature &sig) const {
    std::shared_lock<std::shared_mutex> lock(tableMu);
    return findIn(tables, function, sig);
  }
  /// The kernel plan serving (function, signature) until its code is
  /// compiled, or null.
  Compiled findPlan(llvm::StringRef function, const cache::ShapeSignature &sig) const {
    std::shared_lock<std::shared_mutex> lock(tableMu);
    return findIn(plans, function, sig);
  }
  /// Adds `code` to `table` unless the signature has code there; returns
  /// what the table holds for it.
  Compiled insert(Table &table, llvm::StringRef function, const cache::ShapeSignature &sig, Compiled code) {
    std::unique_lock<std::shared_mutex> lock(tableMu);
    auto &bucket = table[function][sig.hash()];
    for (const auto &[s2, existing] : bucket)
      if (s2 == sig) return existing;
    bucket.push_back({sig, code});
    return code;
  }
  /// Compiled code for the signature, the kernel plan leaving `plans` (the
  /// swap: later calls find the code first).
  void swapIn(llvm::StringRef function, const cache::ShapeSignature &sig) {
    std::unique_lock<std::shared_mutex> lock(tableMu);
    auto t = plans.find(function);
    if (t == plans.end()) return;
    auto b = t->second.find(sig.hash());
    if (b == t->second.end()) return;
    llvm::erase_if(b->second, [&](const auto &entry) { return entry.first == sig; });
  }
};

/// One error value per result (at least one).
std::vector<AsyncValueRef<Tensor>> errorValues(size_t n, const Status &status);

}  // namespace kiln
