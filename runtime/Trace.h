// TraceRecorder: timed events (executed steps, compiles) from any thread,
// for profiles. A HostExecutor carries at most one; Executable records
// each step it runs there while one is set, and nothing at all (one relaxed
// load per step) while none is.
//
// Thread-safety: add() and events() may be called from any thread.
#pragma once

#include "runtime/Clock.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

class Executable;

struct TraceEvent {
  std::string name;      // step ("jit:@main.cluster3") or stage ("compile @main")
  std::string category;  // "jit", "kernel", "copy", "other", "compile"
  uint32_t thread = 0;   // TraceRecorder::threadId() of the thread it ran on
  double startUs = 0;    // since the recorder's origin
  double durationUs = 0;
  /// Steps: the executable (kept alive for the profile to read the step's
  /// description: ops, FLOPs, buffers) and the step's index in it.
  std::shared_ptr<const Executable> executable;
  int step = -1;
  /// Work that is not a step of an executable (an eager op run inline):
  /// what it computes, its output's type and the bytes of its buffers.
  std::string ops, outputType;
  double bytes = 0;
  /// Extra key/value pairs shown with the event (compile stages, ...).
  std::vector<std::pair<std::string, std::string>> args;
};

class TraceRecorder {
public:
  TraceRecorder() : origin_(Clock::now()) {}
  Clock::time_point origin() const { return origin_; }
  double sinceOriginUs(Clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  }
  /// Records an event that ran on this thread from `start` to `end`.
  void add(TraceEvent event, Clock::time_point start, Clock::time_point end);
  std::vector<TraceEvent> events() const;
  /// A small number naming the calling thread (1, 2, ... in order of first use).
  static uint32_t threadId();

private:
  Clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
};

}  // namespace kiln
