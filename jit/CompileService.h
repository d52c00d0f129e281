// CompileService: JIT on first call. The one place that decides how a
// (program, function, shape signature) becomes runnable code:
//
//   memory (LRU of compiled code, by full key) -> single flight (concurrent
//   requests for one key wait for one producer) -> disk (load the objects
//   and plan, link, no MLIR) -> compile (Compiler + target) -> store (disk)
//   -> bind the caller's weights (code is shared by modules whose graphs
//   are equal; each binds its own weight values).
//
// Cache keys: the program's canonical graph, the signature, the target's
// description and pipeline, per-op modes, kiln's and LLVM's versions.
// A compile that falls back from JIT to kernels reports warnings to the
// sink in its options.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include "cache/CacheKey.h"
#include "cache/DiskCache.h"
#include "cache/MemoryCache.h"
#include "jit/Compiler.h"
#include "jit/Target.h"
#include "ops/Placement.h"
#include "runtime/AsyncValue.h"

#include "llvm/ADT/StringMap.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace kiln::jit {

struct CompileServiceOptions {
  size_t memoryEntries = 512;
  cache::DiskCacheOptions disk;
  ops::PlacementOptions placement;
  FaultInjection faults;  // tests only; not part of cache keys
  /// Where helper threads of a parallel compile run (the executor's
  /// blocking pool) and how many threads one compile uses in all.
  SpawnFn spawn;
  int compileThreads = 1;
  /// The recorder compiles and disk loads are traced to, if any (the
  /// executor's, while a profiler records).
  std::function<std::shared_ptr<TraceRecorder>()> trace;
  /// Where placement by measurement times ops (the runtime's executor);
  /// null: no measuring, `auto` keeps anchor ops on JIT.
  std::shared_ptr<HostExecutor> executor;
  /// Receives warnings (JIT fallbacks); null: dropped.
  std::function<void(const std::string &)> warn;
  /// Weights of kHugePageWeightBytes or more move into huge pages
  /// (HugePageSlabs) when the first function that reads them is compiled or
  /// loaded from the disk cache: inline (a "huge-pages" stage of the
  /// compile), or, where a call waits for the code (WeightMove::kDeferred),
  /// in a job of their own on `spawn` after the code is returned.
  bool hugePageWeights = true;
};

/// Smallest weight that hugePageWeights moves.
inline constexpr size_t kHugePageWeightBytes = 64 * 1024;

struct CompileServiceStats {
  uint64_t memoryHits = 0, memoryMisses = 0;  // by full key
  uint64_t diskHits = 0, compiles = 0, compileFailures = 0, evictions = 0;
  uint64_t kernelPlans = 0;   // of the compiles, kernel plans (Tier::kKernels): no LLVM but for ops no kernel takes
  uint64_t jitFallbacks = 0;  // JIT clusters that failed to compile and ran on kernels
  double compileMs = 0;       // total time spent compiling
  double diskLoadMs = 0;      // total time loading entries from disk
  uint64_t hugePageBytes = 0; // weights moved into huge pages by deferred jobs
  double hugePageMs = 0;      // and the time those jobs took
  cache::DiskCacheStats disk;
};

/// What getOrCompile makes: code compiled under the service's placement
/// (JIT where it chose JIT), or a plan of handwritten kernels (every op a
/// kernel takes on it, no placement measuring; only ops that no kernel
/// takes compiled), which tiered execution serves first calls with. Kernel
/// plans leave the weights where they are (no huge-page copy).
enum class Tier { kCompiled, kKernels };

/// When getOrCompile moves compiled code's weights into huge pages
/// (CompileServiceOptions::hugePageWeights): before it returns (kInline:
/// prewarming, background compiles, where no call waits), or in a
/// background job after it returned (kDeferred: a first call waits for the
/// code; the copy costs 0.2-0.9 s for ResNet-50's 100 MB on the
/// development VMs, the call then runs on the weights where they are, and
/// reads move to the huge pages as each tensor lands there).
enum class WeightMove { kInline, kDeferred };

class CompileService {
public:
  using Compiled = std::shared_ptr<const CompiledFunction>;
  CompileService(std::shared_ptr<Target> target, CompileServiceOptions options);
  /// Waits for deferred weight moves and cache writes (they use the service).
  ~CompileService();

  /// Runnable code for `function` of `program` at `inputTypes`, bound to the
  /// program's weights. Blocks while compiling; call it from a thread that
  /// may block (not an executor worker).
  /// A `cancel` past its deadline stops a compile this call started between
  /// kernels (kCancelled; nothing is cached, a later call compiles again);
  /// callers waiting on that compile get the same error.
  llvm::Expected<Compiled> getOrCompile(lowering::Program &program, llvm::StringRef function,
                                        llvm::ArrayRef<TensorType> inputTypes,
                                        const CancellationToken *cancel = nullptr, Tier tier = Tier::kCompiled,
                                        WeightMove move = WeightMove::kInline);
  /// Blocks until every deferred move of weights into huge pages and every
  /// deferred write of a kernel plan to the disk cache has finished
  /// (benchmarks time the steady state after it).
  void waitForBackgroundJobs();
  /// The full cache key of that request.
  llvm::Expected<cache::CacheKeyParts> cacheKey(lowering::Program &program, llvm::StringRef function,
                                                llvm::ArrayRef<TensorType> inputTypes,
                                                Tier tier = Tier::kCompiled);
  /// Whether getOrCompile would find that code in memory or in the disk
  /// cache (no compile), as far as a look without loading tells.
  bool cached(lowering::Program &program, llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes,
              Tier tier = Tier::kCompiled);
  /// The placement code of `tier` is compiled under.
  const ops::PlacementOptions &placementFor(Tier tier) const {
    return tier == Tier::kKernels ? kernelPlacement_ : options_.placement;
  }

  Target &target() const { return *target_; }
  const ops::PlacementOptions &placement() const { return options_.placement; }
  cache::DiskCache &disk() { return *disk_; }
  /// Compiled functions held in memory.
  size_t size() const { return memory_.size(); }
  CompileServiceStats stats() const;

private:
  /// Memory miss: disk, else compile (and store).
  llvm::Expected<Compiled> produce(lowering::Program &program, llvm::StringRef function,
                                   llvm::ArrayRef<TensorType> types, const cache::CacheKeyParts &key,
                                   const CancellationToken *cancel, Tier tier, WeightMove move);
  /// Moves `code`'s big weights into huge pages (the first time any code
  /// binds them): inline, its figures saying how long that took, or in a
  /// job on `spawn` (counted in the service's stats).
  void hugePageWeights(CompiledFunction &code, WeightMove move);
  /// Encodes `code` (its plan as JSON, its objects) and writes it to the
  /// disk cache under `key`.
  void storeOnDisk(const CompiledFunction &code, const cache::CacheKeyParts &key);
  /// The disk cache's record of the placement tuner's decisions for this
  /// target and pipeline (an entry with no code: function "kiln.placement").
  cache::CacheKeyParts placementKey() const;
  /// Seeds the tuner from that record (a bad record: a warning, ignored).
  void loadPlacement();
  /// Writes the tuner's decisions there, merged with what other processes
  /// wrote since (last writer wins on the same op use).
  void storePlacement();
  /// Runs `job` on `spawn`, counted in backgroundJobs_ until it has
  /// finished (the destructor and waitForBackgroundJobs wait for it).
  void spawnTracked(llvm::unique_function<void()> job);

  std::shared_ptr<Target> target_;
  CompileServiceOptions options_;
  ops::PlacementOptions kernelPlacement_;  // Tier::kKernels
  Compiler compiler_;
  std::string targetText_, pipelineId_;
  std::unique_ptr<cache::DiskCache> disk_;
  cache::MemoryCache<CompiledFunction> memory_;
  mutable std::mutex mu_;
  llvm::StringMap<AsyncValueRef<Compiled>> inFlight_;  // by key digest
  CompileServiceStats stats_;
  std::condition_variable backgroundIdle_;
  int backgroundJobs_ = 0;  // deferred weight moves and cache writes not finished (mu_)
};

}  // namespace kiln::jit
