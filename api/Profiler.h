// Profiler: what ran, where the time went, and how close each kernel came
// to the machine's peak.
//
//   kiln::Profiler p(*runtime);              // starts recording
//   module->call("main", {x});               // ... any calls, any threads
//   kiln::Profile prof = p.stop();           // stops; the figures
//   std::puts(prof.table().c_str());         // per-kernel table, slowest first
//   write(prof.chromeTraceJson());           // opens in Perfetto / chrome://tracing
//
// While no profiler records, executables pay one relaxed load per step.
// Every executed step is recorded (name, JIT or handwritten, thread, start,
// end), and every compile (its stages and cache outcome). Per kernel: calls,
// total and mean time, FLOPs from its ops' shapes, bytes of its buffers,
// achieved GFLOP/s and GB/s, and the fraction of the machine's measured
// peak (one core's FMA throughput times the executor's threads; one
// thread's copy bandwidth), so that each kernel sits on a roofline.
//
// Thread-safety: a Profiler belongs to one thread; the calls it records may
// come from any. One profiler per runtime at a time.
#pragma once

#include "api/Kiln.h"
#include "runtime/Trace.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct KernelProfile {
  std::string name;        // "jit:@main.cluster3", "kernel:conv2d_f32_im2col_eigen", "copy"
  std::string kind;        // jit | kernel | copy | other
  std::string ops;         // the ops it computes
  std::string provenance;  // their MLIR locations
  std::string source;      // the same, short: shortProvenance(provenance)
  std::string strategy;    // how its code computes them (register tiles, blocks, fused ops), or why a kernel
  std::string outputType;  // of its first output ("1x7x7x2048xf32")
  int64_t calls = 0;
  double totalMs = 0;
  double flopsPerCall = 0, bytesPerCall = 0;
  std::vector<double> callMs;  // each call's time, in the order recorded
  double meanMs() const { return calls ? totalMs / double(calls) : 0; }
  /// The middle call's time: on a machine whose other tenants slow a few
  /// calls a lot, the figure to compare (a mean carries those calls).
  double medianMs() const;
  double gflops() const { return totalMs > 0 ? flopsPerCall * double(calls) / (totalMs * 1e6) : 0; }
  double gbs() const { return totalMs > 0 ? bytesPerCall * double(calls) / (totalMs * 1e6) : 0; }
};

/// MLIR locations ("dir/model.py:12:5, dir/model.py:13:5, .../site-packages/
/// torch/nn/functional.py:2450:3") as a reader wants them beside a kernel:
/// frames of installed packages (site-packages, dist-packages, the Python
/// library) left out where the model's own frames are there, each file once
/// by its name with its lines and runs of lines ("model.py:12-13"), at most
/// `maxLines` lines and "+N more".
std::string shortProvenance(const std::string &provenance, size_t maxLines = 8);

struct Profile {
  std::vector<TraceEvent> events;      // steps and compiles, in the order recorded
  std::vector<KernelProfile> kernels;  // by total time, largest first
  double recordedMs = 0;               // wall time between start and stop
  double stepMs = 0;                   // total time inside steps (all threads)
  double peakGflops = 0;               // one core's FMA peak x compute threads
  double bandwidthGBs = 0;             // one thread's copy bandwidth
  int threads = 1;

  /// Per-kernel table, slowest first, with a header line of totals; under
  /// each kernel with a strategy, a line saying it.
  std::string table(size_t maxRows = 40) const;
  /// The same, every row, as JSON: {"recorded_ms", "step_ms", "peak_gflops",
  /// "bandwidth_gbs", "threads", "kernels": [{"name", "kind", "ops",
  /// "provenance", "source", "strategy", "output_type", "calls", "total_ms", "mean_ms",
  /// "gflops", "gbs", "percent_time", "percent_peak", "flops_per_call",
  /// "bytes_per_call"}, ...]} (slowest first).
  std::string tableJson() const;
  /// Chrome trace-event JSON: one track per thread, compiles and steps on
  /// one timeline (Perfetto, chrome://tracing).
  std::string chromeTraceJson() const;
  /// A self-contained HTML report (no network): the timeline, the
  /// per-kernel table and a roofline plot (achieved GFLOP/s against
  /// arithmetic intensity, under the measured peak and bandwidth).
  std::string htmlReport() const;
};

class Profiler {
public:
  /// Starts recording the runtime's executions and compiles. With
  /// `measurePeaks`, the machine's peaks come from the cache directory's
  /// machine-peaks.json (same target), else are measured (about 0.2 s) and
  /// stored there.
  explicit Profiler(Runtime &runtime, bool measurePeaks = true);
  ~Profiler();
  Profiler(const Profiler &) = delete;
  Profiler &operator=(const Profiler &) = delete;
  /// Stops recording and computes the figures.
  Profile stop();

private:
  Runtime &runtime_;
  std::shared_ptr<TraceRecorder> trace_;
  double peakGflops_ = 0, bandwidthGBs_ = 0;
  bool stopped_ = false;
};

}  // namespace kiln
