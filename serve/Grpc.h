// The protocol over gRPC (inference.GRPCInferenceService, serve/proto/),
// on gRPC's callback API: a handler returns at once and the kiln thread that
// finishes the call completes the RPC; no thread waits per request. The
// client's deadline reaches kiln's cancellation; a cancelled RPC is dropped
// before it runs.
#pragma once

#include "serve/Http.h"

#include <memory>
#include <string>

namespace kiln::serve {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  int port = 8001;  // 0: any free port
  size_t maxRequestBytes = size_t(256) << 20;
};

class GrpcServer {
public:
  /// Binds and starts; throws kiln::Error naming the address when it cannot.
  GrpcServer(const GrpcOptions &options, ServerState state);
  ~GrpcServer();
  int port() const;
  /// Stops taking RPCs and waits for those in flight (up to `seconds`).
  void shutdown(double seconds);

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serve
