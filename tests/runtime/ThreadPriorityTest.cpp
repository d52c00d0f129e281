// Background priority (runtime/ThreadPriority.h): per thread, not the
// process's, and marked for the helpers the thread hands work to.
#include "runtime/ThreadPriority.h"

#include <gtest/gtest.h>

#include <thread>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

int ownNice() {
#if defined(__linux__)
  return ::getpriority(PRIO_PROCESS, id_t(::syscall(SYS_gettid)));
#else
  return 0;
#endif
}

TEST(ThreadPriority, BackgroundThreadRunsBelowTheOthers) {
  int before = ownNice();
  bool marked = false;
  int inside = 0;
  std::thread([&] {
    EXPECT_FALSE(kiln::inBackgroundPriority());
    kiln::enterBackgroundPriority();
    marked = kiln::inBackgroundPriority();
    inside = ownNice();
  }).join();
  EXPECT_TRUE(marked);
#if defined(__linux__)
  EXPECT_GE(inside, kiln::kBackgroundNice);
#endif
  // The caller, and a thread started after, keep their priority.
  EXPECT_EQ(ownNice(), before);
  EXPECT_FALSE(kiln::inBackgroundPriority());
  int other = -100;
  std::thread([&] { other = ownNice(); }).join();
  EXPECT_EQ(other, before);
}

// runAtBackgroundPriority: the work on another thread, below the caller's
// priority, done when it returns; the caller keeps its own.
TEST(ThreadPriority, RunAtBackgroundPriorityLeavesTheCallerAsItWas) {
  int before = ownNice(), inside = 0;
  bool marked = false;
  std::thread::id worker;
  kiln::runAtBackgroundPriority([&] {
    marked = kiln::inBackgroundPriority();
    inside = ownNice();
    worker = std::this_thread::get_id();
  });
  EXPECT_TRUE(marked);
  EXPECT_NE(worker, std::this_thread::get_id());
#if defined(__linux__)
  EXPECT_GE(inside, kiln::kBackgroundNice);
#endif
  EXPECT_EQ(ownNice(), before);
  EXPECT_FALSE(kiln::inBackgroundPriority());
}

}  // namespace
