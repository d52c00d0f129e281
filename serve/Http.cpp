#include "serve/Http.h"

#include "serve/Metrics.h"
#include "serve/proto/model_config.pb.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <google/protobuf/util/json_util.h>
#include <kiln/version.h>
#include <nlohmann/json.hpp>

#include <cstring>

namespace kiln::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

// ---- Tensors in JSON --------------------------------------------------------

namespace {

uint16_t toHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (exp == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0));
  int e = int(exp) - 127 + 15;
  if (e >= 31) return uint16_t(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return uint16_t(sign);
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - e);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(e) << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return uint16_t(sign | h);
}

float fromHalf(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (exp == 0) {
    if (mant == 0)
      x = sign;
    else {
      int e = -1;
      do ++e, mant <<= 1;
      while (!(mant & 0x400u));
      x = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31)
    x = sign | 0x7f800000u | (mant << 13);
  else
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t toBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

float fromBf16(uint16_t b) {
  uint32_t x = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void flatten(const json &v, std::vector<const json *> &out, int depth) {
  if (depth > 64) throw std::invalid_argument("data is nested more than 64 deep");
  if (v.is_array())
    for (const json &e : v) flatten(e, out, depth + 1);
  else
    out.push_back(&v);
}

/// JSON values -> little-endian bytes of `dtype`; throws std::invalid_argument.
void encode(const json &data, kiln::DType dtype, uint64_t count, const std::string &name, std::string &bytes) {
  std::vector<const json *> values;
  flatten(data, values, 0);
  if (values.size() != count)
    throw std::invalid_argument("input '" + name + "' has " + std::to_string(values.size()) +
                                " values in 'data'; its shape holds " + std::to_string(count));
  size_t size = kiln::byteSize(dtype);
  bytes.resize(count * size);
  uint8_t *out = reinterpret_cast<uint8_t *>(bytes.data());
  for (size_t i = 0; i < values.size(); ++i, out += size) {
    const json &v = *values[i];
    if (dtype == kiln::DType::boolean) {
      if (!v.is_boolean()) throw std::invalid_argument("input '" + name + "': BOOL data holds a non-boolean value");
      *out = v.get<bool>() ? 1 : 0;
      continue;
    }
    if (!v.is_number()) throw std::invalid_argument("input '" + name + "': 'data' holds a value that is not a number");
    bool integral = dtype != kiln::DType::f32 && dtype != kiln::DType::f64 && dtype != kiln::DType::f16 &&
                    dtype != kiln::DType::bf16;
    if (integral && !v.is_number_integer())
      throw std::invalid_argument("input '" + name + "': " + protocolName(dtype) + " data holds a non-integer value");
    auto put = [&](auto x) { std::memcpy(out, &x, sizeof x); };
    auto ranged = [&](int64_t lo, int64_t hi) {
      if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(hi) : (v.get<int64_t>() < lo || v.get<int64_t>() > hi))
        throw std::invalid_argument("input '" + name + "': value " + v.dump() + " is out of range for " +
                                    protocolName(dtype));
      return v.get<int64_t>();
    };
    switch (dtype) {
    case kiln::DType::f32: put(v.get<float>()); break;
    case kiln::DType::f64: put(v.get<double>()); break;
    case kiln::DType::f16: put(toHalf(v.get<float>())); break;
    case kiln::DType::bf16: put(toBf16(v.get<float>())); break;
    case kiln::DType::i64: put(int64_t(ranged(INT64_MIN, INT64_MAX))); break;
    case kiln::DType::i32: put(int32_t(ranged(INT32_MIN, INT32_MAX))); break;
    case kiln::DType::i16: put(int16_t(ranged(INT16_MIN, INT16_MAX))); break;
    case kiln::DType::i8: put(int8_t(ranged(INT8_MIN, INT8_MAX))); break;
    case kiln::DType::u8: put(uint8_t(ranged(0, 255))); break;
    default: throw std::invalid_argument("input '" + name + "': unsupported datatype");
    }
  }
}

json decode(const OutputTensor &t) {
  json data = json::array();
  size_t n = t.bytes / std::max<size_t>(1, kiln::byteSize(t.dtype));
  const uint8_t *p = t.data;
  auto get = [&](auto x, size_t i) {
    std::memcpy(&x, p + i * sizeof x, sizeof x);
    return x;
  };
  for (size_t i = 0; i < n; ++i) switch (t.dtype) {
    case kiln::DType::f32: data.push_back(get(float(), i)); break;
    case kiln::DType::f64: data.push_back(get(double(), i)); break;
    case kiln::DType::f16: data.push_back(fromHalf(get(uint16_t(), i))); break;
    case kiln::DType::bf16: data.push_back(fromBf16(get(uint16_t(), i))); break;
    case kiln::DType::i64: data.push_back(get(int64_t(), i)); break;
    case kiln::DType::i32: data.push_back(get(int32_t(), i)); break;
    case kiln::DType::i16: data.push_back(get(int16_t(), i)); break;
    case kiln::DType::i8: data.push_back(get(int8_t(), i)); break;
    case kiln::DType::u8: data.push_back(get(uint8_t(), i)); break;
    case kiln::DType::boolean: data.push_back(p[i] != 0); break;
    }
  return data;
}

HttpAnswer errorAnswer(int status, const std::string &message) {
  HttpAnswer a;
  a.status = status;
  a.body = json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return a;
}

HttpAnswer jsonAnswer(const json &j) {
  HttpAnswer a;
  a.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return a;
}

json tensorMetadata(const std::vector<TensorSpec> &specs) {
  json list = json::array();
  for (const TensorSpec &s : specs) list.push_back({{"name", s.name}, {"datatype", protocolName(s.dtype)}, {"shape", s.shape}});
  return list;
}

std::vector<std::string> split(const std::string &path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

bool getBool(const json &params, const char *key) {
  auto it = params.find(key);
  return it != params.end() && it->is_boolean() && it->get<bool>();
}

/// The infer request's JSON (and binary data) -> InferRequest; throws std::invalid_argument.
InferRequest parseInfer(const HttpRequest &in, const std::string &model, const std::string &version) {
  const std::string &body = *in.body;
  size_t jsonLength = body.size();
  if (!in.inferenceHeaderLength.empty()) {
    const std::string &h = in.inferenceHeaderLength;
    if (h.size() > 18 || !std::all_of(h.begin(), h.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw std::invalid_argument("Inference-Header-Content-Length '" + h + "' is not a byte count");
    jsonLength = size_t(std::stoull(h));
    if (jsonLength > body.size())
      throw std::invalid_argument("Inference-Header-Content-Length " + h + " is larger than the body (" +
                                  std::to_string(body.size()) + " bytes)");
  }
  json j;
  try {
    j = json::parse(body.begin(), body.begin() + std::ptrdiff_t(jsonLength));
  } catch (const json::exception &e) {
    throw std::invalid_argument(std::string("malformed JSON in the request: ") + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("the request is not a JSON object");
  InferRequest r;
  r.model = model;
  r.version = version;
  auto holder = std::make_shared<std::vector<std::string>>();  // converted JSON data
  if (j.contains("id")) {
    if (!j["id"].is_string()) throw std::invalid_argument("'id' is not a string");
    r.id = j["id"].get<std::string>();
  }
  if (j.contains("parameters")) {
    const json &p = j["parameters"];
    if (!p.is_object()) throw std::invalid_argument("'parameters' is not an object");
    r.binaryOutputs = getBool(p, "binary_data_output");
    if (p.contains("timeout")) {
      if (!p["timeout"].is_number_integer() || p["timeout"].get<int64_t>() < 0)
        throw std::invalid_argument("parameter 'timeout' is not a count of microseconds");
      int64_t us = p["timeout"].get<int64_t>();
      if (us > 0) r.limitTo(std::chrono::microseconds(us));
    }
  }
  if (!j.contains("inputs") || !j["inputs"].is_array()) throw std::invalid_argument("'inputs' is missing or not an array");
  size_t offset = jsonLength;
  for (const json &t : j["inputs"]) {
    if (!t.is_object()) throw std::invalid_argument("an entry of 'inputs' is not an object");
    if (!t.contains("name") || !t["name"].is_string()) throw std::invalid_argument("an input has no 'name'");
    InputTensor in;
    in.name = t["name"].get<std::string>();
    if (!t.contains("datatype") || !t["datatype"].is_string())
      throw std::invalid_argument("input '" + in.name + "' has no 'datatype'");
    std::string dt = t["datatype"].get<std::string>();
    std::optional<kiln::DType> dtype = dtypeFromProtocol(dt);
    if (!dtype) throw std::invalid_argument("input '" + in.name + "': datatype '" + dt + "' is not supported by kiln");
    in.dtype = *dtype;
    if (!t.contains("shape") || !t["shape"].is_array()) throw std::invalid_argument("input '" + in.name + "' has no 'shape'");
    for (const json &d : t["shape"]) {
      if (!d.is_number_integer()) throw std::invalid_argument("input '" + in.name + "': 'shape' holds a non-integer");
      in.shape.push_back(d.get<int64_t>());
    }
    if (in.shape.size() > 16) throw std::invalid_argument("input '" + in.name + "' has more than 16 dimensions");
    std::optional<uint64_t> count = elementCount(in.shape);
    if (!count) throw std::invalid_argument("input '" + in.name + "' has an invalid shape " + shapeText(in.shape));
    const json *params = t.contains("parameters") && t["parameters"].is_object() ? &t["parameters"] : nullptr;
    if (params && params->contains("binary_data_size")) {
      const json &n = (*params)["binary_data_size"];
      if (!n.is_number_unsigned()) throw std::invalid_argument("input '" + in.name + "': binary_data_size is not a byte count");
      uint64_t size = n.get<uint64_t>();
      if (size > body.size() - offset)
        throw std::invalid_argument("input '" + in.name + "': binary_data_size " + std::to_string(size) + " but only " +
                                    std::to_string(body.size() - offset) + " bytes of binary data are left");
      in.data = reinterpret_cast<const uint8_t *>(body.data()) + offset;
      in.bytes = size_t(size);
      offset += size_t(size);
    } else if (t.contains("data")) {
      holder->emplace_back();
      encode(t["data"], in.dtype, *count, in.name, holder->back());
      in.data = reinterpret_cast<const uint8_t *>(holder->back().data());
      in.bytes = holder->back().size();
    } else {
      throw std::invalid_argument("input '" + in.name + "' has neither 'data' nor a binary_data_size parameter");
    }
    r.inputs.push_back(std::move(in));
  }
  if (offset != body.size())
    throw std::invalid_argument("the body has " + std::to_string(body.size() - jsonLength) +
                                " bytes of binary data; the inputs' binary_data_size add up to " +
                                std::to_string(offset - jsonLength));
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) throw std::invalid_argument("'outputs' is not an array");
    for (const json &o : j["outputs"]) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        throw std::invalid_argument("an entry of 'outputs' has no 'name'");
      RequestedOutput ro{o["name"].get<std::string>(), r.binaryOutputs};
      if (o.contains("parameters") && o["parameters"].is_object() && o["parameters"].contains("binary_data"))
        ro.binary = getBool(o["parameters"], "binary_data");
      r.outputs.push_back(std::move(ro));
    }
  }
  r.payload = std::make_shared<std::pair<std::shared_ptr<std::string>, std::shared_ptr<std::vector<std::string>>>>(
      in.body, holder);
  return r;
}

HttpAnswer inferAnswer(const InferResponse &response) {
  json outputs = json::array();
  size_t binaryBytes = 0;
  for (const OutputTensor &t : response.outputs) {
    json o{{"name", t.name}, {"datatype", protocolName(t.dtype)}, {"shape", t.shape}};
    if (t.binary) {
      o["parameters"] = {{"binary_data_size", t.bytes}};
      binaryBytes += t.bytes;
    } else {
      o["data"] = decode(t);
    }
    outputs.push_back(std::move(o));
  }
  json j{{"model_name", response.model}, {"model_version", response.version}, {"outputs", std::move(outputs)}};
  if (!response.id.empty()) j["id"] = response.id;
  HttpAnswer a = jsonAnswer(j);
  if (binaryBytes) {
    a.jsonHeaderLength = a.body.size();
    a.contentType = "application/octet-stream";
    a.body.reserve(a.body.size() + binaryBytes);
    for (const OutputTensor &t : response.outputs)
      if (t.binary) a.body.append(reinterpret_cast<const char *>(t.data), t.bytes);
  }
  return a;
}

}  // namespace

void handleHttp(const ServerState &state, HttpRequest in, std::function<void(HttpAnswer)> reply) {
  std::string path = in.target.substr(0, in.target.find('?'));
  std::vector<std::string> p = split(path);
  const std::string &method = in.method;
  auto methodIs = [&](const char *m) {
    if (method == m) return true;
    reply(errorAnswer(405, "method " + method + " is not allowed on " + path + " (use " + m + ")"));
    return false;
  };
  if (p.empty() || p[0] != "v2") return reply(errorAnswer(404, "no route " + path + " (the protocol's routes start with /v2)"));
  if (p.size() == 1) {
    if (!methodIs("GET")) return;
    return reply(jsonAnswer({{"name", "kiln"},
                             {"version", KILN_VERSION_STRING},
                             {"extensions", kExtensions}}));
  }
  if (p.size() == 3 && p[1] == "health" && (p[2] == "live" || p[2] == "ready")) {
    if (!methodIs("GET")) return;
    bool ok = p[2] == "live" || state.ready();
    return reply(ok ? HttpAnswer{200, "application/json", "", 0} : errorAnswer(503, "kiln serve is not ready"));
  }
  if (p.size() >= 3 && p[1] == "models") {
    std::string model = p[2], version;
    size_t rest = 3;
    if (p.size() >= 5 && p[3] == "versions") version = p[4], rest = 5;
    std::string action = p.size() > rest ? p[rest] : "";
    if (p.size() > rest + 1) return reply(errorAnswer(404, "no route " + path));
    ServeError err;
    ServedModel *m = state.repository->find(model, version, &err);
    if (action == "ready") {
      if (!methodIs("GET")) return;
      if (!m) return reply(errorAnswer(httpStatus(err.kind), err.message));
      return reply(state.ready() ? HttpAnswer{200, "application/json", "", 0} : errorAnswer(503, "not ready"));
    }
    if (!m) return reply(errorAnswer(httpStatus(err.kind), err.message));
    if (action.empty()) {
      if (!methodIs("GET")) return;
      return reply(jsonAnswer({{"name", m->name()},
                               {"versions", state.repository->versionsServed(model)},
                               {"platform", kPlatform},
                               {"inputs", tensorMetadata(m->inputs())},
                               {"outputs", tensorMetadata(m->outputs())}}));
    }
    if (action == "config") {
      if (!methodIs("GET")) return;
      inference::ModelConfig config;
      describeConfig(*m, &config);
      google::protobuf::util::JsonPrintOptions options;
      options.preserve_proto_field_names = true;
      options.always_print_primitive_fields = true;
      std::string text;
      if (!google::protobuf::util::MessageToJsonString(config, &text, options).ok())
        return reply(errorAnswer(500, "cannot write the configuration of '" + model + "'"));
      // Protobuf's JSON writes 64-bit integers (dims, the queue delay) as
      // strings; Triton's answers numbers. Names stay strings, digits or not.
      json j = json::parse(text);
      auto numbers = [](json &v) {
        if (v.is_string()) v = std::stoll(v.get<std::string>());
        for (json &e : v)
          if (e.is_string()) e = std::stoll(e.get<std::string>());
      };
      for (const char *key : {"input", "output"})
        for (json &t : j[key])
          if (t.contains("dims")) numbers(t["dims"]);
      if (j.contains("dynamic_batching") && j["dynamic_batching"].contains("max_queue_delay_microseconds"))
        numbers(j["dynamic_batching"]["max_queue_delay_microseconds"]);
      return reply(jsonAnswer(j));
    }
    if (action == "infer") {
      if (!methodIs("POST")) return;
      if (!in.contentEncoding.empty() && in.contentEncoding != "identity")
        return reply(errorAnswer(400, "Content-Encoding '" + in.contentEncoding + "' is not supported (send identity)"));
      InferRequest request;
      try {
        request = parseInfer(in, model, version);
      } catch (const std::exception &e) {
        return reply(errorAnswer(400, e.what()));
      }
      m->infer(std::move(request), [reply](std::optional<ServeError> error, InferResponse response) {
        if (error) return reply(errorAnswer(httpStatus(error->kind), error->message));
        HttpAnswer a;
        try {
          a = inferAnswer(response);
        } catch (const std::exception &e) {
          a = errorAnswer(500, std::string("cannot write the answer: ") + e.what());
        }
        reply(std::move(a));
      });
      return;
    }
    return reply(errorAnswer(404, "no route " + path));
  }
  return reply(errorAnswer(404, "no route " + path));
}

// ---- The server -------------------------------------------------------------

namespace {

class Session : public std::enable_shared_from_this<Session> {
public:
  Session(tcp::socket socket, const ServerState &state, size_t limit, bool metricsOnly,
          std::shared_ptr<std::atomic<int>> pending)
      : stream_(std::move(socket)), state_(state), limit_(limit), metricsOnly_(metricsOnly),
        pending_(std::move(pending)) {}
  void start() { read(); }

private:
  void read() {
    parser_.emplace();
    parser_->body_limit(limit_);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(std::chrono::seconds(300));
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->onRead(ec);
    });
  }

  void onRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted)
      return close();
    if (ec == http::error::body_limit)
      return ++*pending_, write(errorAnswer(413, "request body larger than " + std::to_string(limit_) + " bytes"), 11, false);
    if (ec) return ++*pending_, write(errorAnswer(400, "bad HTTP request: " + ec.message()), 11, false);
    http::request<http::string_body> req = parser_->release();
    ++*pending_;  // until its answer is written (stop() waits for these)
    unsigned version = req.version();
    bool keepAlive = req.keep_alive();
    if (metricsOnly_) {
      if (req.target() != "/metrics") return write(errorAnswer(404, "the metrics port serves /metrics only"), version, keepAlive);
      HttpAnswer a;
      a.contentType = "text/plain; version=0.0.4";
      a.body = prometheusText(*state_.repository);
      return write(std::move(a), version, keepAlive);
    }
    HttpRequest in;
    in.method = std::string(req.method_string());
    in.target = std::string(req.target());
    if (auto it = req.find("Inference-Header-Content-Length"); it != req.end()) in.inferenceHeaderLength = std::string(it->value());
    if (auto it = req.find(http::field::content_encoding); it != req.end()) in.contentEncoding = std::string(it->value());
    *in.body = std::move(req.body());
    auto self = shared_from_this();
    handleHttp(state_, std::move(in), [self, version, keepAlive](HttpAnswer a) {
      asio::post(self->stream_.get_executor(), [self, a = std::move(a), version, keepAlive]() mutable {
        self->write(std::move(a), version, keepAlive);
      });
    });
  }

  void write(HttpAnswer a, unsigned version, bool keepAlive) {
    auto res = std::make_shared<http::response<http::string_body>>(http::status(a.status), version);
    res->set(http::field::server, "kiln");
    res->set(http::field::content_type, a.contentType);
    if (a.jsonHeaderLength) res->set("Inference-Header-Content-Length", std::to_string(a.jsonHeaderLength));
    res->keep_alive(keepAlive);
    res->body() = std::move(a.body);
    res->prepare_payload();
    stream_.expires_after(std::chrono::seconds(300));
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      --*self->pending_;
      if (ec || !res->keep_alive()) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const ServerState &state_;
  size_t limit_;
  bool metricsOnly_;
  std::shared_ptr<std::atomic<int>> pending_;
};

}  // namespace

struct HttpServer::Impl {
  asio::io_context io;
  // The I/O threads run until stop(): an answer may be posted to a connection
  // while nothing else is pending (a request being computed, the acceptor closed).
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::optional<tcp::acceptor> acceptor, metrics;
  std::vector<std::thread> threads;
  ServerState state;
  HttpOptions options;
  bool stopped = false;
  int port = 0, metricsPort = -1;
  std::shared_ptr<std::atomic<int>> pending = std::make_shared<std::atomic<int>>(0);

  void accept(tcp::acceptor &a, bool metricsOnly) {
    a.async_accept(asio::make_strand(io), [this, &a, metricsOnly](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !a.is_open()) return;
      if (!ec) {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(socket), state, options.maxRequestBytes, metricsOnly, pending)->start();
      }
      accept(a, metricsOnly);
    });
  }

  tcp::acceptor bind(const std::string &host, int port, const char *what) {
    beast::error_code ec;
    asio::ip::address addr = asio::ip::make_address(host, ec);
    if (ec) throw kiln::Error(kiln::Code::invalid_argument, "--host '" + host + "' is not an IP address", "");
    tcp::endpoint ep(addr, uint16_t(port));
    tcp::acceptor a(io);
    a.open(ep.protocol(), ec);
    if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      throw kiln::Error(kiln::Code::unavailable,
                        std::string("cannot listen for ") + what + " on " + host + ":" + std::to_string(port) + ": " +
                            ec.message(),
                        "");
    return a;
  }
};

HttpServer::HttpServer(const HttpOptions &options, ServerState state) : impl_(std::make_unique<Impl>()) {
  impl_->state = std::move(state);
  impl_->options = options;
  impl_->acceptor.emplace(impl_->bind(options.host, options.port, "HTTP"));
  impl_->port = impl_->acceptor->local_endpoint().port();
  impl_->accept(*impl_->acceptor, false);
  if (options.metricsPort >= 0) {
    impl_->metrics.emplace(impl_->bind(options.host, options.metricsPort, "metrics"));
    impl_->metricsPort = impl_->metrics->local_endpoint().port();
    impl_->accept(*impl_->metrics, true);
  }
  for (int i = 0; i < std::max(1, options.threads); ++i) impl_->threads.emplace_back([this] { impl_->io.run(); });
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port; }
int HttpServer::metricsPort() const { return impl_->metricsPort; }

void HttpServer::stopAccepting() {
  asio::post(impl_->io, [this] {
    beast::error_code ec;
    if (impl_->acceptor) impl_->acceptor->close(ec);
  });
}

void HttpServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  // Answers of requests already run are written before the threads stop.
  for (int i = 0; i < 1000 && impl_->pending->load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->work.reset();
  impl_->io.stop();
  for (std::thread &t : impl_->threads) t.join();
}

}  // namespace kiln::serve
