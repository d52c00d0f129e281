#include "api/Profiler.h"

#include "runtime/FileIO.h"
#include "runtime/Executable.h"
#include "runtime/MachinePeak.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>

namespace kiln {

namespace {

/// One core's FMA peak and one thread's bandwidth for this machine and
/// vector width: read from `<cache dir>/machine-peaks.json` when it was
/// measured for the same target, else measured (≈0.2 s) and stored there
/// (read-write cache only; written to a temporary file and renamed).
std::pair<double, double> machinePeaks(const RuntimeOptions &o, const std::string &target) {
  using json = nlohmann::json;
  std::string path = o.cacheDir.empty() ? "" : o.cacheDir + "/machine-peaks.json";
  std::string key = target + " max-vector-bits=" + std::to_string(o.maxVectorBits);
  if (!path.empty())
    if (auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true)) {
      json j = json::parse((*buf)->getBuffer().str(), nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.value("target", "") == key && j.value("fma_gflops_per_core", 0.0) > 0)
        return {j.value("fma_gflops_per_core", 0.0), j.value("bandwidth_gbs", 0.0)};
    }
  std::pair<double, double> peaks = {measureFmaPeakGflops(o.maxVectorBits), measureMemoryBandwidthGBs()};
  if (!path.empty() && o.cacheMode == CacheMode::kReadWrite && llvm::sys::fs::is_directory(o.cacheDir)) {
    // Best effort: a cache directory that cannot take it measures again next time.
    llvm::consumeError(writeFileReplacing(
        path, json{{"target", key}, {"fma_gflops_per_core", peaks.first}, {"bandwidth_gbs", peaks.second}}.dump(
                  1, ' ', false, json::error_handler_t::replace)));
  }
  return peaks;
}

/// The kernel an event ran, described from its executable's step or, for
/// work outside an executable (an eager op), from the event itself; calls
/// and time left at zero. Nothing for compiles.
std::optional<KernelProfile> kernelOf(const TraceEvent &e) {
  KernelProfile k;
  k.kind = e.category;
  if (!e.executable) {
    if (e.ops.empty()) return std::nullopt;
    k.name = e.name;
    k.ops = e.ops;
    k.outputType = e.outputType;
    k.bytesPerCall = e.bytes;
    return k;
  }
  if (e.step < 0 || e.step >= int(e.executable->numSteps())) return std::nullopt;
  const StepDesc &s = e.executable->steps()[e.step];
  k.name = s.name;
  k.ops = s.ops;
  k.provenance = s.provenance;
  k.source = shortProvenance(s.provenance);
  k.strategy = s.strategy;
  k.flopsPerCall = s.flops;
  for (int b : s.inputs) k.bytesPerCall += double(e.executable->buffers()[b].bytes);
  for (int b : s.outputs) k.bytesPerCall += double(e.executable->buffers()[b].bytes);
  if (!s.outputs.empty()) k.outputType = e.executable->buffers()[s.outputs[0]].type.str();
  return k;
}

}  // namespace

std::string shortProvenance(const std::string &provenance, size_t maxLines) {
  // path:line:col or path:line -> path and line; false for anything else.
  auto parse = [](llvm::StringRef part, llvm::StringRef &path, long &line) {
    auto [head, last] = part.rsplit(':');
    long n = 0, m = 0;
    if (head.empty() || head == part || last.getAsInteger(10, n)) return false;
    auto [file, middle] = head.rsplit(':');
    if (!file.empty() && file != head && !middle.getAsInteger(10, m)) {
      path = file;
      line = m;
    } else {
      path = head;
      line = n;
    }
    return true;
  };
  struct Frame {
    std::string file;  // its name without the folders, or the text as given
    long line = 0;     // 0: not a location
    bool library = false;
  };
  std::vector<Frame> frames;
  llvm::SmallVector<llvm::StringRef, 16> parts;
  llvm::StringRef(provenance).split(parts, ',', -1, false);
  for (llvm::StringRef part : parts) {
    part = part.trim();
    llvm::StringRef path;
    long line = 0;
    if (!parse(part, path, line)) {
      frames.push_back({part.str(), 0, false});
      continue;
    }
    Frame f;
    f.file = path.contains('/') ? path.rsplit('/').second.str() : path.str();
    f.line = line;
    f.library = path.contains("/site-packages/") || path.contains("/dist-packages/") ||
                path.contains("/lib/python") || path.starts_with("<frozen");
    frames.push_back(f);
  }
  bool own = false;
  for (const Frame &f : frames) own |= !f.library;
  // Each file once, in order of first appearance, with its lines sorted and
  // runs of lines joined; at most maxLines entries in all.
  std::vector<std::pair<std::string, std::vector<long>>> files;
  for (const Frame &f : frames) {
    if (own && f.library) continue;
    auto it = std::find_if(files.begin(), files.end(), [&](const auto &e) { return e.first == f.file; });
    if (it == files.end()) it = files.insert(files.end(), {f.file, {}});
    if (f.line > 0) it->second.push_back(f.line);
  }
  std::string out;
  size_t shown = 0, total = 0;
  for (auto &[file, lines] : files) {
    std::sort(lines.begin(), lines.end());
    lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
    std::vector<std::string> runs;
    for (size_t i = 0; i < lines.size();) {
      size_t j = i;
      while (j + 1 < lines.size() && lines[j + 1] == lines[j] + 1) ++j;
      runs.push_back(std::to_string(lines[i]) + (j > i ? "-" + std::to_string(lines[j]) : ""));
      i = j + 1;
    }
    total += std::max<size_t>(1, runs.size());
    if (shown >= maxLines) continue;
    out += (out.empty() ? "" : "; ") + file;
    if (runs.empty()) ++shown;
    for (size_t r = 0; r < runs.size() && shown < maxLines; ++r, ++shown) out += (r ? ", " : ":") + runs[r];
  }
  if (total > shown) out += " (+" + std::to_string(total - shown) + " more)";
  return out;
}

double KernelProfile::medianMs() const {
  if (callMs.empty()) return 0;
  std::vector<double> v(callMs);
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + long(mid), v.end());
  if (v.size() % 2) return v[mid];
  double upper = v[mid];
  return (*std::max_element(v.begin(), v.begin() + long(mid)) + upper) / 2;
}

Profiler::Profiler(Runtime &runtime, bool measurePeaks) : runtime_(runtime) {
  if (measurePeaks) {
    auto [fma, bandwidth] = machinePeaks(runtime.options(), runtime.targetDescription());
    peakGflops_ = fma * runtime.executor().numThreads();
    bandwidthGBs_ = bandwidth;
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
    std::optional<KernelProfile> row = kernelOf(e);
    if (!row) continue;  // a compile, or a step of an unknown executable
    auto [it, inserted] = index.try_emplace(row->name + "\n" + row->ops, p.kernels.size());
    if (inserted) p.kernels.push_back(std::move(*row));
    KernelProfile &k = p.kernels[it->second];
    ++k.calls;
    k.totalMs += e.durationUs / 1000.0;
    k.callMs.push_back(e.durationUs / 1000.0);
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
  out += llvm::formatv("{0,6} {1,6} {2,9} {3,9} {4,9} {5,8} {6,8} {7,6} {8,8}  {9,-18} {10}\n", "time%", "calls",
                       "total ms", "mean ms", "median ms", "GFLOP/s", "GB/s", "%peak", "MFLOP", "output", "kernel: ops")
             .str();
  for (size_t i = 0; i < kernels.size() && i < maxRows; ++i) {
    const KernelProfile &k = kernels[i];
    std::string ops = k.ops.size() > 70 ? k.ops.substr(0, 67) + "..." : k.ops;
    out += llvm::formatv(
               "{0,6:f1} {1,6} {2,9:f3} {3,9:f4} {4,9:f4} {5,8:f1} {6,8:f1} {7,6:f1} {8,8:f1}  {9,-18} {10}: {11}\n",
               stepMs > 0 ? 100.0 * k.totalMs / stepMs : 0.0, k.calls, k.totalMs, k.meanMs(), k.medianMs(), k.gflops(),
               k.gbs(), peakGflops > 0 ? 100.0 * k.gflops() / peakGflops : 0.0, k.flopsPerCall / 1e6, k.outputType,
               k.name, ops)
               .str();
    if (!k.strategy.empty()) out += "         how: " + k.strategy + "\n";
  }
  if (kernels.size() > maxRows) out += llvm::formatv("  ... {0} more kernels\n", kernels.size() - maxRows).str();
  return out;
}

std::string Profile::tableJson() const {
  using json = nlohmann::json;
  json rows = json::array();
  for (const KernelProfile &k : kernels)
    rows.push_back({{"name", k.name},
                    {"kind", k.kind},
                    {"ops", k.ops},
                    {"provenance", k.provenance},
                    {"source", k.source},
                    {"strategy", k.strategy},
                    {"output_type", k.outputType},
                    {"calls", k.calls},
                    {"total_ms", k.totalMs},
                    {"mean_ms", k.meanMs()},
                    {"median_ms", k.medianMs()},
                    {"gflops", k.gflops()},
                    {"gbs", k.gbs()},
                    {"percent_time", stepMs > 0 ? 100.0 * k.totalMs / stepMs : 0.0},
                    {"percent_peak", peakGflops > 0 ? 100.0 * k.gflops() / peakGflops : 0.0},
                    {"flops_per_call", k.flopsPerCall},
                    {"bytes_per_call", k.bytesPerCall}});
  json out = {{"recorded_ms", recordedMs}, {"step_ms", stepMs},   {"peak_gflops", peakGflops},
              {"bandwidth_gbs", bandwidthGBs}, {"threads", threads}, {"kernels", std::move(rows)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
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
  return json{{"traceEvents", out}, {"displayTimeUnit", "ms"}}.dump(1, ' ', false, json::error_handler_t::replace);
}

std::string Profile::htmlReport() const {
  using json = nlohmann::json;
  json kernelsJson = json::array();
  for (const KernelProfile &k : kernels)
    kernelsJson.push_back({{"name", k.name},
                           {"kind", k.kind},
                           {"ops", k.ops},
                           {"provenance", k.provenance},
                           {"source", k.source},
                           {"strategy", k.strategy},
                           {"output", k.outputType},
                           {"calls", k.calls},
                           {"totalMs", k.totalMs},
                           {"meanMs", k.meanMs()},
                           {"medianMs", k.medianMs()},
                           {"gflops", k.gflops()},
                           {"gbs", k.gbs()},
                           {"flopsPerCall", k.flopsPerCall},
                           {"bytesPerCall", k.bytesPerCall}});
  json eventsJson = json::array();
  for (const TraceEvent &e : events)
    eventsJson.push_back({{"name", e.name}, {"cat", e.category}, {"tid", e.thread}, {"ts", e.startUs},
                          {"dur", e.durationUs}});
  json data = {{"kernels", kernelsJson},   {"events", eventsJson},         {"recordedMs", recordedMs},
               {"stepMs", stepMs},         {"peakGflops", peakGflops},     {"bandwidthGBs", bandwidthGBs},
               {"threads", threads}};
  // The data goes into a <script> element: keep "</" out of it.
  std::string payload = data.dump(-1, ' ', false, json::error_handler_t::replace);
  for (size_t at = 0; (at = payload.find("</", at)) != std::string::npos; at += 3) payload.replace(at, 2, "<\\/");
  static const char *kPage = R"html(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>kiln profile</title>
<style>
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px}h2{font-size:15px;margin-top:24px}
table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
td.l,th.l{text-align:left}td.s{text-align:left;font-size:12px;color:#444;min-width:24em;max-width:40em}svg{background:#fafafa;border:1px solid #ddd}
.jit{fill:#3b7dd8}.kernel{fill:#e08a1e}.copy{fill:#999}.other{fill:#999}.compile{fill:#6a4}
</style></head><body>
<h1>kiln profile</h1><div id="summary"></div>
<h2>Timeline</h2>
<div><button id="tl-calls">calls after the compiles</button> <button id="tl-all">whole recording</button>
 <span style="color:#666">drag over the timeline to zoom in, double-click to zoom out</span></div>
<div id="timeline"></div><div id="legend"></div>
<h2>Roofline</h2><div id="roofline"></div>
<h2>Kernels (slowest first)</h2><div id="table"></div>
<script id="data" type="application/json">@DATA@</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
function summary() {
  return `${D.kernels.length} kernels, ${D.recordedMs.toFixed(1)} ms recorded, ${D.stepMs.toFixed(1)} ms inside steps; ` +
         `peak ${D.peakGflops.toFixed(0)} GFLOP/s (${D.threads} threads), ${D.bandwidthGBs.toFixed(1)} GB/s`;
}
// The timeline shows a range of the recording: by default the calls after
// the last compile (a first call's compile would shrink them to a sliver);
// the buttons pick the whole recording or the calls again, a drag over the
// timeline zooms into what it covers, a double-click zooms out.
const T = (() => {
  if (!D.events.length) return null;
  // Loops, not Math.min(...events): a long recording has more events than
  // a call may take arguments.
  let all = [Infinity, -Infinity], afterCompiles = -Infinity;
  for (const e of D.events) {
    all = [Math.min(all[0], e.ts), Math.max(all[1], e.ts + e.dur)];
    if (e.cat === "compile") afterCompiles = Math.max(afterCompiles, e.ts + e.dur);
  }
  if (afterCompiles === -Infinity) afterCompiles = all[0];
  const callsAfter = D.events.some(e => e.cat !== "compile" && e.ts >= afterCompiles);
  const calls = callsAfter && afterCompiles > all[0] ? [afterCompiles, all[1]] : all;
  return {all, calls, view: calls};
})();
const TW = 1100, TL = 80, TR = 40;  // width, left (thread names) and right margins
function timeline() {
  if (!T) return "<p>no events</p>";
  const [t0, t1] = T.view, span = Math.max(1, t1 - t0);
  const tids = [...new Set(D.events.map(e => e.tid))].sort((a, b) => a - b);
  const row = 22, H = row * tids.length + 24, x = t => TL + (TW - TL - TR) * (t - t0) / span;
  let s = `<svg id="tl" width="${TW}" height="${H}" style="cursor:crosshair">`;
  tids.forEach((tid, i) => { s += `<text x="4" y="${i * row + 15}">thread ${tid}</text>`; });
  for (const e of D.events) {
    if (e.ts + e.dur < t0 || e.ts > t1) continue;
    const i = tids.indexOf(e.tid), a = Math.max(t0, e.ts), b = Math.min(t1, e.ts + e.dur);
    const w = Math.max(0.5, x(b) - x(a));
    s += `<rect class="${esc(e.cat)}" x="${x(a).toFixed(2)}" y="${i * row + 3}" width="${w.toFixed(2)}" height="${row - 6}">` +
         `<title>${esc(e.name)} ${(e.dur / 1000).toFixed(3)} ms</title></rect>`;
  }
  // Ticks in ms from the start of the recording, inside the drawing.
  for (let i = 0; i <= 5; ++i) {
    const t = t0 + span * i / 5, anchor = i === 0 ? "start" : i === 5 ? "end" : "middle";
    s += `<text x="${x(t).toFixed(1)}" y="${H - 4}" text-anchor="${anchor}">${((t - T.all[0]) / 1000).toFixed(span < 2000 ? 3 : 1)} ms</text>`;
  }
  return s + `<rect id="tl-sel" x="0" y="0" width="0" height="${H - 20}" fill="#3b7dd8" fill-opacity="0.15"/></svg>`;
}
function legend() {
  const items = [["jit", "generated code (JIT)"], ["kernel", "handwritten kernel"], ["copy", "copy"],
                 ["compile", "compile"], ["other", "other"]];
  return items.map(([c, label]) => `<svg width="12" height="12"><rect class="${c}" width="12" height="12"/></svg> ${label}`)
      .join("&nbsp;&nbsp; ");
}
function drawTimeline() {
  document.getElementById("timeline").innerHTML = timeline();
  const svg = document.getElementById("tl");
  if (!svg) return;
  const sel = document.getElementById("tl-sel");
  const toTime = px => T.view[0] + (T.view[1] - T.view[0]) * (px - TL) / (TW - TL - TR);
  let from = null;
  const px = ev => ev.clientX - svg.getBoundingClientRect().left;
  svg.onmousedown = ev => { from = px(ev); sel.setAttribute("x", from); sel.setAttribute("width", 0); };
  svg.onmousemove = ev => {
    if (from === null) return;
    const to = px(ev);
    sel.setAttribute("x", Math.min(from, to));
    sel.setAttribute("width", Math.abs(to - from));
  };
  svg.onmouseup = ev => {
    const to = px(ev);
    if (from !== null && Math.abs(to - from) > 3) {
      const a = toTime(Math.min(from, to)), b = toTime(Math.max(from, to));
      T.view = [Math.max(T.all[0], a), Math.min(T.all[1], b)];
      from = null;
      drawTimeline();
      return;
    }
    from = null;
    sel.setAttribute("width", 0);
  };
  svg.ondblclick = () => { T.view = T.all; drawTimeline(); };
}
function roofline() {
  const pts = D.kernels.filter(k => k.flopsPerCall > 0 && k.bytesPerCall > 0 && k.gflops > 0);
  if (!pts.length) return "<p>no kernel with a FLOP count</p>";
  const W = 760, H = 420, R = 70, lx = v => Math.log10(v), ai = k => k.flopsPerCall / k.bytesPerCall;
  const xs = pts.map(ai), ys = pts.map(k => k.gflops);
  const xmin = Math.floor(lx(Math.min(...xs, 0.1))), xmax = Math.ceil(lx(Math.max(...xs, 100)));
  const ymax = Math.ceil(lx(Math.max(...ys, D.peakGflops || 1) * 1.5)), ymin = Math.floor(lx(Math.min(...ys, 0.1)));
  // R: room on the right for the last tick and the peak's label.
  const X = v => 50 + (W - 50 - R) * (lx(v) - xmin) / (xmax - xmin), Y = v => H - 30 - (H - 44) * (lx(v) - ymin) / (ymax - ymin);
  let s = `<svg width="${W}" height="${H}">`;
  for (let e = xmin; e <= xmax; ++e) s += `<text x="${X(10 ** e)}" y="${H - 12}" text-anchor="middle">1e${e}</text>`;
  for (let e = ymin; e <= ymax; ++e) s += `<text x="4" y="${Y(10 ** e) + 4}">1e${e}</text>`;
  s += `<text x="${W / 2 - 80}" y="${H - 1}">FLOP per byte of the kernel's buffers</text>`;
  if (D.peakGflops > 0 && D.bandwidthGBs > 0) {  // min(peak, bandwidth x intensity)
    const knee = D.peakGflops / D.bandwidthGBs, a = 10 ** xmin, b = 10 ** xmax;
    s += `<polyline fill="none" stroke="#c33" stroke-width="2" points="${X(a)},${Y(Math.max(10 ** ymin, a * D.bandwidthGBs))} ` +
         `${X(knee)},${Y(D.peakGflops)} ${X(b)},${Y(D.peakGflops)}"/>`;
    s += `<text x="${W - 4}" y="${Y(D.peakGflops) - 6}" text-anchor="end">peak ${D.peakGflops.toFixed(0)} GFLOP/s</text>`;
  }
  for (const k of pts)
    s += `<circle class="${esc(k.kind)}" cx="${X(ai(k)).toFixed(1)}" cy="${Y(k.gflops).toFixed(1)}" r="${3 + Math.min(8, k.totalMs / Math.max(1e-9, D.stepMs) * 40)}">` +
         `<title>${esc(k.name)}: ${k.gflops.toFixed(1)} GFLOP/s, ${ai(k).toFixed(2)} FLOP/B, ${k.totalMs.toFixed(2)} ms</title></circle>`;
  return s + "</svg>";
}
function table() {
  let s = "<table><tr><th>time %</th><th>calls</th><th>total ms</th><th>mean ms</th><th>median ms</th><th>GFLOP/s</th><th>GB/s</th>" +
          "<th>% peak</th><th class=l>strategy</th><th class=l>output</th><th class=l>kernel</th><th class=l>ops</th><th class=l>from</th></tr>";
  for (const k of D.kernels)
    s += `<tr><td>${(100 * k.totalMs / Math.max(1e-9, D.stepMs)).toFixed(1)}</td><td>${k.calls}</td><td>${k.totalMs.toFixed(3)}</td>` +
         `<td>${k.meanMs.toFixed(4)}</td><td>${k.medianMs.toFixed(4)}</td><td>${k.gflops.toFixed(1)}</td><td>${k.gbs.toFixed(1)}</td>` +
         `<td>${D.peakGflops > 0 ? (100 * k.gflops / D.peakGflops).toFixed(1) : ""}</td>` +
         `<td class=s>${(k.strategy || "").split("; ").map(esc).join("<br>")}</td><td class=l>${esc(k.output)}</td>` +
         `<td class=l>${esc(k.name)}</td><td class=l>${esc(k.ops)}</td>` +
         `<td class=l title="${esc(k.provenance)}">${esc(k.source)}</td></tr>`;
  return s + "</table>";
}
document.getElementById("summary").innerHTML = summary();
drawTimeline();
document.getElementById("legend").innerHTML = legend();
document.getElementById("tl-calls").onclick = () => { if (T) { T.view = T.calls; drawTimeline(); } };
document.getElementById("tl-all").onclick = () => { if (T) { T.view = T.all; drawTimeline(); } };
drawTimeline();
document.getElementById("legend").innerHTML = legend();
document.getElementById("tl-calls").onclick = () => { if (T) { T.view = T.calls; drawTimeline(); } };
document.getElementById("tl-all").onclick = () => { if (T) { T.view = T.all; drawTimeline(); } };
document.getElementById("roofline").innerHTML = roofline();
document.getElementById("table").innerHTML = table();
// Reached only when every section rendered (browser tests look for it).
if (document.body) document.body.setAttribute("data-rendered", "ok");
</script></body></html>
)html";
  std::string page = kPage;
  page.replace(page.find("@DATA@"), 6, payload);
  return page;
}

}  // namespace kiln
