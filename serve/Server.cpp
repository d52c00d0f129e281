#include "serve/Server.h"

namespace kiln::serve {

Server::Server(const ServerOptions &options, std::function<void(const std::string &)> log) : log_(std::move(log)) {
  repository_ = std::make_unique<Repository>(options.repository, &batcher_, log_);
  if (options.prewarm) repository_->prewarm([this](const std::string &line) { log_("prewarm: " + line); });
  ServerState state{repository_.get(), [this] { return ready_.load() && repository_->allLoaded(); }};
  if (options.httpEnabled) http_ = std::make_unique<HttpServer>(options.http, state);
  if (options.grpcEnabled) grpc_ = std::make_unique<GrpcServer>(options.grpc, state);
  ready_ = true;
}

Server::~Server() { shutdown(); }

void Server::shutdown() {
  if (down_.exchange(true)) return;
  ready_ = false;
  if (http_) http_->stopAccepting();
  repository_->stopTaking();       // new requests get 503 / UNAVAILABLE
  if (grpc_) grpc_->shutdown(60);  // waits for the RPCs in flight (kiln finishes them)
  repository_->drain();            // every request accepted is answered
  if (http_) http_->stop();        // answers written, then the I/O threads end
}

}  // namespace kiln::serve
