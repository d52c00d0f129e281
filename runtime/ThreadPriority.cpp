#include "runtime/ThreadPriority.h"

#include <thread>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#endif

namespace kiln {
namespace {
thread_local bool background = false;
}  // namespace

void enterBackgroundPriority() {
  background = true;
#if defined(__linux__)
  // On Linux a nice value belongs to the thread (its tid), not the process.
  id_t tid = id_t(::syscall(SYS_gettid));
  errno = 0;
  int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno == 0 && now < kBackgroundNice) (void)::setpriority(PRIO_PROCESS, tid, kBackgroundNice);
#endif
}

void runAtBackgroundPriority(llvm::function_ref<void()> work) {
  std::thread([&] {
    enterBackgroundPriority();
    work();
  }).join();
}

bool inBackgroundPriority() { return background; }

}  // namespace kiln
