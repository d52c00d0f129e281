// The protocol over HTTP/REST (KServe v2, with Triton's binary tensor data
// extension), served by Boost.Beast on Asio: a few I/O threads carry every
// connection (no thread per connection or per request); an infer request is
// handed to its model and answered from the kiln thread that finishes it.
#pragma once

#include "serve/Repository.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kiln::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;             // 0: any free port
  int metricsPort = 8002;      // -1: none; 0: any free port
  int threads = 2;             // I/O threads
  size_t maxRequestBytes = size_t(256) << 20;
};

/// What the server answers on its routes.
struct ServerState {
  Repository *repository = nullptr;
  std::function<bool()> ready;  // server ready (every model loaded and prewarmed, not stopping)
};

class HttpServer {
public:
  /// Binds and starts serving; throws kiln::Error naming the address when it cannot.
  HttpServer(const HttpOptions &options, ServerState state);
  ~HttpServer();
  int port() const;         // the bound port
  int metricsPort() const;  // -1 when none
  /// Stops accepting connections (open connections finish their request).
  void stopAccepting();
  /// Closes everything and joins the I/O threads.
  void stop();

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

/// The answer to one HTTP request, apart from the socket (tests call it).
struct HttpAnswer {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
  size_t jsonHeaderLength = 0;  // > 0: Inference-Header-Content-Length (binary data follows)
};

struct HttpRequest {
  std::string method, target;
  std::string inferenceHeaderLength;  // Inference-Header-Content-Length, or empty
  std::string contentEncoding;        // Content-Encoding, or empty
  std::shared_ptr<std::string> body = std::make_shared<std::string>();
};

/// Routes a request; `reply` is called once, possibly later from a kiln thread.
void handleHttp(const ServerState &state, HttpRequest request, std::function<void(HttpAnswer)> reply);

}  // namespace kiln::serve
