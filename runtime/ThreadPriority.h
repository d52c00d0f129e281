//===- ThreadPriority.h - background work below the calls' priority -------===//
//
// Tiered execution compiles in the background while calls run on kernel
// plans, on the same cores. At the calls' priority a compile of seconds
// (and its helper threads) took the cores from them: BERT-base's calls
// during its two background compiles ran 1.6-1.8x slower on average, the
// tail of a stream of sequence lengths. Threads that do such work lower
// their own priority; the calls then get the cores when they want them and
// the compile the rest: 1.2-1.4x, the compiles 4.4/5.7 -> 5.5/9-10 s
// (nice 10: 1.5x; SCHED_IDLE: 1.2x, but 11/17 s, and no progress at all
// under calls that never pause).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"

namespace kiln {

/// The nice value background threads take (Linux, per thread): against a
/// busy thread of the calls' each gets about 1/70 of a core (CFS weights 15
/// and 1024), and every core the calls leave idle.
constexpr int kBackgroundNice = 19;

/// Lowers the calling thread's scheduling priority to kBackgroundNice (a
/// thread already lower keeps its own) and marks it as a background thread.
/// Raising it again takes privileges, so only threads that exit after the
/// background work call this (not pool threads). No effect on priority
/// where the platform has no per-thread nice.
void enterBackgroundPriority();

/// Runs `work` on a thread of its own at background priority and waits for
/// it: for a thread that must keep its priority (a pool thread, a thread
/// that goes on with the calls' work afterwards).
void runAtBackgroundPriority(llvm::function_ref<void()> work);

/// Whether the calling thread called enterBackgroundPriority: work it hands
/// to helper threads should run at the same priority.
bool inBackgroundPriority();

}  // namespace kiln
