#include "api/Profiler.h"

#include "runtime/Executable.h"
#include "runtime/MachinePeak.h"

#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace kiln {

Profiler::Profiler(Runtime &runtime, bool measurePeaks) : runtime_(runtime) {
  if (measurePeaks) {
    peakGflops_ = measureFmaPeakGflops(runtime.options().maxVectorBits) * runtime.executor().numThreads();
    bandwidthGBs_ = measureMemoryBandwidthGBs();
  }
  trace_ = std::make_shared<TraceRecorder>();
  runtime_.executor().setTrace(trace_);
}

Profiler::~Profiler() {
  if (!stopped_) runtime_.executor().setTrace(nullptr);
}

Profile Profiler::stop() {
  Profile p;
  if (!stopped_) runtime_.executor().setTrace(nullptr);
  stopped_ = true;
  p.recordedMs = trace_->sinceOriginUs(Clock::now()) / 1000.0;
  p.events = trace_->events();
  p.peakGflops = peakGflops_;
  p.bandwidthGBs = bandwidthGBs_;
  p.threads = runtime_.executor().numThreads();
  std::map<std::string, size_t> index;  // by name + ops: one row per distinct kernel
  for (const TraceEvent &e : p.events) {
    if (!e.executable || e.step < 0 || e.step >= int(e.executable->numSteps())) continue;
    const StepDesc &s = e.executable->steps()[e.step];
    auto [it, inserted] = index.try_emplace(s.name + "\n" + s.ops, p.kernels.size());
    if (inserted) {
      KernelProfile k;
      k.name = s.name;
      k.kind = e.category;
      k.ops = s.ops;
      k.provenance = s.provenance;
      k.flopsPerCall = s.flops;
      for (int b : s.inputs) k.bytesPerCall += double(e.executable->buffers()[b].bytes);
      for (int b : s.outputs) k.bytesPerCall += double(e.executable->buffers()[b].bytes);
      if (!s.outputs.empty()) k.outputType = e.executable->buffers()[s.outputs[0]].type.str();
      p.kernels.push_back(std::move(k));
    }
    KernelProfile &k = p.kernels[it->second];
    ++k.calls;
    k.totalMs += e.durationUs / 1000.0;
    p.stepMs += e.durationUs / 1000.0;
  }
  std::stable_sort(p.kernels.begin(), p.kernels.end(),
                   [](const KernelProfile &a, const KernelProfile &b) { return a.totalMs > b.totalMs; });
  return p;
}

std::string Profile::table(size_t maxRows) const {
  std::string out = llvm::formatv("{0} steps in {1:f2} ms recorded ({2:f2} ms inside steps); peak {3:f0} GFLOP/s "
                                  "({4} threads), {5:f1} GB/s\n",
                                  [&] {
                                    size_t n = 0;
                                    for (const KernelProfile &k : kernels) n += size_t(k.calls);
                                    return n;
                                  }(),
                                  recordedMs, stepMs, peakGflops, threads, bandwidthGBs)
                        .str();
  out += llvm::formatv("{0,6} {1,6} {2,9} {3,9} {4,8} {5,8} {6,6} {7,8}  {8,-18} {9}\n", "time%", "calls", "total ms",
                       "mean ms", "GFLOP/s", "GB/s", "%peak", "MFLOP", "output", "kernel: ops")
             .str();
  for (size_t i = 0; i < kernels.size() && i < maxRows; ++i) {
    const KernelProfile &k = kernels[i];
    std::string ops = k.ops.size() > 70 ? k.ops.substr(0, 67) + "..." : k.ops;
    out += llvm::formatv("{0,6:f1} {1,6} {2,9:f3} {3,9:f4} {4,8:f1} {5,8:f1} {6,6:f1} {7,8:f1}  {8,-18} {9}: {10}\n",
                         stepMs > 0 ? 100.0 * k.totalMs / stepMs : 0.0, k.calls, k.totalMs, k.meanMs(), k.gflops(),
                         k.gbs(), peakGflops > 0 ? 100.0 * k.gflops() / peakGflops : 0.0, k.flopsPerCall / 1e6,
                         k.outputType, k.name, ops)
               .str();
  }
  if (kernels.size() > maxRows) out += llvm::formatv("  ... {0} more kernels\n", kernels.size() - maxRows).str();
  return out;
}

std::string Profile::chromeTraceJson() const {
  using json = nlohmann::json;
  json out = json::array();
  std::map<uint32_t, bool> threadsSeen;
  for (const TraceEvent &e : events) {
    json ev = {{"name", e.name}, {"cat", e.category}, {"ph", "X"},          {"ts", e.startUs},
               {"dur", e.durationUs}, {"pid", 1},     {"tid", e.thread}};
    json args = json::object();
    if (e.executable && e.step >= 0 && e.step < int(e.executable->numSteps())) {
      const StepDesc &s = e.executable->steps()[e.step];
      args["ops"] = s.ops;
      if (!s.provenance.empty()) args["provenance"] = s.provenance;
      if (s.flops > 0) {
        args["gflop"] = s.flops / 1e9;
        if (e.durationUs > 0) args["gflop_per_s"] = s.flops / (e.durationUs * 1e3);
      }
    }
    for (const auto &[k, v] : e.args) args[k] = v;
    ev["args"] = args;
    out.push_back(ev);
    threadsSeen[e.thread] = true;
  }
  for (const auto &[tid, seen] : threadsSeen)
    out.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid},
                      {"args", {{"name", "kiln thread " + std::to_string(tid)}}}});
  out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "kiln"}}}});
  return json{{"traceEvents", out}, {"displayTimeUnit", "ms"}}.dump(1);
}

}  // namespace kiln
