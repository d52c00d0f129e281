// kiln serve: a model repository behind the Open Inference Protocol on HTTP
// (and /metrics) and gRPC. Start-up loads and prewarms every model before
// the server reports ready; shutdown stops accepting, answers what is in
// flight, and returns.
#pragma once

#include "serve/Grpc.h"
#include "serve/Http.h"
#include "serve/Repository.h"

#include <atomic>
#include <functional>
#include <memory>

namespace kiln::serve {

struct ServerOptions {
  RepositoryOptions repository;
  HttpOptions http;
  GrpcOptions grpc;
  bool httpEnabled = true, grpcEnabled = true;
  bool prewarm = true;
};

class Server {
public:
  /// Loads the repository, prewarms, binds; throws kiln::Error when a port
  /// cannot be bound or the repository cannot be read.
  Server(const ServerOptions &options, std::function<void(const std::string &)> log);
  ~Server();
  int httpPort() const { return http_ ? http_->port() : -1; }
  int grpcPort() const { return grpc_ ? grpc_->port() : -1; }
  int metricsPort() const { return http_ ? http_->metricsPort() : -1; }
  bool ready() const { return ready_.load(); }
  Repository &repository() { return *repository_; }
  /// Not ready any more; stops accepting; answers every request in flight;
  /// closes. Idempotent.
  void shutdown();

private:
  std::function<void(const std::string &)> log_;
  Batcher batcher_;
  std::unique_ptr<Repository> repository_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;
  std::atomic<bool> ready_{false}, down_{false};
};

}  // namespace kiln::serve
