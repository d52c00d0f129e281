// A model repository laid out as Triton's, so one moves between the two:
//   DIR/<model>/config.pbtxt            optional: Triton's model configuration
//   DIR/<model>/<version>/model.mlir    or model.mlirbc; versions are integers
// Without a configuration, names, dtypes and shapes come from the model's
// signature and batching is off. The version policy (latest, all, specific)
// chooses the versions served side by side; latest is the default. A model's
// configuration `parameters` set kiln's runtime options for it (op_mode,
// compile_policy, ...; see kiln_c.h), and `function` names the function served.
#pragma once

#include "serve/Model.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace inference {
class ModelConfig;
}

namespace kiln::serve {

/// A served model's configuration in Triton's form (what ModelConfig and
/// GET .../config answer): names, datatypes, dims, batching.
void describeConfig(const ServedModel &model, inference::ModelConfig *config);

struct RepositoryOptions {
  std::string dir;
  std::vector<std::pair<std::string, std::string>> runtimeOptions;  // kiln options for every model
  size_t maxQueueSize = 128;  // per model version, when its configuration sets none
};

/// One model of the repository: the versions served, or why it is not.
struct RepositoryModel {
  std::string name;
  std::string error;  // why it failed to load (empty when loaded)
  std::map<int64_t, std::unique_ptr<ServedModel>> versions;
};

class Repository {
public:
  /// Scans and loads every model (a model that fails is kept with its error;
  /// `log` receives one line per model and version). Throws kiln::Error when
  /// the directory itself cannot be read.
  Repository(const RepositoryOptions &options, Batcher *batcher,
             const std::function<void(const std::string &)> &log);
  ~Repository();

  /// A served version: `version` empty = the latest. Sets `error` to the
  /// protocol's answer when there is none.
  ServedModel *find(const std::string &model, const std::string &version, ServeError *error);
  const RepositoryModel *model(const std::string &name) const;
  /// The versions of `name` being served, oldest first (model metadata lists them).
  std::vector<std::string> versionsServed(const std::string &name) const;
  const std::vector<std::unique_ptr<RepositoryModel>> &models() const { return models_; }
  bool allLoaded() const;
  /// Compiles (or loads from the persistent cache) what every served version
  /// needs first (ServedModel::prewarm), one line per signature or failure
  /// to `report`; returns the models that failed to load or prewarm.
  int prewarm(const std::function<void(const std::string &)> &report);
  /// Stops taking requests everywhere (503 / UNAVAILABLE).
  void stopTaking();
  /// stopTaking(), then waits for the requests in flight.
  void drain();
  /// The runtimes models run on (one per distinct set of parameters).
  std::vector<std::shared_ptr<kiln::Runtime>> runtimes() const {
    std::vector<std::shared_ptr<kiln::Runtime>> r;
    for (const auto &[k, v] : runtimes_) r.push_back(v);
    return r;
  }

private:
  std::shared_ptr<kiln::Runtime> runtimeFor(const std::vector<std::pair<std::string, std::string>> &extra);
  RepositoryOptions options_;
  std::map<std::string, std::shared_ptr<kiln::Runtime>> runtimes_;
  std::vector<std::unique_ptr<RepositoryModel>> models_;
};

/// Whether `name` may name a model (letters, digits, '_', '-', '.'; not "."
/// or ".."; at most 128 characters): no path escapes the repository.
bool validModelName(const std::string &name);

}  // namespace kiln::serve
