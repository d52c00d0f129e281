// A served model: one version of one model of the repository, its inputs and
// outputs as the protocol shows them, a bounded queue of requests, and (when
// its configuration asks) dynamic batching: requests merged along dimension 0
// up to the max batch size within a max queue delay, run as one kiln call,
// and their outputs split back. Requests run on kiln's executor through
// asynchronous calls; no thread waits for one.
#pragma once

#include "serve/Protocol.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace kiln::serve {

struct TensorSpec {
  std::string name;
  kiln::DType dtype = kiln::DType::f32;
  std::vector<int64_t> shape;  // -1 where dynamic
};

struct ModelSettings {
  int maxBatchSize = 0;        // > 0: dimension 0 of every input is the batch, at most this
  bool dynamicBatching = false;
  std::vector<int> preferredBatchSizes;  // bucket sizes (empty: powers of two up to the max)
  std::chrono::microseconds maxQueueDelay{0};
  int instances = 1;           // batches of a dynamic-batching model run at once
  size_t maxQueueSize = 128;   // requests accepted and not yet answered, beyond which 503
};

/// Counters of one served model (Prometheus, serve/Metrics.h).
struct ModelCounters {
  std::atomic<uint64_t> success{0}, failure{0}, rejected{0};
  std::atomic<uint64_t> inferences{0}, executions{0};  // items, kiln calls
  std::atomic<uint64_t> requestUs{0}, queueUs{0}, computeUs{0};
  std::atomic<int64_t> inFlight{0};  // requests accepted, not yet answered: what the queue bound counts
  static constexpr int kBatchBuckets = 8;                  // 1, 2, 4, ..., 64, more
  std::atomic<uint64_t> batchSizes[kBatchBuckets] = {};   // executions by batch size
};

class Batcher;

class ServedModel {
public:
  /// Throws kiln::Error when the configuration does not fit the function.
  ServedModel(std::string name, std::string version, kiln::Module module, std::string function,
              ModelSettings settings, std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs,
              Batcher *batcher);
  ~ServedModel();

  const std::string &name() const { return name_; }
  const std::string &version() const { return version_; }
  const std::vector<TensorSpec> &inputs() const { return inputs_; }
  const std::vector<TensorSpec> &outputs() const { return outputs_; }
  const ModelSettings &settings() const { return settings_; }
  const ModelCounters &counters() const { return counters_; }
  kiln::Module &module() { return module_; }
  const kiln::Module &module() const { return module_; }
  const std::string &function() const { return function_; }

  /// Checks `request` against the model and runs it; `done` is called once,
  /// possibly before infer returns. Never throws.
  void infer(InferRequest request, InferDone done);
  /// Compiles (or loads from the persistent cache) what the first requests
  /// need: batch 1 and, with dynamic batching, each bucket size. Returns what
  /// it did, one line per signature.
  std::vector<std::string> prewarm();
  /// Stops taking requests (503 / UNAVAILABLE); those accepted still run.
  void stopTaking();
  /// stopTaking(), then waits for the requests accepted to be answered.
  void drain();

private:
  friend class Batcher;
  struct Pending {
    InferRequest request;
    InferDone done;
    int64_t batch = 1;
    Clock::time_point enqueued;
  };
  /// Puts the request's inputs in the model's order and checks them.
  std::optional<ServeError> check(InferRequest &request, int64_t *batch) const;
  void execute(std::vector<Pending> batch);
  void finish(Pending &p, std::optional<ServeError> error, InferResponse response, Clock::time_point started);
  int64_t bucketFor(int64_t rows) const;
  /// Under mu_: a batch to run now (empty if none), and when to look again.
  std::vector<Pending> takeBatch(Clock::time_point now, Clock::time_point *wake);
  /// The last thing an execution does with `this`.
  void executionDone();

  std::string name_, version_;
  kiln::Module module_;
  std::string function_;
  ModelSettings settings_;
  std::vector<TensorSpec> inputs_, outputs_;
  bool separable_ = false;  // requests may be merged with no padding (kiln's batch analysis)
  ModelCounters counters_;
  std::atomic<bool> draining_{false};
  std::mutex mu_;
  std::condition_variable idle_;
  std::deque<Pending> queue_;
  int running_ = 0;  // executions (kiln calls) not finished
  Batcher *batcher_ = nullptr;
};

/// The thread that forms batches for every model with dynamic batching.
class Batcher {
public:
  Batcher();
  ~Batcher();
  void add(ServedModel *model);
  void remove(ServedModel *model);
  void wake();

private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ServedModel *> models_;
  bool stop_ = false, poked_ = false;
  std::thread thread_;
};

/// Pads `shape` with the batch for the model's metadata: -1 in front when
/// the model batches.
std::vector<TensorSpec> specsOf(const std::vector<kiln::TensorInfo> &infos);

}  // namespace kiln::serve
