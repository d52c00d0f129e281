// ThreadDiagnostics: MLIR diagnostics captured per thread, for several
// threads working on one MLIRContext at once (a Program's lowerings run
// concurrently): each thread's handler takes only what its own thread emits.
//
// Thread-safety: one handler per thread; `printing` serializes the printing
// through the shared SourceMgr (its line caches are not thread-safe).
#pragma once

#include "lowering/ir/IRText.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>
#include <string>
#include <thread>

namespace kiln::lowering {

/// Captures the diagnostics emitted on the thread that made it, printed with
/// their source lines; a diagnostic of another thread (lowerings of one
/// Program run concurrently) passes on to that thread's own handler.
/// `firstLocation`: the first error's location ("" if unknown).
class ThreadDiagnostics : public SourceMgrDiagnosticHandler {
public:
  ThreadDiagnostics(llvm::SourceMgr &mgr, std::mutex &printing, MLIRContext *ctx, llvm::raw_ostream &os,
                    std::string &firstLocation)
      : SourceMgrDiagnosticHandler(mgr, ctx, os) {
    setHandler([this, &printing, &firstLocation, thread = std::this_thread::get_id()](Diagnostic &d) {
      if (std::this_thread::get_id() != thread) return failure();
      if (d.getSeverity() == DiagnosticSeverity::Error && firstLocation.empty()) {
        firstLocation = locationString(d.getLocation());
        if (firstLocation == "<unknown location>") firstLocation.clear();
      }
      std::lock_guard<std::mutex> lock(printing);  // the SourceMgr's line caches are not thread-safe
      emitDiagnostic(d);
      return success();
    });
  }
};

}  // namespace kiln::lowering
