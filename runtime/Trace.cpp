#include "runtime/Trace.h"

#include <atomic>

namespace kiln {

void TraceRecorder::add(TraceEvent event, Clock::time_point start, Clock::time_point end) {
  event.thread = threadId();
  event.startUs = sinceOriginUs(start);
  event.durationUs = std::chrono::duration<double, std::micro>(end - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(event));
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

uint32_t TraceRecorder::threadId() {
  static std::atomic<uint32_t> next{1};
  thread_local uint32_t id = next.fetch_add(1);
  return id;
}

}  // namespace kiln
