#include "serve/Repository.h"

#include "serve/proto/model_config.pb.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace kiln::serve {

bool validModelName(const std::string &name) {
  if (name.empty() || name.size() > 128 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

namespace {

kiln::Error configError(const std::string &where, const std::string &what) {
  return kiln::Error(kiln::Code::invalid_argument, where + ": " + what, where);
}

class Collector : public google::protobuf::io::ErrorCollector {
public:
  void AddError(int line, int column, const std::string &message) override {
    if (text.empty()) text = std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  std::string text;
};

inference::ModelConfig readConfig(const fs::path &file) {
  inference::ModelConfig config;
  std::ifstream in(file);
  if (!in) throw kiln::Error(kiln::Code::io, "cannot read " + file.string(), file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  google::protobuf::TextFormat::Parser parser;
  parser.AllowUnknownField(true);  // Triton's fields kiln does not use (instance_group, optimization, ...)
  parser.AllowUnknownExtension(true);
  Collector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(ss.str(), &config))
    throw configError(file.string(),
                      "not a model configuration (" + errors.text +
                          "; kiln reads Triton's name, platform, backend, max_batch_size, input, output, "
                          "version_policy, dynamic_batching, instance_group, default_model_filename and parameters, "
                          "and skips other fields written as `field { ... }` or `field: value`)");
  return config;
}

std::optional<kiln::DType> dtypeOfConfig(inference::DataType t) {
  switch (t) {
  case inference::TYPE_BOOL: return kiln::DType::boolean;
  case inference::TYPE_UINT8: return kiln::DType::u8;
  case inference::TYPE_INT8: return kiln::DType::i8;
  case inference::TYPE_INT16: return kiln::DType::i16;
  case inference::TYPE_INT32: return kiln::DType::i32;
  case inference::TYPE_INT64: return kiln::DType::i64;
  case inference::TYPE_FP16: return kiln::DType::f16;
  case inference::TYPE_BF16: return kiln::DType::bf16;
  case inference::TYPE_FP32: return kiln::DType::f32;
  case inference::TYPE_FP64: return kiln::DType::f64;
  default: return std::nullopt;
  }
}

/// Checks the configuration's inputs or outputs against the model's.
template <typename Spec>
void checkSpecs(const std::string &where, const char *what, const google::protobuf::RepeatedPtrField<Spec> &config,
                const std::vector<TensorSpec> &model, int maxBatchSize) {
  if (config.empty()) return;
  std::string names;
  for (const TensorSpec &s : model) names += (names.empty() ? "'" : ", '") + s.name + "'";
  if (size_t(config.size()) != model.size())
    throw configError(where, std::to_string(config.size()) + " " + what + "s configured; the model has " +
                                 std::to_string(model.size()) + " (" + names + ")");
  for (const Spec &c : config) {
    auto it = std::find_if(model.begin(), model.end(), [&](const TensorSpec &s) { return s.name == c.name(); });
    if (it == model.end()) throw configError(where, std::string(what) + " '" + c.name() + "' is not the model's (" + names + ")");
    std::optional<kiln::DType> dt = dtypeOfConfig(c.data_type());
    if (!dt || *dt != it->dtype)
      throw configError(where, std::string(what) + " '" + c.name() + "' is configured as " +
                                   inference::DataType_Name(c.data_type()) + "; the model's is " +
                                   protocolName(it->dtype));
    std::vector<int64_t> dims(c.dims().begin(), c.dims().end());
    if (maxBatchSize > 0) dims.insert(dims.begin(), -1);
    bool fits = dims.size() == it->shape.size();
    for (size_t d = 0; fits && d < dims.size(); ++d)
      fits = dims[d] == it->shape[d] || (d == 0 && maxBatchSize > 0) || dims[d] == -1 || it->shape[d] == -1;
    if (!fits)
      throw configError(where, std::string(what) + " '" + c.name() + "' is configured with dims " +
                                   shapeText({c.dims().begin(), c.dims().end()}) +
                                   (maxBatchSize > 0 ? " (after the batch)" : "") + "; the model's shape is " +
                                   shapeText(it->shape));
  }
}

/// A version directory's or a request's version: 1 to 18 digits.
bool isVersion(const std::string &v) {
  return !v.empty() && v.size() <= 18 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inference::DataType configTypeOf(kiln::DType d) {
  inference::DataType t = inference::TYPE_INVALID;
  inference::DataType_Parse(std::string("TYPE_") + protocolName(d), &t);
  return t;
}

}  // namespace

void describeConfig(const ServedModel &m, inference::ModelConfig *config) {
  config->set_name(m.name());
  config->set_platform(kPlatform);
  config->set_backend("kiln");
  config->set_max_batch_size(m.settings().maxBatchSize);
  auto dims = [&](const TensorSpec &s) {
    std::vector<int64_t> d = s.shape;
    if (m.settings().maxBatchSize > 0 && !d.empty()) d.erase(d.begin());
    return d;
  };
  for (const TensorSpec &s : m.inputs()) {
    inference::ModelInput *in = config->add_input();
    in->set_name(s.name);
    in->set_data_type(configTypeOf(s.dtype));
    for (int64_t d : dims(s)) in->add_dims(d);
  }
  for (const TensorSpec &s : m.outputs()) {
    inference::ModelOutput *out = config->add_output();
    out->set_name(s.name);
    out->set_data_type(configTypeOf(s.dtype));
    for (int64_t d : dims(s)) out->add_dims(d);
  }
  if (m.settings().dynamicBatching) {
    inference::ModelDynamicBatching *db = config->mutable_dynamic_batching();
    for (int p : m.settings().preferredBatchSizes) db->add_preferred_batch_size(p);
    db->set_max_queue_delay_microseconds(uint64_t(m.settings().maxQueueDelay.count()));
    db->mutable_default_queue_policy()->set_max_queue_size(uint32_t(m.settings().maxQueueSize));
  }
  inference::ModelInstanceGroup *group = config->add_instance_group();
  group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  group->set_count(m.settings().instances);
  (*config->mutable_parameters())["function"].set_string_value(m.function());
}

Repository::Repository(const RepositoryOptions &options, Batcher *batcher,
                       const std::function<void(const std::string &)> &log)
    : options_(options) {
  std::error_code ec;
  if (!fs::is_directory(options.dir, ec))
    throw kiln::Error(kiln::Code::io, "model repository '" + options.dir + "' is not a directory", options.dir);
  fs::path root = fs::canonical(options.dir, ec);
  std::vector<fs::path> dirs;
  for (const fs::directory_entry &e : fs::directory_iterator(root, ec))
    if (e.is_directory(ec)) dirs.push_back(e.path());
  if (ec) throw kiln::Error(kiln::Code::io, "cannot list '" + options.dir + "': " + ec.message(), options.dir);
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path &dir : dirs) {
    std::string name = dir.filename().string();
    if (!validModelName(name)) {
      log("skipping '" + dir.string() + "': not a valid model name (letters, digits, '_', '-', '.')");
      continue;
    }
    fs::path real = fs::canonical(dir, ec);
    std::string rootText = root.string() + "/";
    if (ec || real.string().compare(0, rootText.size(), rootText) != 0) {
      log("skipping '" + dir.string() + "': it leads outside the repository");
      continue;
    }
    auto model = std::make_unique<RepositoryModel>();
    model->name = name;
    try {
      inference::ModelConfig config;
      fs::path configFile = dir / "config.pbtxt";
      bool configured = fs::exists(configFile, ec);
      if (configured) config = readConfig(configFile);
      std::string where = configured ? configFile.string() : dir.string();
      if (!config.name().empty() && config.name() != name)
        throw configError(where, "name '" + config.name() + "' is not the directory's ('" + name + "')");
      // Versions present.
      std::vector<std::string> files{"model.mlir", "model.mlirbc"};
      if (!config.default_model_filename().empty()) {
        if (!validModelName(config.default_model_filename()))
          throw configError(where, "default_model_filename '" + config.default_model_filename() +
                                       "' is not a plain file name");
        files = {config.default_model_filename()};
      }
      std::map<int64_t, fs::path> present;
      for (const fs::directory_entry &v : fs::directory_iterator(dir, ec)) {
        std::string vn = v.path().filename().string();
        if (!v.is_directory(ec) || !isVersion(vn)) continue;
        for (const std::string &file : files)
          if (fs::is_regular_file(v.path() / file, ec)) present[std::stoll(vn)] = v.path() / file;
      }
      if (present.empty())
        throw configError(dir.string(), config.default_model_filename().empty()
                                            ? "no version directory with a model.mlir or model.mlirbc"
                                            : "no version directory with a " + config.default_model_filename());
      std::vector<int64_t> chosen;
      const inference::ModelVersionPolicy &policy = config.version_policy();
      if (policy.has_all()) {
        for (auto &[v, p] : present) chosen.push_back(v);
      } else if (policy.has_specific()) {
        for (int64_t v : policy.specific().versions()) {
          if (!present.count(v)) throw configError(where, "version " + std::to_string(v) + " is not in the repository");
          chosen.push_back(v);
        }
      } else {
        uint32_t n = policy.has_latest() && policy.latest().num_versions() > 0 ? policy.latest().num_versions() : 1;
        for (auto it = present.rbegin(); it != present.rend() && chosen.size() < n; ++it) chosen.push_back(it->first);
      }
      // Runtime options and serve's own parameters.
      std::vector<std::pair<std::string, std::string>> extra;
      std::string function;
      for (const auto &[key, value] : config.parameters()) {
        if (key == "function")
          function = value.string_value();
        else
          extra.emplace_back(key, value.string_value());
      }
      std::sort(extra.begin(), extra.end());
      std::shared_ptr<kiln::Runtime> runtime;
      try {
        runtime = runtimeFor(extra);
      } catch (const kiln::Error &e) {
        throw configError(where, std::string("parameters: ") + e.what());
      }
      ModelSettings settings;
      settings.maxBatchSize = config.max_batch_size();
      settings.maxQueueSize = options.maxQueueSize;
      if (config.has_dynamic_batching()) {
        const inference::ModelDynamicBatching &db = config.dynamic_batching();
        settings.dynamicBatching = true;
        settings.preferredBatchSizes.assign(db.preferred_batch_size().begin(), db.preferred_batch_size().end());
        settings.maxQueueDelay = std::chrono::microseconds(db.max_queue_delay_microseconds());
        if (db.default_queue_policy().max_queue_size() > 0)
          settings.maxQueueSize = db.default_queue_policy().max_queue_size();
      }
      if (settings.maxBatchSize < 0) throw configError(where, "max_batch_size is negative");
      if (config.instance_group_size() > 0) {
        settings.instances = 0;
        for (const auto &g : config.instance_group()) {
          if (g.kind() == inference::ModelInstanceGroup::KIND_GPU)
            throw configError(where, "instance_group asks for KIND_GPU; kiln serve runs models on the CPU");
          settings.instances += std::max(1, g.count());
        }
      }
      for (int64_t v : chosen) {
        const fs::path &file = present[v];
        kiln::Module module = runtime->load(file.string());
        // The library's rule (main, or the only function), its message
        // naming the functions, and the config's way to choose.
        std::string fn;
        try {
          fn = module.resolveFunction(function);
        } catch (const kiln::Error &e) {
          throw configError(file.string(), std::string(e.what()) +
                                               (function.empty() ? " (parameters { key: \"function\" value: { "
                                                                   "string_value: \"...\" } } names one)"
                                                                 : ""));
        }
        std::vector<TensorSpec> inputs = specsOf(module.inputs(fn)), outputs = specsOf(module.outputs(fn));
        checkSpecs(where, "input", config.input(), inputs, settings.maxBatchSize);
        checkSpecs(where, "output", config.output(), outputs, settings.maxBatchSize);
        auto served = std::make_unique<ServedModel>(name, std::to_string(v), std::move(module), fn, settings,
                                                    std::move(inputs), std::move(outputs), batcher);
        log("model '" + name + "' version " + std::to_string(v) + ": " + file.string() + " @" + fn +
            (settings.dynamicBatching ? ", dynamic batching up to " + std::to_string(settings.maxBatchSize) : ""));
        model->versions[v] = std::move(served);
      }
    } catch (const std::exception &e) {  // kiln::Error among them
      model->versions.clear();
      model->error = e.what();
      log("model '" + name + "' failed to load: " + model->error);
    }
    models_.push_back(std::move(model));
  }
}

Repository::~Repository() {
  drain();
  models_.clear();  // modules go before their runtimes
  runtimes_.clear();
}

std::shared_ptr<kiln::Runtime> Repository::runtimeFor(const std::vector<std::pair<std::string, std::string>> &extra) {
  std::string key;
  for (const auto &[k, v] : extra) key += k + "=" + v + "\n";
  auto it = runtimes_.find(key);
  if (it != runtimes_.end()) return it->second;
  kiln::Options opts;
  for (const auto &[k, v] : options_.runtimeOptions) opts.set(k, v);
  for (const auto &[k, v] : extra) opts.set(k, v);
  auto runtime = std::make_shared<kiln::Runtime>(opts);
  runtimes_[key] = runtime;
  return runtime;
}

ServedModel *Repository::find(const std::string &name, const std::string &version, ServeError *error) {
  const RepositoryModel *m = model(name);
  if (!m) {
    *error = {ErrorKind::not_found, "unknown model '" + name + "'"};
    return nullptr;
  }
  if (!m->error.empty()) {
    *error = {ErrorKind::unavailable, "model '" + name + "' is not ready: " + m->error};
    return nullptr;
  }
  if (version.empty()) return m->versions.rbegin()->second.get();
  auto it = isVersion(version) ? m->versions.find(std::stoll(version)) : m->versions.end();
  if (it == m->versions.end()) {
    *error = {ErrorKind::not_found, "model '" + name + "' has no version '" + version + "' being served"};
    return nullptr;
  }
  return it->second.get();
}

const RepositoryModel *Repository::model(const std::string &name) const {
  for (const auto &m : models_)
    if (m->name == name) return m.get();
  return nullptr;
}

std::vector<std::string> Repository::versionsServed(const std::string &name) const {
  std::vector<std::string> versions;
  if (const RepositoryModel *m = model(name))
    for (const auto &[v, served] : m->versions) versions.push_back(std::to_string(v));
  return versions;
}

bool Repository::allLoaded() const {
  return std::all_of(models_.begin(), models_.end(), [](const auto &m) { return m->error.empty(); });
}

int Repository::prewarm(const std::function<void(const std::string &)> &report) {
  int failed = 0;
  for (const auto &m : models_) {
    if (!m->error.empty()) ++failed;
    for (const auto &[v, served] : m->versions) {
      try {
        for (const std::string &line : served->prewarm()) report(line);
      } catch (const std::exception &e) {
        report(m->name + " v" + std::to_string(v) + ": failed: " + e.what());
        ++failed;
      }
    }
  }
  return failed;
}

void Repository::stopTaking() {
  for (const auto &m : models_)
    for (auto &[v, served] : m->versions) served->stopTaking();
}

void Repository::drain() {
  stopTaking();
  for (const auto &m : models_)
    for (auto &[v, served] : m->versions) served->drain();
}

}  // namespace kiln::serve
