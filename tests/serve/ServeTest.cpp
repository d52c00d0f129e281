// kiln serve end to end: a repository in a temporary directory served on
// loopback ports chosen by the system, driven by a gRPC client (the
// protocol's generated stub) and an HTTP client (Boost.Beast): every
// endpoint, the error cases, versions side by side, dynamic batching,
// deadlines, overload, a fuzz of request bodies on both transports, and the
// kiln-serve program draining on SIGTERM.
#include "serve/Server.h"
#include "serve/proto/grpc_service.grpc.pb.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using json = nlohmann::json;
using namespace kiln::serve;

namespace {

const char *kAddSub1 = R"(
func.func @main(%x: tensor<2x3xf32> {kiln.name = "x"}, %y: tensor<2x3xf32> {kiln.name = "y"}) -> (tensor<2x3xf32> {kiln.name = "sum"}, tensor<2x3xf32> {kiln.name = "difference"}) {
  %a = tosa.add %x, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = tosa.sub %x, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %a, %s : tensor<2x3xf32>, tensor<2x3xf32>
})";
// Version 2 answers x + 2y as its first output.
const char *kAddSub2 = R"(
func.func @main(%x: tensor<2x3xf32> {kiln.name = "x"}, %y: tensor<2x3xf32> {kiln.name = "y"}) -> (tensor<2x3xf32> {kiln.name = "sum"}, tensor<2x3xf32> {kiln.name = "difference"}) {
  %a = tosa.add %x, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = tosa.add %a, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = tosa.sub %x, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %b, %s : tensor<2x3xf32>, tensor<2x3xf32>
})";
// y = clamp(x + [1 2 3 4], 0, 100), any batch.
const char *kBatched = R"(
func.func @main(%x: tensor<?x4xf32> {kiln.name = "x"}) -> tensor<?x4xf32> {
  %w = "tosa.const"() <{values = dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>}> : () -> tensor<1x4xf32>
  %a = tosa.add %x, %w : (tensor<?x4xf32>, tensor<1x4xf32>) -> tensor<?x4xf32>
  %c = tosa.clamp %a {min_val = 0.0 : f32, max_val = 100.0 : f32} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %c : tensor<?x4xf32>
})";

void write(const fs::path &p, const std::string &text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

fs::path makeRepository() {
  fs::path dir = fs::temp_directory_path() / ("kiln-serve-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  write(dir / "addsub/1/model.mlir", kAddSub1);
  write(dir / "addsub/2/model.mlir", kAddSub2);
  write(dir / "addsub/config.pbtxt", "version_policy: { all { } }\ninstance_group [ { kind: KIND_CPU count: 1 } ]\n"
                                     "optimization { graph { level: 1 } }\n");
  write(dir / "batched/1/model.mlir", kBatched);
  write(dir / "batched/config.pbtxt", R"(name: "batched"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "output_0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 })");
  // Holds requests 1 s (never fills a batch of 8) and takes 2 at a time.
  write(dir / "slow/1/model.mlir", kBatched);
  write(dir / "slow/config.pbtxt", R"(max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 1000000 default_queue_policy { max_queue_size: 2 } })");
  write(dir / "plain/3/model.mlir", kBatched);  // no configuration: names and shapes from the model
  // A tensor named by digits stays a name (a string) in the configuration's JSON.
  write(dir / "digits/1/model.mlir", R"(
func.func @main(%x: tensor<?x4xf32> {kiln.name = "7"}) -> (tensor<?x4xf32> {kiln.name = "42"}) {
  %y = tosa.add %x, %x : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
})");
  return dir;
}

struct HttpReply {
  int status = 0;
  std::string body, inferenceHeaderLength, contentType;
  json js() const { return json::parse(body.substr(0, inferenceHeaderLength.empty() ? body.size() : std::stoul(inferenceHeaderLength)), nullptr, false); }
};

HttpReply httpCall(int port, http::verb verb, const std::string &target, const std::string &body = "",
                   size_t jsonLength = 0) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), uint16_t(port)});
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  if (jsonLength) req.set("Inference-Header-Content-Length", std::to_string(jsonLength));
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  http::write(socket, req, ec);  // (a server refusing a large body may close before reading it all)
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 30);
  http::read(socket, buffer, parser, ec);
  HttpReply r;
  if (ec) return r;
  auto &res = parser.get();
  r.status = res.result_int();
  r.body = res.body();
  if (auto it = res.find("Inference-Header-Content-Length"); it != res.end()) r.inferenceHeaderLength = std::string(it->value());
  if (auto it = res.find(http::field::content_type); it != res.end()) r.contentType = std::string(it->value());
  return r;
}

json inferBody(const std::vector<float> &x, int64_t rows) {
  return {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {rows, 4}}, {"data", x}}}}};
}

class ServeTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    repo = makeRepository();
    ServerOptions o;
    o.repository.dir = repo.string();
    o.repository.runtimeOptions = {{"compile_policy", "tiered"}, {"cache", "off"}};
    o.http.port = 0;
    o.http.metricsPort = 0;
    o.http.maxRequestBytes = 1 << 20;
    o.grpc.port = 0;
    o.grpc.maxRequestBytes = 1 << 20;
    server = new Server(o, [](const std::string &line) { std::fprintf(stderr, "kiln serve: %s\n", line.c_str()); });
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server->grpcPort()), grpc::InsecureChannelCredentials());
    stub = inference::GRPCInferenceService::NewStub(channel).release();
  }
  static void TearDownTestSuite() {
    delete stub;
    channel.reset();
    delete server;
    fs::remove_all(repo);
  }
  static int port() { return server->httpPort(); }
  static inline fs::path repo;
  static inline Server *server = nullptr;
  static inline std::shared_ptr<grpc::Channel> channel;
  static inline inference::GRPCInferenceService::Stub *stub = nullptr;
};

TEST_F(ServeTest, HttpHealthAndMetadata) {
  EXPECT_EQ(httpCall(port(), http::verb::get, "/v2/health/live").status, 200);
  EXPECT_EQ(httpCall(port(), http::verb::get, "/v2/health/ready").status, 200);
  HttpReply meta = httpCall(port(), http::verb::get, "/v2");
  EXPECT_EQ(meta.status, 200);
  EXPECT_EQ(meta.js()["name"], "kiln");
  EXPECT_EQ(meta.js()["extensions"], json({"binary_tensor_data", "model_configuration"}));
  HttpReply m = httpCall(port(), http::verb::get, "/v2/models/batched");
  ASSERT_EQ(m.status, 200) << m.body;
  json j = m.js();
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["datatype"], "FP32");
  EXPECT_EQ(j["inputs"][0]["shape"], json({-1, 4}));
  EXPECT_EQ(j["outputs"][0]["shape"], json({-1, 4}));
  EXPECT_EQ(httpCall(port(), http::verb::get, "/v2/models/batched/ready").status, 200);
  EXPECT_EQ(httpCall(port(), http::verb::get, "/v2/models/batched/versions/1/ready").status, 200);
  HttpReply addsub = httpCall(port(), http::verb::get, "/v2/models/addsub");
  EXPECT_EQ(addsub.js()["versions"], json({"1", "2"})) << addsub.body;
  EXPECT_EQ(addsub.js()["outputs"][0]["name"], "sum");
  HttpReply config = httpCall(port(), http::verb::get, "/v2/models/batched/config");
  EXPECT_EQ(config.js()["max_batch_size"], 8);
  EXPECT_EQ(config.js()["input"][0]["dims"], json({4}));
  EXPECT_EQ(config.js()["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(config.js()["dynamic_batching"]["max_queue_delay_microseconds"], 20000);
  HttpReply digits = httpCall(port(), http::verb::get, "/v2/models/digits/config");
  EXPECT_EQ(digits.js()["input"][0]["name"], "7") << digits.body;
  EXPECT_EQ(digits.js()["output"][0]["name"], "42") << digits.body;
  EXPECT_EQ(digits.js()["input"][0]["dims"], json({-1, 4})) << digits.body;
  HttpReply plain = httpCall(port(), http::verb::get, "/v2/models/plain");
  EXPECT_EQ(plain.js()["versions"], json({"3"}));
}

TEST_F(ServeTest, HttpInferJsonAndVersions) {
  json body = {{"id", "req-7"},
               {"inputs",
                {{{"name", "y"}, {"datatype", "FP32"}, {"shape", {2, 3}}, {"data", {{1, 1, 1}, {2, 2, 2}}}},
                 {{"name", "x"}, {"datatype", "FP32"}, {"shape", {2, 3}}, {"data", {1, 2, 3, 4, 5, 6}}}}}};
  HttpReply latest = httpCall(port(), http::verb::post, "/v2/models/addsub/infer", body.dump());
  ASSERT_EQ(latest.status, 200) << latest.body;
  json j = latest.js();
  EXPECT_EQ(j["id"], "req-7");
  EXPECT_EQ(j["model_version"], "2");
  EXPECT_EQ(j["outputs"][0]["data"], json({3, 4, 5, 8, 9, 10}));  // x + 2y
  EXPECT_EQ(j["outputs"][1]["data"], json({0, 1, 2, 2, 3, 4}));
  HttpReply v1 = httpCall(port(), http::verb::post, "/v2/models/addsub/versions/1/infer", body.dump());
  ASSERT_EQ(v1.status, 200) << v1.body;
  EXPECT_EQ(v1.js()["outputs"][0]["data"], json({2, 3, 4, 6, 7, 8}));  // x + y
  EXPECT_EQ(v1.js()["outputs"][0]["name"], "sum");
  // One output asked for.
  body["outputs"] = {{{"name", "difference"}}};
  HttpReply one = httpCall(port(), http::verb::post, "/v2/models/addsub/versions/1/infer", body.dump());
  ASSERT_EQ(one.js()["outputs"].size(), 1u);
  EXPECT_EQ(one.js()["outputs"][0]["name"], "difference");
}

TEST_F(ServeTest, HttpInferBinaryTensorData) {
  std::vector<float> x = {1, -2, 3, 200, 0, 0, 0, 0};
  json header = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {2, 4}},
                              {"parameters", {{"binary_data_size", x.size() * 4}}}}}},
                 {"outputs", {{{"name", "output_0"}, {"parameters", {{"binary_data", true}}}}}}};
  std::string h = header.dump();
  std::string body = h + std::string(reinterpret_cast<const char *>(x.data()), x.size() * 4);
  HttpReply r = httpCall(port(), http::verb::post, "/v2/models/plain/infer", body, h.size());
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_FALSE(r.inferenceHeaderLength.empty());
  size_t n = std::stoul(r.inferenceHeaderLength);
  json j = json::parse(r.body.substr(0, n));
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 32);
  ASSERT_EQ(r.body.size(), n + 32);
  std::vector<float> y(8);
  std::memcpy(y.data(), r.body.data() + n, 32);
  EXPECT_EQ(y, (std::vector<float>{2, 0, 6, 100, 1, 2, 3, 4}));
}

TEST_F(ServeTest, HttpErrorsNameWhatWasWrong) {
  auto post = [&](const std::string &target, const std::string &body, size_t jsonLength = 0) {
    return httpCall(port(), http::verb::post, target, body, jsonLength);
  };
  auto expect = [](const HttpReply &r, int status, const std::string &needle) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_NE(r.body.find(needle), std::string::npos) << r.body;
  };
  expect(post("/v2/models/plain/infer", "{\"inputs\": [ {\"name\": "), 400, "malformed JSON");
  expect(post("/v2/models/plain/infer", inferBody({1, 2, 3, 4}, 1).dump().replace(0, 0, "")), 200, "");
  json wrongType = {{"inputs", {{{"name", "x"}, {"datatype", "INT32"}, {"shape", {1, 4}}, {"data", {1, 2, 3, 4}}}}}};
  expect(post("/v2/models/plain/infer", wrongType.dump()), 400, "datatype INT32, the model takes FP32");
  expect(post("/v2/models/plain/infer", inferBody({1, 2, 3, 4}, 2).dump()), 400, "has 4 values");
  json wrongShape = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 3}}, {"data", {1, 2, 3}}}}}};
  expect(post("/v2/models/plain/infer", wrongShape.dump()), 400, "shape [1,3], the model takes [-1,4]");
  json wrongName = inferBody({1, 2, 3, 4}, 1);
  wrongName["inputs"][0]["name"] = "nope";
  expect(post("/v2/models/plain/infer", wrongName.dump()), 400, "unknown input 'nope'");
  json bytes = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 4}}, {"parameters", {{"binary_data_size", 16}}}}}}};
  std::string h = bytes.dump();
  expect(post("/v2/models/plain/infer", h + std::string(12, '\0'), h.size()), 400, "binary_data_size 16");
  expect(post("/v2/models/plain/infer", h + std::string(20, '\0'), h.size()), 400, "add up to 16");
  expect(post("/v2/models/plain/infer", h, h.size() + 5), 400, "larger than the body");
  json hostile = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {int64_t(1) << 40, int64_t(1) << 40}}, {"data", {1}}}}}};
  expect(post("/v2/models/plain/infer", hostile.dump()), 400, "invalid shape");
  // 2^61 FP64 elements are 2^64 bytes, which wraps to 0: refused, not taken for an empty tensor.
  json wraps = {{"inputs", {{{"name", "x"}, {"datatype", "FP64"}, {"shape", {int64_t(1) << 61}}, {"parameters", {{"binary_data_size", 0}}}}}}};
  std::string w = wraps.dump();
  expect(post("/v2/models/plain/infer", w, w.size()), 400, "invalid shape");
  EXPECT_FALSE(elementCount({int64_t(1) << 61}).has_value());
  EXPECT_FALSE(elementCount({int64_t(1) << 30, int64_t(1) << 30}).has_value());
  EXPECT_EQ(elementCount({0, int64_t(1) << 40}), 0u);
  EXPECT_FALSE(elementCount({0, int64_t(1) << 62}).has_value());
  EXPECT_EQ(elementCount({3, 224, 224}), 3u * 224 * 224);
  json batch = inferBody(std::vector<float>(36, 1.f), 9);
  expect(post("/v2/models/batched/infer", batch.dump()), 400, "batch size 9 is outside 1..8");
  expect(post("/v2/models/nosuch/infer", "{}"), 404, "unknown model 'nosuch'");
  expect(post("/v2/models/addsub/versions/9/infer", "{}"), 404, "no version '9'");
  expect(post("/v2/models/../../etc/infer", "{}"), 404, "");
  expect(httpCall(port(), http::verb::get, "/v2/models/plain/infer"), 405, "use POST");
  expect(httpCall(port(), http::verb::get, "/v3/x"), 404, "no route");
  expect(post("/v2/models/plain/infer", std::string(2 << 20, ' ')), 413, "larger than");
  // ... and the next request is served.
  expect(post("/v2/models/plain/infer", inferBody({1, 2, 3, 4}, 1).dump()), 200, "output_0");
}

/// An infer request of input "x", FP32 [rows, 4], as raw bytes.
inference::ModelInferRequest inferRequest(const std::string &model, const std::vector<float> &x, int64_t rows) {
  inference::ModelInferRequest req;
  req.set_model_name(model);
  auto *in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(rows);
  in->add_shape(4);
  req.add_raw_input_contents(std::string(reinterpret_cast<const char *>(x.data()), x.size() * 4));
  return req;
}

grpc::Status grpcInfer(inference::GRPCInferenceService::Stub *stub, const std::string &model,
                       const std::vector<float> &x, int64_t rows, inference::ModelInferResponse *res,
                       int deadlineMs = 0, int64_t timeoutUs = 0) {
  inference::ModelInferRequest req = inferRequest(model, x, rows);
  if (timeoutUs) (*req.mutable_parameters())["timeout"].set_int64_param(timeoutUs);
  grpc::ClientContext ctx;
  if (deadlineMs) ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadlineMs));
  return stub->ModelInfer(&ctx, req, res);
}

std::vector<float> floats(const inference::ModelInferResponse &res, int i = 0) {
  const std::string &raw = res.raw_output_contents(i);
  std::vector<float> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), raw.size());
  return v;
}

TEST_F(ServeTest, GrpcEndpoints) {
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse res;
    ASSERT_TRUE(stub->ServerLive(&ctx, {}, &res).ok());
    EXPECT_TRUE(res.live());
  }
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse res;
    ASSERT_TRUE(stub->ServerReady(&ctx, {}, &res).ok());
    EXPECT_TRUE(res.ready());
  }
  {
    grpc::ClientContext ctx;
    inference::ServerMetadataResponse res;
    ASSERT_TRUE(stub->ServerMetadata(&ctx, {}, &res).ok());
    EXPECT_EQ(res.name(), "kiln");
    EXPECT_EQ(std::vector<std::string>(res.extensions().begin(), res.extensions().end()),
              (std::vector<std::string>{"binary_tensor_data", "model_configuration"}));
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest req;
    req.set_name("addsub");
    inference::ModelMetadataResponse res;
    ASSERT_TRUE(stub->ModelMetadata(&ctx, req, &res).ok());
    ASSERT_EQ(res.inputs_size(), 2);
    EXPECT_EQ(res.inputs(0).name(), "x");
    EXPECT_EQ(res.outputs(1).name(), "difference");
    EXPECT_EQ(res.versions_size(), 2);
  }
  {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest req;
    req.set_name("nosuch");
    inference::ModelReadyResponse res;
    EXPECT_EQ(stub->ModelReady(&ctx, req, &res).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    inference::ModelConfigRequest req;
    req.set_name("batched");
    inference::ModelConfigResponse res;
    ASSERT_TRUE(stub->ModelConfig(&ctx, req, &res).ok());
    EXPECT_EQ(res.config().max_batch_size(), 8);
    ASSERT_EQ(res.config().input_size(), 1);
    EXPECT_EQ(res.config().input(0).data_type(), inference::TYPE_FP32);
    EXPECT_EQ(res.config().input(0).dims_size(), 1);
    EXPECT_EQ(res.config().dynamic_batching().max_queue_delay_microseconds(), 20000u);
  }
  inference::ModelInferResponse res;
  grpc::Status s = grpcInfer(stub, "plain", {1, 2, 3, 4, -9, 0, 0, 0}, 2, &res);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(res.outputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(res.outputs(0).shape().begin(), res.outputs(0).shape().end()), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(floats(res), (std::vector<float>{2, 4, 6, 8, 0, 2, 3, 4}));
  // Typed contents instead of raw bytes.
  inference::ModelInferRequest req;
  req.set_model_name("plain");
  auto *in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(4);
  for (float v : {5.f, 5.f, 5.f, 5.f}) in->mutable_contents()->add_fp32_contents(v);
  grpc::ClientContext ctx;
  inference::ModelInferResponse typed;
  ASSERT_TRUE(stub->ModelInfer(&ctx, req, &typed).ok());
  EXPECT_EQ(floats(typed), (std::vector<float>{6, 7, 8, 9}));
}

TEST_F(ServeTest, GrpcErrors) {
  inference::ModelInferResponse res;
  EXPECT_EQ(grpcInfer(stub, "nosuch", {1, 2, 3, 4}, 1, &res).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status s = grpcInfer(stub, "plain", {1, 2, 3}, 1, &res);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("12 bytes of data for shape [1,4] of FP32 (16 expected)"), std::string::npos)
      << s.error_message();
  s = grpcInfer(stub, "plain", std::vector<float>(1 << 19, 0.f), 1 << 17, &res);  // 2 MiB > the 1 MiB limit
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  inference::ModelInferRequest req;
  req.set_model_name("plain");
  req.add_inputs()->set_name("x");
  req.mutable_inputs(0)->set_datatype("BYTES");
  grpc::ClientContext ctx;
  s = stub->ModelInfer(&ctx, req, &res);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("BYTES"), std::string::npos);
  EXPECT_TRUE(grpcInfer(stub, "plain", {1, 2, 3, 4}, 1, &res).ok());
}

TEST_F(ServeTest, DynamicBatchingMergesConcurrentRequestsAndSplitsTheAnswers) {
  auto metric = [&](const std::string &name) {
    std::string text = httpCall(server->metricsPort(), http::verb::get, "/metrics").body;
    std::string key = name + "{model=\"batched\",version=\"1\"} ";
    size_t at = text.find(key);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
  };
  double executionsBefore = metric("kiln_execution_count_total");
  constexpr int kRequests = 12;
  std::vector<std::future<std::pair<grpc::Status, std::vector<float>>>> answers;
  for (int i = 0; i < kRequests; ++i)
    answers.push_back(std::async(std::launch::async, [i] {
      inference::ModelInferResponse res;
      std::vector<float> x(size_t(4 * (1 + i % 2)), float(i));
      grpc::Status s = grpcInfer(stub, "batched", x, 1 + i % 2, &res);
      return std::make_pair(s, s.ok() ? floats(res) : std::vector<float>{});
    }));
  for (int i = 0; i < kRequests; ++i) {
    auto [s, y] = answers[size_t(i)].get();
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::vector<float> want;
    for (int r = 0; r < 1 + i % 2; ++r)
      for (float w : {1.f, 2.f, 3.f, 4.f}) want.push_back(float(i) + w);
    EXPECT_EQ(y, want) << "request " << i;
  }
  double executions = metric("kiln_execution_count_total") - executionsBefore;
  EXPECT_GT(executions, 0);
  EXPECT_LT(executions, kRequests) << "no two requests were merged";
  EXPECT_GE(metric("kiln_inference_count_total"), 18);
}

TEST_F(ServeTest, DeadlinesAndOverload) {
  // The slow model holds requests 1 s: a 50 ms timeout expires in its queue.
  HttpReply r = httpCall(port(), http::verb::post, "/v2/models/slow/infer",
                         json{{"parameters", {{"timeout", 50000}}},
                              {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 4}}, {"data", {1, 2, 3, 4}}}}}}
                             .dump());
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_NE(r.body.find("deadline"), std::string::npos) << r.body;
  inference::ModelInferResponse res;
  grpc::Status s = grpcInfer(stub, "slow", {1, 2, 3, 4}, 1, &res, 0, 50000);  // the timeout parameter
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  s = grpcInfer(stub, "slow", {1, 2, 3, 4}, 1, &res, 50);  // the client's deadline
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  // Overload: the queue takes 2; the others are refused at once.
  std::vector<std::future<HttpReply>> replies;
  std::string body = json{{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 4}}, {"data", {1, 2, 3, 4}}}}}}.dump();
  for (int i = 0; i < 6; ++i)
    replies.push_back(std::async(std::launch::async, [&] { return httpCall(port(), http::verb::post, "/v2/models/slow/infer", body); }));
  int ok = 0, unavailable = 0;
  for (auto &f : replies) {
    HttpReply rep = f.get();
    if (rep.status == 200) ++ok;
    if (rep.status == 503) {
      ++unavailable;
      EXPECT_NE(rep.body.find("queue full (2 requests"), std::string::npos) << rep.body;
    }
  }
  EXPECT_EQ(ok + unavailable, 6);
  EXPECT_GE(unavailable, 2);
  EXPECT_LE(ok, 4);
}

/// Clients that go away: mid-body, and after sending a request the server is
/// still holding (its answer has nowhere to go); the server keeps serving.
TEST_F(ServeTest, ClientsThatDisconnectMidRequest) {
  auto inFlight = [&] {
    std::string text = httpCall(server->metricsPort(), http::verb::get, "/metrics").body;
    std::string key = "kiln_requests_in_flight{model=\"slow\",version=\"1\"} ";
    size_t at = text.find(key);
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + key.size()));
  };
  // The server is the suite's: requests earlier tests left in the slow
  // model's queue (a deadline's, held until its delay passes) go first, so
  // that the queue (2) has room for this test's two.
  for (int i = 0; i < 200 && inFlight() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto send = [&](const std::string &bytes) {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"), uint16_t(port())});
    asio::write(socket, asio::buffer(bytes));
    socket.close();
  };
  std::string body = json{{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 4}}, {"data", {1, 2, 3, 4}}}}}}.dump();
  send("POST /v2/models/plain/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\": [");
  send("POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
       "\r\n\r\n" + body);
  send("GET /v2/health/rea");
  // gRPC: a call whose client cancels while the model holds it.
  {
    inference::ModelInferRequest req = inferRequest("slow", {0, 0, 0, 0}, 1);
    grpc::ClientContext ctx;
    inference::ModelInferResponse res;
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ctx.TryCancel();
    });
    grpc::Status s = stub->ModelInfer(&ctx, req, &res);
    cancel.join();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  }
  for (int i = 0; i < 200 && inFlight() != 0; ++i)  // the slow model's queue delay passes
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(inFlight(), 0);
  EXPECT_EQ(httpCall(port(), http::verb::post, "/v2/models/plain/infer", inferBody({1, 2, 3, 4}, 1).dump()).status, 200);
  inference::ModelInferResponse res;
  EXPECT_TRUE(grpcInfer(stub, "slow", {1, 2, 3, 4}, 1, &res).ok());
}

/// A fuzz of request bodies on both transports: mutated valid requests and
/// random bytes; every answer is an answer (no crash, no hang), and the server
/// serves a valid request afterwards.
TEST_F(ServeTest, FuzzedRequestBodiesNeverTakeTheServerDown) {
  google::protobuf::SetLogHandler(nullptr);  // (invalid UTF-8 in mutated strings is logged by protobuf)
  std::mt19937 rng(1234);
  std::vector<std::string> seeds = {
      inferBody({1, 2, 3, 4}, 1).dump(),
      json{{"id", "a"}, {"parameters", {{"binary_data_output", true}}},
           {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {2, 3}}, {"data", {1, 2, 3, 4, 5, 6}}},
                       {{"name", "y"}, {"datatype", "FP32"}, {"shape", {2, 3}}, {"data", {1, 2, 3, 4, 5, 6}}}}}}
          .dump(),
  };
  const char *tokens[] = {"-1", "1e309", "null", "[]", "{}", "\"FP16\"", "\"BOOL\"", "9223372036854775807", "true", "\"\\u0000\""};
  ServerState state{&server->repository(), [] { return true; }};
  for (int i = 0; i < 3000; ++i) {
    std::string body = seeds[size_t(i) % seeds.size()];
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      size_t at = rng() % body.size();
      switch (rng() % 4) {
      case 0: body[at] = char(rng() % 256); break;
      case 1: body.erase(at, 1 + rng() % 8); break;
      case 2: body.insert(at, tokens[rng() % 10]); break;
      case 3: body = body.substr(0, at); break;
      }
    }
    HttpRequest in;
    in.method = "POST";
    in.target = i % 2 ? "/v2/models/addsub/versions/1/infer" : "/v2/models/plain/infer";
    if (i % 7 == 0) in.inferenceHeaderLength = std::to_string(rng() % (body.size() + 2));
    *in.body = body;
    std::promise<HttpAnswer> answer;
    handleHttp(state, std::move(in), [&](HttpAnswer a) { answer.set_value(std::move(a)); });
    auto f = answer.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready) << body;
    int status = f.get().status;
    EXPECT_TRUE(status == 200 || status == 400 || status == 404) << status << " for " << body;
  }
  // gRPC: mutated serialized requests.
  std::string wire = inferRequest("plain", {0, 0, 0, 0}, 1).SerializeAsString();
  int parsed = 0;
  for (int i = 0; i < 600; ++i) {
    std::string bytes = wire;
    for (int e = 0; e < 1 + int(rng() % 3); ++e) bytes[rng() % bytes.size()] = char(rng() % 256);
    inference::ModelInferRequest req;
    if (!req.ParseFromString(bytes)) continue;
    ++parsed;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    inference::ModelInferResponse res;
    grpc::Status s = stub->ModelInfer(&ctx, req, &res);
    EXPECT_NE(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  EXPECT_GT(parsed, 100);
  inference::ModelInferResponse res;
  EXPECT_TRUE(grpcInfer(stub, "plain", {1, 2, 3, 4}, 1, &res).ok());
  EXPECT_EQ(httpCall(port(), http::verb::post, "/v2/models/plain/infer", inferBody({1, 2, 3, 4}, 1).dump()).status, 200);
}

TEST(ServeRepository, BadModelsAreReportedAndNamesChecked) {
  fs::path dir = fs::temp_directory_path() / ("kiln-serve-repo-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  write(dir / "good/1/model.mlir", kBatched);
  write(dir / "broken/1/model.mlir", "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> { garbage }");
  write(dir / "badconfig/1/model.mlir", kBatched);
  write(dir / "badconfig/config.pbtxt", "max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_INT64 dims: [ 4 ] } ]\n");
  write(dir / "noversion/model.mlir", kBatched);
  write(dir / "bad name/1/model.mlir", kBatched);
  // Which function serves: main, else the only one, else the config names
  // it (the library's rule, kiln_module_resolve_function).
  const char *twoFunctions =
      "func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
      "  %y = tosa.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n"
      "func.func @same(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x : tensor<4xf32>\n}\n";
  write(dir / "twofunctions/1/model.mlir", twoFunctions);
  write(dir / "chosen/1/model.mlir", twoFunctions);
  write(dir / "chosen/config.pbtxt", "parameters { key: \"function\" value: { string_value: \"same\" } }\n");
  write(dir / "misnamed/1/model.mlir", twoFunctions);
  write(dir / "misnamed/config.pbtxt", "parameters { key: \"function\" value: { string_value: \"thrice\" } }\n");
  write(dir / "onlyone/1/model.mlir",
        "func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x : tensor<4xf32>\n}\n");
  fs::path outside = fs::temp_directory_path() / ("kiln-serve-outside-" + std::to_string(::getpid()));
  write(outside / "1/model.mlir", kBatched);
  fs::create_directory_symlink(outside, dir / "escape");
  std::vector<std::string> log;
  Batcher batcher;
  RepositoryOptions o;
  o.dir = dir.string();
  o.runtimeOptions = {{"cache", "off"}};
  Repository repo(o, &batcher, [&](const std::string &l) { log.push_back(l); });
  std::string all;
  for (const std::string &l : log) all += l + "\n";
  ServeError err;
  EXPECT_NE(repo.find("good", "", &err), nullptr);
  EXPECT_EQ(repo.find("broken", "", &err), nullptr);
  EXPECT_EQ(err.kind, ErrorKind::unavailable);
  EXPECT_NE(err.message.find("model.mlir"), std::string::npos) << err.message;
  EXPECT_EQ(repo.find("badconfig", "", &err), nullptr);
  EXPECT_NE(err.message.find("input 'x' is configured as TYPE_INT64; the model's is FP32"), std::string::npos) << err.message;
  EXPECT_EQ(repo.find("noversion", "", &err), nullptr);
  EXPECT_NE(err.message.find("no version directory"), std::string::npos) << err.message;
  EXPECT_EQ(repo.find("twofunctions", "", &err), nullptr);
  EXPECT_NE(err.message.find("@twice, @same"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("\"function\""), std::string::npos) << err.message;
  EXPECT_NE(repo.find("chosen", "", &err), nullptr) << err.message;
  EXPECT_EQ(repo.find("misnamed", "", &err), nullptr);
  EXPECT_NE(err.message.find("@thrice"), std::string::npos) << err.message;
  EXPECT_NE(repo.find("onlyone", "", &err), nullptr) << err.message;
  EXPECT_NE(all.find("@forward"), std::string::npos) << all;
  EXPECT_EQ(repo.model("bad name"), nullptr);
  EXPECT_NE(all.find("not a valid model name"), std::string::npos) << all;
  EXPECT_EQ(repo.model("escape"), nullptr);
  EXPECT_NE(all.find("leads outside the repository"), std::string::npos) << all;
  EXPECT_FALSE(repo.allLoaded());
  EXPECT_TRUE(validModelName("resnet-50_v1.2"));
  EXPECT_FALSE(validModelName(".."));
  EXPECT_FALSE(validModelName("a/b"));
  fs::remove_all(dir);
  fs::remove_all(outside);
}

/// The program: ready line, a request in flight when SIGTERM comes is still
/// answered, new connections are refused, exit status 0.
TEST(ServeProgram, SigtermDrainsRequestsInFlightAndExitsZero) {
  fs::path dir = makeRepository();
  fs::path logFile = dir / "serve.log";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE *f = std::freopen(logFile.c_str(), "w", stderr);
    (void)f;
    ::execl(KILN_SERVE_BIN, KILN_SERVE_BIN, "--model-repository", dir.c_str(), "--http-port", "0", "--grpc-port", "0",
            "--metrics-port", "0", "--option", "cache=off", (char *)nullptr);
    std::_Exit(127);
  }
  int httpPort = 0, metricsPort = 0;
  for (int i = 0; i < 600 && !httpPort; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(logFile);
    std::string line;
    while (std::getline(in, line))
      if (size_t at = line.find("ready: HTTP 127.0.0.1:"); at != std::string::npos) {
        httpPort = std::stoi(line.substr(at + 22));
        if (size_t m = line.find("metrics 127.0.0.1:"); m != std::string::npos) metricsPort = std::stoi(line.substr(m + 18));
      }
  }
  ASSERT_GT(httpPort, 0) << "kiln-serve did not report ready";
  ASSERT_GT(metricsPort, 0);
  std::string body = json{{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 4}}, {"data", {1, 2, 3, 4}}}}}}.dump();
  auto inFlight = std::async(std::launch::async, [&] { return httpCall(httpPort, http::verb::post, "/v2/models/slow/infer", body); });
  // SIGTERM once the request is queued (the slow model holds it 1 s).
  for (int i = 0; i < 200; ++i) {
    std::string text = httpCall(metricsPort, http::verb::get, "/metrics").body;
    if (text.find("kiln_requests_in_flight{model=\"slow\",version=\"1\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGTERM);
  HttpReply r = inFlight.get();
  EXPECT_EQ(r.status, 200) << r.body;
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(logFile);
  std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("stopping (SIGTERM)"), std::string::npos) << log;
  EXPECT_NE(log.find("stopped"), std::string::npos) << log;
  fs::remove_all(dir);
}

}  // namespace
