#include "serve/Grpc.h"

#include "serve/proto/grpc_service.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <kiln/version.h>

#include <cstring>

namespace kiln::serve {

namespace {

grpc::Status statusOf(const ServeError &e) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (e.kind) {
  case ErrorKind::invalid_argument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
  case ErrorKind::not_found: code = grpc::StatusCode::NOT_FOUND; break;
  case ErrorKind::unavailable: code = grpc::StatusCode::UNAVAILABLE; break;
  case ErrorKind::deadline_exceeded: code = grpc::StatusCode::DEADLINE_EXCEEDED; break;
  case ErrorKind::cancelled: code = grpc::StatusCode::CANCELLED; break;
  case ErrorKind::too_large: code = grpc::StatusCode::RESOURCE_EXHAUSTED; break;
  case ErrorKind::internal: code = grpc::StatusCode::INTERNAL; break;
  }
  return grpc::Status(code, e.message);
}

grpc::ServerUnaryReactor *finish(grpc::CallbackServerContext *ctx, const grpc::Status &status) {
  grpc::ServerUnaryReactor *r = ctx->DefaultReactor();
  r->Finish(status);
  return r;
}

void fillMetadata(const std::vector<TensorSpec> &specs,
                  google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata> *out) {
  for (const TensorSpec &s : specs) {
    auto *t = out->Add();
    t->set_name(s.name);
    t->set_datatype(protocolName(s.dtype));
    for (int64_t d : s.shape) t->add_shape(d);
  }
}

/// A typed contents field -> `bytes`, each value converted to T.
template <typename T, typename Field>
void narrow(const Field &field, std::string &bytes) {
  bytes.resize(size_t(field.size()) * sizeof(T));
  for (int i = 0; i < field.size(); ++i) {
    T v = T(field.Get(i));
    std::memcpy(bytes.data() + size_t(i) * sizeof(T), &v, sizeof(T));
  }
}

std::string contentsBytes(const inference::InferTensorContents &c, kiln::DType dtype, const std::string &name) {
  std::string bytes;
  switch (dtype) {
  case kiln::DType::f32: narrow<float>(c.fp32_contents(), bytes); break;
  case kiln::DType::f64: narrow<double>(c.fp64_contents(), bytes); break;
  case kiln::DType::i64: narrow<int64_t>(c.int64_contents(), bytes); break;
  case kiln::DType::i32: narrow<int32_t>(c.int_contents(), bytes); break;
  case kiln::DType::i16: narrow<int16_t>(c.int_contents(), bytes); break;
  case kiln::DType::i8: narrow<int8_t>(c.int_contents(), bytes); break;
  case kiln::DType::u8: narrow<uint8_t>(c.uint_contents(), bytes); break;
  case kiln::DType::boolean: narrow<uint8_t>(c.bool_contents(), bytes); break;
  default:
    throw std::invalid_argument("input '" + name + "': " + protocolName(dtype) +
                                " has no typed contents field; send it in raw_input_contents");
  }
  return bytes;
}

class Service final : public inference::GRPCInferenceService::CallbackService {
public:
  explicit Service(ServerState state) : state_(std::move(state)) {}

  grpc::ServerUnaryReactor *ServerLive(grpc::CallbackServerContext *ctx, const inference::ServerLiveRequest *,
                                       inference::ServerLiveResponse *res) override {
    res->set_live(true);
    return finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor *ServerReady(grpc::CallbackServerContext *ctx, const inference::ServerReadyRequest *,
                                        inference::ServerReadyResponse *res) override {
    res->set_ready(state_.ready());
    return finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor *ModelReady(grpc::CallbackServerContext *ctx, const inference::ModelReadyRequest *req,
                                       inference::ModelReadyResponse *res) override {
    ServeError err;
    ServedModel *m = state_.repository->find(req->name(), req->version(), &err);
    if (!m && err.kind == ErrorKind::not_found) return finish(ctx, statusOf(err));
    res->set_ready(m && state_.ready());
    return finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor *ServerMetadata(grpc::CallbackServerContext *ctx, const inference::ServerMetadataRequest *,
                                           inference::ServerMetadataResponse *res) override {
    res->set_name("kiln");
    res->set_version(KILN_VERSION_STRING);
    for (const std::string &e : kExtensions) res->add_extensions(e);
    return finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor *ModelMetadata(grpc::CallbackServerContext *ctx, const inference::ModelMetadataRequest *req,
                                          inference::ModelMetadataResponse *res) override {
    ServeError err;
    ServedModel *m = state_.repository->find(req->name(), req->version(), &err);
    if (!m) return finish(ctx, statusOf(err));
    res->set_name(m->name());
    for (const std::string &v : state_.repository->versionsServed(m->name())) res->add_versions(v);
    res->set_platform(kPlatform);
    fillMetadata(m->inputs(), res->mutable_inputs());
    fillMetadata(m->outputs(), res->mutable_outputs());
    return finish(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor *ModelConfig(grpc::CallbackServerContext *ctx, const inference::ModelConfigRequest *req,
                                        inference::ModelConfigResponse *res) override {
    ServeError err;
    ServedModel *m = state_.repository->find(req->name(), req->version(), &err);
    if (!m) return finish(ctx, statusOf(err));
    describeConfig(*m, res->mutable_config());
    return finish(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor *ModelInfer(grpc::CallbackServerContext *ctx, const inference::ModelInferRequest *req,
                                       inference::ModelInferResponse *res) override {
    ServeError err;
    ServedModel *m = state_.repository->find(req->model_name(), req->model_version(), &err);
    if (!m) return finish(ctx, statusOf(err));
    InferRequest r;
    r.model = req->model_name();
    r.version = req->model_version();
    r.id = req->id();
    auto converted = std::make_shared<std::vector<std::string>>();
    try {
      bool raw = req->raw_input_contents_size() > 0;
      if (raw && req->raw_input_contents_size() != req->inputs_size())
        throw std::invalid_argument(std::to_string(req->raw_input_contents_size()) + " raw_input_contents for " +
                                    std::to_string(req->inputs_size()) + " inputs");
      converted->reserve(size_t(req->inputs_size()));
      for (int i = 0; i < req->inputs_size(); ++i) {
        const auto &t = req->inputs(i);
        InputTensor in;
        in.name = t.name();
        std::optional<kiln::DType> dtype = dtypeFromProtocol(t.datatype());
        if (!dtype)
          throw std::invalid_argument("input '" + in.name + "': datatype '" + t.datatype() + "' is not supported by kiln");
        in.dtype = *dtype;
        if (t.shape_size() > 16) throw std::invalid_argument("input '" + in.name + "' has more than 16 dimensions");
        in.shape.assign(t.shape().begin(), t.shape().end());
        if (raw) {
          const std::string &bytes = req->raw_input_contents(i);
          in.data = reinterpret_cast<const uint8_t *>(bytes.data());
          in.bytes = bytes.size();
        } else {
          converted->push_back(contentsBytes(t.contents(), in.dtype, in.name));
          in.data = reinterpret_cast<const uint8_t *>(converted->back().data());
          in.bytes = converted->back().size();
        }
        r.inputs.push_back(std::move(in));
      }
    } catch (const std::exception &e) {
      return finish(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what()));
    }
    for (const auto &o : req->outputs()) r.outputs.push_back({o.name(), true});
    auto parameterTimeout = req->parameters().find("timeout");
    if (parameterTimeout != req->parameters().end() && parameterTimeout->second.int64_param() > 0)
      r.limitTo(std::chrono::microseconds(parameterTimeout->second.int64_param()));
    if (ctx->deadline() != std::chrono::system_clock::time_point::max())
      r.limitTo(std::chrono::duration_cast<Clock::duration>(ctx->deadline() - std::chrono::system_clock::now()));
    r.payload = converted;  // the request's own bytes live until the RPC finishes, after the call
    r.abandoned = [ctx] { return ctx->IsCancelled(); };
    grpc::ServerUnaryReactor *reactor = ctx->DefaultReactor();
    m->infer(std::move(r), [reactor, res](std::optional<ServeError> error, InferResponse response) {
      if (error) return reactor->Finish(statusOf(*error));
      res->set_model_name(response.model);
      res->set_model_version(response.version);
      res->set_id(response.id);
      for (const OutputTensor &t : response.outputs) {
        auto *o = res->add_outputs();
        o->set_name(t.name);
        o->set_datatype(protocolName(t.dtype));
        for (int64_t d : t.shape) o->add_shape(d);
        res->add_raw_output_contents(reinterpret_cast<const char *>(t.data), t.bytes);
      }
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }

private:
  ServerState state_;
};

}  // namespace

struct GrpcServer::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool down = false;
};

GrpcServer::GrpcServer(const GrpcOptions &options, ServerState state) : impl_(std::make_unique<Impl>()) {
  impl_->service = std::make_unique<Service>(std::move(state));
  grpc::ServerBuilder builder;
  std::string host = options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  builder.AddListeningPort(host + ":" + std::to_string(options.port), grpc::InsecureServerCredentials(), &impl_->port);
  builder.SetMaxReceiveMessageSize(int(std::min<size_t>(options.maxRequestBytes, size_t(INT32_MAX))));
  builder.SetMaxSendMessageSize(INT32_MAX);
  builder.RegisterService(impl_->service.get());
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    throw kiln::Error(kiln::Code::unavailable,
                      "cannot listen for gRPC on " + options.host + ":" + std::to_string(options.port), "");
}

GrpcServer::~GrpcServer() { shutdown(5); }

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::shutdown(double seconds) {
  if (impl_->down) return;
  impl_->down = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(seconds)));
  impl_->server->Wait();
}

}  // namespace kiln::serve
