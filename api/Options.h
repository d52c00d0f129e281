// Options of a kiln Runtime, and where the environment comes in.
//
//   auto options = kiln::RuntimeOptions::fromEnvironment();  // $KILN_* over defaults
//   options->threads = 4;                                    // code wins over the environment
//   auto rt = kiln::Runtime::create(*options);
//
// Runtime::create resolves its options once through fromEnvironment (the
// options given win over the environment), so graph calls, eager dispatch
// and the CLI all see the same resolved options: Runtime::options().
// fromEnvironment is the only place kiln reads environment variables.
//
// Thread-safety: plain values.
#pragma once

#include "ops/Placement.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace kiln {

using ops::OpMode;
using ops::PlacementOptions;

/// The persistent compile cache: off, lookups only, or lookups and stores.
enum class CacheMode { kOff, kReadOnly, kReadWrite };
/// "off" | "ro"/"read-only" | "rw"/"read-write"
std::optional<CacheMode> parseCacheMode(llvm::StringRef text);
const char *cacheModeName(CacheMode mode);

/// Receives warnings (a JIT cluster fell back to kernels, an unusable cache
/// entry or directory). Called from any thread.
using WarningSink = std::function<void(const std::string &message)>;
/// Prints "kiln: warning: <message>" to stderr.
void warnToStderr(const std::string &message);

/// "512M", "2G", "65536" (K, M, G: powers of 1024) as bytes; nullopt for
/// anything else or zero.
std::optional<uint64_t> parseByteSize(llvm::StringRef text);

struct RuntimeOptions {
  /// Worker threads for the executor (0 = the machine's cores).
  int threads = 0;
  /// Threads for blocking work (compiles, file I/O), off the compute workers.
  int blockingThreads = 2;
  /// Threads that compile one function's JIT kernels in parallel (the
  /// compiling thread plus helpers on the blocking pool; 0 = the machine's
  /// cores).
  int compileThreads = 0;
  /// Persistent compile cache directory ("" = $KILN_CACHE_DIR, else
  /// $XDG_CACHE_HOME/kiln, else ~/.cache/kiln).
  std::string cacheDir;
  /// Unset = $KILN_CACHE, else read-write.
  std::optional<CacheMode> cacheMode;
  /// Size cap of the disk cache (least recently used entries go first).
  uint64_t cacheMaxBytes = 2ull << 30;
  /// Compiled functions kept in memory (least recently used go first).
  size_t memoryCacheEntries = 512;
  /// Per-op placement: JIT, handwritten kernel or auto, by op name ("*" =
  /// default). Combined with $KILN_OP_MODE ("tosa.conv2d=kernel,..."); entries
  /// here win. Applies to graphs and to eager dispatch.
  PlacementOptions placement;
  /// LLVM optimization level for generated code (0..3).
  int optLevel = 3;
  /// Widest vectors generated code may use, in bits (128, 256 or 512; 0 =
  /// $KILN_MAX_VECTOR_BITS, else the host's widest). 256 on an AVX-512 host
  /// generates and runs the AVX2 code.
  int maxVectorBits = 0;
  /// How far ahead generated loops prefetch the rows of weights that stream
  /// from L3 or memory, in bytes (kiln-prefetch-streams; 0 = no prefetches).
  /// Unset = $KILN_PREFETCH_BYTES, else 8192; at most kMaxPrefetchBytes.
  std::optional<int> prefetchBytes;
  static constexpr int kMaxPrefetchBytes = 1 << 24;
  /// Tile and vectorize generated code per op (kiln-cpu-strategy); false =
  /// plain loops.
  bool vectorize = true;
  /// Write the IR after each lowering stage into this directory ("" =
  /// $KILN_DUMP_IR, else off).
  std::string dumpIRDir;
  /// With dumpIRDir, also write the IR after every MLIR pass that changed
  /// it (DIR/<kernel>.<n>.<stage>.passes/NN.<pass>.mlir). Unset =
  /// $KILN_DUMP_IR_PASSES=1.
  std::optional<bool> dumpIRPasses;
  /// Register generated code with perf (jitdump files, for `perf record -k 1`
  /// + `perf inject --jit`) and with GDB's JIT interface, each kernel under
  /// its own name ("kiln.main.cluster3"). Unset = $KILN_PERF=1, else off.
  std::optional<bool> jitSymbols;
  /// Move weights of 64 KiB or more into memory backed by transparent huge
  /// pages (Linux) when the first function reading them is compiled or
  /// loaded from the disk cache: fewer TLB misses while they stream from
  /// memory on every call (ResNet-50: steady-state median 0.95x). The copy
  /// (120 MB in 30-350 ms for ResNet-50 on the development VMs) runs in the
  /// background after a first call's code is ready, the call reading the
  /// weights where they are meanwhile (Module::waitForBackgroundCompiles
  /// waits for it); code compiled ahead of calls (Module::compile,
  /// prewarming, the tiered background compile) moves them before it is
  /// returned (a "huge-pages" stage). Costs a second copy of those weights
  /// in memory (the module keeps its own). Unset = $KILN_HUGE_PAGES (0 or
  /// 1), else on.
  std::optional<bool> hugePageWeights;
  /// Most bytes of tensor memory (inputs read by kiln, outputs, execution
  /// arenas, eager results, kernel outputs) the process may hold; 0 = no
  /// limit beyond what the system gives (RLIMIT_AS, cgroup memory.max and
  /// physical memory are always respected). An allocation past it fails
  /// with a kResourceExhausted error naming its size and purpose. The limit
  /// is process-wide: with several runtimes alive the smallest wins. 0 here =
  /// $KILN_MEMORY_LIMIT (bytes, or with a K, M or G suffix), else none.
  uint64_t memoryLimitBytes = 0;
  /// Longest a call may run, in seconds (0 = no limit): its execution is
  /// cancelled at the deadline (between steps, and inside loops of unknown
  /// length) and the call returns a "cancelled" error saying the deadline
  /// passed; the runtime stays usable. The deadline also stops the compile
  /// of a first call (between kernels: one kernel's LLVM compile is not
  /// interrupted). Calls given their own CancellationToken use its deadline.
  double callTimeoutSeconds = 0;
  /// Most calls (call and callAsync) of this runtime's modules running at
  /// once, counted from the call until every result is available (0 = no
  /// limit). Bounds the memory a burst of calls holds: each call in flight
  /// holds its inputs, outputs and an execution arena.
  int maxCallsInFlight = 0;
  /// What a call beyond maxCallsInFlight does: wait for one to finish
  /// (callAsync then blocks its caller; never call it from an executor
  /// worker with this on), or fail at once with a kUnavailable error
  /// starting "busy:".
  enum class WhenBusy { kWait, kFail };
  WhenBusy whenBusy = WhenBusy::kWait;
  /// What a call whose shape signature has no compiled code yet does:
  ///   kWait        compile (or load from the disk cache), then run: the
  ///                call waits for the compiler (seconds for big models);
  ///   kTiered      run at once on a plan of handwritten kernels while the
  ///                JIT compile runs in the background; later calls switch
  ///                to the compiled code when it is ready (atomically; calls
  ///                in flight finish on the plan they started). Code already
  ///                in the memory or disk cache is used at once, as kWait.
  ///   kKernelsOnly handwritten kernels only, never a JIT compile (ops that
  ///                no kernel takes are still compiled).
  /// Unset = $KILN_COMPILE_POLICY (wait, tiered or kernels-only), else kWait.
  enum class CompilePolicy { kWait, kTiered, kKernelsOnly };
  std::optional<CompilePolicy> compilePolicy;
  /// Range code for batches: a call of a function whose batch the analysis
  /// proves separable (FunctionSignature::batch), at a batch size without
  /// code of its own, runs as calls of batch 1 on slices of its inputs,
  /// each writing its slice of the outputs, so one compile serves every
  /// batch size. A size called `hotBatchCalls` times gets code of its own
  /// compiled in the background (not under kKernelsOnly), which takes over
  /// only if it measures faster than the batch-1 code (once one size of a
  /// function did not, only sizes at least twice the largest tried are
  /// compiled). Unset =
  /// $KILN_BATCH_RANGES (0 or 1), else on. hotBatchCalls: 0 = never; unset
  /// = $KILN_HOT_BATCH_CALLS, else 8.
  std::optional<bool> batchRanges;
  std::optional<int> hotBatchCalls;
  /// Under kTiered, for a function whose signature has dynamic dimensions
  /// (other than a batch the range code serves: a sequence length, an image
  /// size), a new shape runs on the kernel plan and its JIT compile waits
  /// until the shape is hot: called `hotShapeCalls` times, and at least once
  /// in every 16 calls the module's kernel plans served. Traffic of one
  /// shape compiles on its second call; a stream of ever-new sequence
  /// lengths is served by the kernel plans and compiles only the lengths it
  /// repeats often (a compile per length would cost seconds of the cores for
  /// calls of milliseconds). Functions of static shapes compile at once, as
  /// before. 1 = every shape at once (no deferral). Unset =
  /// $KILN_HOT_SHAPE_CALLS, else 2.
  std::optional<int> hotShapeCalls;
  /// Run one step of a call at a time (in an order the graph's dependences
  /// allow), each step's parallel loops still on every thread. Slower: for
  /// profiling, so that each step's time in a trace is its own rather than
  /// shared with independent steps running beside it (`kiln profile
  /// --serial`).
  bool serialSteps = false;
  /// Where JIT-compiled code runs: "cpu" (the host), or "cuda" / "cuda:N"
  /// (NVIDIA GPU N; handwritten kernels stay on the host). "" = $KILN_DEVICE,
  /// else cpu. Compiling for a GPU needs none; running without one is an
  /// "unavailable" error.
  std::string device;
  /// GPU architecture to generate code for, e.g. sm_90 ("" = the GPU's own,
  /// else sm_90).
  std::string gpuArch;
  /// On a GPU (docs/gpu.md), unset = the environment's, else the default:
  /// gpuGraphs: each plan captured once as a CUDA graph and replayed by one
  /// launch ($KILN_GPU_GRAPHS 0|1, off); gpuTf32: FP32 convolutions may
  /// use TF32 tensor cores ($KILN_GPU_TF32 0|1, off);
  /// gpuProfile: every launch timed with CUDA events, the totals on stderr
  /// when the code is unloaded ($KILN_GPU_PROFILE 0|1, off); gpuConvAlgo:
  /// how cuDNN's convolution algorithms are chosen, each timed once on the
  /// device ("find", cuDNN's Find) or by cuDNN's heuristics ("heuristic")
  /// ($KILN_GPU_CONV_ALGO, find).
  std::optional<bool> gpuGraphs, gpuTf32, gpuProfile;
  std::string gpuConvAlgo;
  /// Where warnings go (null = stderr).
  WarningSink warnings;

  /// `explicitOptions` completed from the environment: $KILN_CACHE_DIR
  /// (else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln), $KILN_CACHE,
  /// $KILN_OP_MODE, $KILN_DUMP_IR, $KILN_MAX_VECTOR_BITS, $KILN_PERF, $KILN_HUGE_PAGES, $KILN_DEVICE, $KILN_MEMORY_LIMIT,
  /// $KILN_COMPILE_POLICY, $KILN_BATCH_RANGES, $KILN_GPU_GRAPHS, $KILN_GPU_TF32,
  /// $KILN_GPU_PROFILE, $KILN_GPU_CONV_ALGO. What `explicitOptions` sets wins. Errors
  /// name the variable and what it should hold.
  static llvm::Expected<RuntimeOptions> fromEnvironment(RuntimeOptions explicitOptions);
  static llvm::Expected<RuntimeOptions> fromEnvironment() { return fromEnvironment(RuntimeOptions()); }
  /// The GPU ordinal of `device` ("cuda" = 0, "cuda:2" = 2), or -1 for the
  /// host.
  int gpuOrdinal() const;
};

/// "wait" | "tiered" | "kernels-only"
const char *compilePolicyName(RuntimeOptions::CompilePolicy policy);
/// Parses a compile policy by its name; nothing for another word.
std::optional<RuntimeOptions::CompilePolicy> parseCompilePolicy(llvm::StringRef text);

}  // namespace kiln
