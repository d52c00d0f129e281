// kiln-loadgen: a closed-loop load generator for Open Inference Protocol
// servers over gRPC (kiln serve, Triton, KServe's Python server), in the
// manner of perf_analyzer's concurrency mode (PyPI's perf-analyzer is a
// placeholder package): N client threads, each sending its next request when
// the last is answered, for a fixed time after a warm-up. With --in-process
// MODEL.mlir the same loop calls the model through kiln's C++ API instead,
// for the server's overhead beside the in-process call.
//
//   kiln-loadgen --url 127.0.0.1:8001 --model resnet50 --concurrency 4 --batch 1 --seconds 10
//   kiln-loadgen --in-process model.mlir --concurrency 1 --batch 1 --seconds 10
//
// Prints one line: requests, throughput (items/s), latency p50/p90/p99/max (ms), errors by code.
#include "serve/proto/grpc_service.grpc.pb.h"

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

using Clock = std::chrono::steady_clock;

namespace {

struct Results {
  std::mutex mu;
  std::vector<double> latencyMs;
  std::map<std::string, int> errors;
  void add(double ms, const std::string &error) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty())
      latencyMs.push_back(ms);
    else
      errors[error]++;
  }
};

size_t bytesOf(const std::string &datatype) {
  if (datatype == "FP64" || datatype == "INT64") return 8;
  if (datatype == "FP32" || datatype == "INT32") return 4;
  if (datatype == "FP16" || datatype == "BF16" || datatype == "INT16") return 2;
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app("kiln-loadgen: closed-loop load on an Open Inference Protocol server (gRPC) or in process");
  std::string url = "127.0.0.1:8001", model, inProcess, label;
  int concurrency = 1, batch = 1;
  double seconds = 10, warmup = 2;
  app.add_option("--url", url, "gRPC address of the server");
  app.add_option("--model", model, "model name (server)");
  app.add_option("--in-process", inProcess, "MLIR file: call it through kiln's API instead of a server");
  app.add_option("--concurrency", concurrency, "client threads, each with one request outstanding");
  app.add_option("--batch", batch, "batch size of each request (for dims -1)");
  app.add_option("--seconds", seconds, "measured time");
  app.add_option("--warmup", warmup, "time before measuring");
  app.add_option("--label", label, "name printed on the result line");
  bool ping = false;
  app.add_flag("--ping", ping, "call ServerLive instead of ModelInfer: gRPC's own round trip, the floor under any model");
  std::vector<std::string> given, options;
  app.add_option("--option", options, "in process: a kiln runtime option NAME=VALUE (e.g. cache_dir=DIR, as the server's)");
  app.add_option("--input", given, "NAME:DATATYPE:DIMS (e.g. x:FP32:-1x3x224x224) instead of asking the server's metadata");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> names, datatypes;
  std::vector<std::vector<int64_t>> shapes;
  std::unique_ptr<kiln::Runtime> runtime;
  std::unique_ptr<kiln::Module> module;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
  if (!inProcess.empty()) {
    kiln::Options o;
    for (const std::string &kv : options) {
      size_t eq = kv.find('=');
      o.set(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
    }
    runtime = std::make_unique<kiln::Runtime>(o);
    module = std::make_unique<kiln::Module>(runtime->load(inProcess));
    for (const kiln::TensorInfo &i : module->inputs("")) {
      names.push_back(i.name);
      datatypes.push_back(kiln::DType(i.dtype) == kiln::DType::f32 ? "FP32" : std::string(kiln::name(i.dtype)));
      shapes.push_back(i.shape);
    }
  } else if (ping) {
    stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(url, grpc::InsecureChannelCredentials()));
  } else if (!given.empty()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(INT32_MAX);
    stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(url, grpc::InsecureChannelCredentials(), args));
    for (const std::string &g : given) {
      size_t a = g.find(':'), b = g.find(':', a + 1);
      if (a == std::string::npos || b == std::string::npos) {
        std::fprintf(stderr, "kiln-loadgen: --input '%s' is not NAME:DATATYPE:DIMS\n", g.c_str());
        return 2;
      }
      names.push_back(g.substr(0, a));
      datatypes.push_back(g.substr(a + 1, b - a - 1));
      std::vector<int64_t> shape;
      std::string dims = g.substr(b + 1);
      for (size_t at = 0; at <= dims.size();) {
        size_t x = dims.find('x', at);
        if (x == std::string::npos) x = dims.size();
        shape.push_back(std::stoll(dims.substr(at, x - at)));
        at = x + 1;
      }
      shapes.push_back(shape);
    }
  } else {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(INT32_MAX);
    stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(url, grpc::InsecureChannelCredentials(), args));
    inference::ModelMetadataRequest req;
    req.set_name(model);
    inference::ModelMetadataResponse meta;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Status s = stub->ModelMetadata(&ctx, req, &meta);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln-loadgen: metadata of '%s' from %s: %s\n", model.c_str(), url.c_str(),
                   s.error_message().c_str());
      return 1;
    }
    for (const auto &t : meta.inputs()) {
      names.push_back(t.name());
      datatypes.push_back(t.datatype());
      shapes.emplace_back(t.shape().begin(), t.shape().end());
    }
  }
  for (auto &shape : shapes)
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] < 0) shape[d] = d == 0 ? batch : 1;
  std::mt19937 rng(7);
  std::vector<std::string> data;
  for (size_t i = 0; i < names.size(); ++i) {
    size_t n = 1;
    for (int64_t d : shapes[i]) n *= size_t(d);
    std::string bytes(n * bytesOf(datatypes[i]), '\0');
    if (datatypes[i] == "FP32") {
      std::normal_distribution<float> dist;
      for (size_t k = 0; k < n; ++k) {
        float v = dist(rng);
        std::memcpy(bytes.data() + 4 * k, &v, 4);
      }
    }
    data.push_back(std::move(bytes));
  }
  inference::ModelInferRequest request;
  request.set_model_name(model);
  for (size_t i = 0; i < names.size(); ++i) {
    auto *in = request.add_inputs();
    in->set_name(names[i]);
    in->set_datatype(datatypes[i]);
    for (int64_t d : shapes[i]) in->add_shape(d);
    request.add_raw_input_contents(data[i]);
  }

  Results results;
  std::atomic<bool> measuring{false}, stop{false};
  auto worker = [&] {
    std::vector<kiln::Tensor> tensors;
    if (module)
      for (size_t i = 0; i < names.size(); ++i)
        tensors.push_back(kiln::Tensor::wrapBytes(kiln::DType::f32, data[i].data(), shapes[i], data[i].size()));
    while (!stop.load()) {
      Clock::time_point t0 = Clock::now();
      std::string error;
      if (module) {
        try {
          module->callAsync("", tensors).wait();  // the path kiln serve takes
        } catch (const kiln::Error &e) {
          error = e.codeName();
        }
      } else if (ping) {
        grpc::ClientContext ctx;
        inference::ServerLiveResponse res;
        grpc::Status s = stub->ServerLive(&ctx, {}, &res);
        if (!s.ok()) error = "grpc " + std::to_string(int(s.error_code()));
      } else {
        grpc::ClientContext ctx;
        inference::ModelInferResponse res;
        grpc::Status s = stub->ModelInfer(&ctx, request, &res);
        if (!s.ok()) error = "grpc " + std::to_string(int(s.error_code()));
      }
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (measuring.load()) results.add(ms, error);
    }
  };
  if (module) {  // compiled (or loaded from the cache) before the clock starts, as a server's prewarm
    std::vector<kiln::Tensor> tensors;
    for (size_t i = 0; i < names.size(); ++i)
      tensors.push_back(kiln::Tensor::wrapBytes(kiln::DType::f32, data[i].data(), shapes[i], data[i].size()));
    module->call("", tensors);
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) threads.emplace_back(worker);
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  measuring = true;
  Clock::time_point start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  measuring = false;
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  for (std::thread &t : threads) t.join();

  std::vector<double> &l = results.latencyMs;
  std::sort(l.begin(), l.end());
  auto pct = [&](double p) { return l.empty() ? 0.0 : l[std::min(l.size() - 1, size_t(p * double(l.size())))]; };
  std::string errors;
  for (const auto &[code, n] : results.errors) errors += (errors.empty() ? "" : ",") + code + "x" + std::to_string(n);
  std::printf("%-28s concurrency %2d batch %2d: %6zu ok, %8.1f items/s, p50 %8.3f ms, p90 %8.3f, p99 %8.3f, max %8.3f%s%s\n",
              (label.empty() ? (module ? "in-process" : url + "/" + model) : label).c_str(), concurrency, batch,
              l.size(), double(l.size()) * batch / elapsed, pct(0.5), pct(0.9), pct(0.99), l.empty() ? 0 : l.back(),
              errors.empty() ? "" : ", errors ", errors.c_str());
  return 0;
}
