// kiln-serve: the server program (`kiln serve ...` runs it). It links only
// libkiln.so, through the public API.
#include "serve/Server.h"

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <pthread.h>

using namespace kiln::serve;

namespace {
bool parseOnOff(const std::string &v, const char *flag) {
  if (v == "on" || v == "true" || v == "1") return true;
  if (v == "off" || v == "false" || v == "0") return false;
  throw CLI::ValidationError(std::string(flag), "expected on or off, got '" + v + "'");
}

size_t parseBytes(const std::string &v) {
  size_t pos = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(v, &pos);
  } catch (const std::exception &) {
    throw CLI::ValidationError("--max-request-bytes", "'" + v + "' is not a size (e.g. 64M)");
  }
  std::string unit = v.substr(pos);
  if (unit == "K" || unit == "k") n <<= 10;
  else if (unit == "M" || unit == "m") n <<= 20;
  else if (unit == "G" || unit == "g") n <<= 30;
  else if (!unit.empty()) throw CLI::ValidationError("--max-request-bytes", "unknown unit in '" + v + "' (K, M, G)");
  return size_t(n);
}
}  // namespace

int main(int argc, char **argv) {
  CLI::App app("kiln serve: models of a repository behind the Open Inference Protocol (KServe v2) on HTTP and gRPC",
               "kiln serve");
  ServerOptions options;
  std::string prewarm = "on", maxBytes = "256M";
  std::vector<std::string> runtimeOptions;
  bool prewarmOnly = false;
  int threads = 0;
  std::string cacheDir, compilePolicy;
  app.add_option("--model-repository", options.repository.dir,
                 "DIR/<model>/<version>/model.mlir|model.mlirbc (+ DIR/<model>/config.pbtxt), as Triton's")
      ->required();
  app.add_option("--host", options.http.host, "address to listen on (default loopback)")->capture_default_str();
  app.add_option("--http-port", options.http.port, "HTTP/REST port (0: any free; -1: no HTTP)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--grpc-port", options.grpc.port, "gRPC port (0: any free; -1: no gRPC)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--metrics-port", options.http.metricsPort, "Prometheus /metrics port (0: any free; -1: none)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--http-threads", options.http.threads, "threads carrying HTTP connections")->capture_default_str();
  app.add_option("--max-request-bytes", maxBytes, "largest request body (HTTP) or message (gRPC), e.g. 64M")
      ->capture_default_str();
  app.add_option("--max-queue-size", options.repository.maxQueueSize,
                 "requests per model version waiting or running, beyond which 503 / UNAVAILABLE "
                 "(a model's dynamic_batching.default_queue_policy.max_queue_size overrides)")
      ->capture_default_str();
  app.add_option("--prewarm", prewarm, "compile (or load from the cache) every model before reporting ready: on|off")
      ->capture_default_str();
  app.add_flag("--prewarm-only", prewarmOnly, "fill the persistent compile cache for the repository and exit");
  app.add_option("--threads", threads, "kiln worker threads (0: the machine's cores)");
  app.add_option("--cache-dir", cacheDir, "persistent compile cache directory");
  app.add_option("--compile-policy", compilePolicy, "wait | tiered | kernels-only (default tiered)");
  app.add_option("--option", runtimeOptions, "a kiln runtime option NAME=VALUE (kiln_c.h), repeatable");
  try {
    app.parse(argc, argv);
    options.prewarm = parseOnOff(prewarm, "--prewarm");
    options.http.maxRequestBytes = options.grpc.maxRequestBytes = parseBytes(maxBytes);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  options.grpc.host = options.http.host;
  options.httpEnabled = options.http.port >= 0;
  options.grpcEnabled = options.grpc.port >= 0;
  if (!options.httpEnabled) options.http.metricsPort = -1;
  auto &ro = options.repository.runtimeOptions;
  ro.emplace_back("compile_policy", compilePolicy.empty() ? "tiered" : compilePolicy);
  // Merged batches of a separable model run as calls of batch 1 (range code).
  // A merged size's own code is not compiled behind them: every size a
  // dynamic batcher forms would compile and be measured against the calls of
  // batch 1, taking the cores the requests need, and today batched code loses
  // to them (docs/benchmarks.md#serving-benchserve). --option hot_batch_calls=N turns it on.
  ro.emplace_back("hot_batch_calls", "0");
  if (threads) ro.emplace_back("threads", std::to_string(threads));
  if (!cacheDir.empty()) ro.emplace_back("cache_dir", cacheDir);
  for (const std::string &o : runtimeOptions) {
    size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "kiln serve: --option '" << o << "' is not NAME=VALUE\n";
      return 2;
    }
    ro.emplace_back(o.substr(0, eq), o.substr(eq + 1));
  }
  auto log = [](const std::string &line) { std::cerr << "kiln serve: " << line << std::endl; };

  if (prewarmOnly) {
    try {
      Batcher batcher;
      Repository repository(options.repository, &batcher, log);
      return repository.prewarm([](const std::string &line) { std::cout << line << "\n"; }) ? 1 : 0;
    } catch (const kiln::Error &e) {
      std::cerr << "kiln prewarm: " << e.what() << "\n";
      return 1;
    }
  }

  // SIGTERM and SIGINT are taken by this thread only (sigwait below): every
  // thread the server starts inherits the mask.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  try {
    Server server(options, log);
    std::string where;
    if (server.httpPort() >= 0) where += " HTTP " + options.http.host + ":" + std::to_string(server.httpPort());
    if (server.grpcPort() >= 0) where += " gRPC " + options.http.host + ":" + std::to_string(server.grpcPort());
    if (server.metricsPort() >= 0)
      where += " metrics " + options.http.host + ":" + std::to_string(server.metricsPort());
    log(std::string(server.repository().allLoaded() ? "ready:" : "serving (some models failed to load):") + where);
    int sig = 0;
    sigwait(&stop, &sig);
    log(std::string("stopping (") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") + "): draining requests in flight");
    server.shutdown();
    log("stopped");
    return 0;
  } catch (const kiln::Error &e) {
    std::cerr << "kiln serve: " << e.what() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "kiln serve: " << e.what() << "\n";
    return 1;
  }
}
