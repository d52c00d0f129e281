#include "serve/Model.h"

#include <algorithm>
#include <cstring>

namespace kiln::serve {

std::vector<TensorSpec> specsOf(const std::vector<kiln::TensorInfo> &infos) {
  std::vector<TensorSpec> specs;
  for (const kiln::TensorInfo &i : infos) {
    TensorSpec s{i.name, i.dtype, i.shape};
    for (int64_t &d : s.shape)
      if (d < 0) d = -1;
    specs.push_back(std::move(s));
  }
  return specs;
}

ServedModel::ServedModel(std::string name, std::string version, kiln::Module module, std::string function,
                         ModelSettings settings, std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs,
                         Batcher *batcher)
    : name_(std::move(name)), version_(std::move(version)), module_(std::move(module)), function_(std::move(function)),
      settings_(std::move(settings)), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {
  separable_ = module_.batchSeparable(function_);
  if (settings_.maxBatchSize > 0)
    for (const TensorSpec &in : inputs_)
      if (in.shape.empty() || (in.shape[0] != -1 && in.shape[0] < settings_.maxBatchSize))
        throw kiln::Error(kiln::Code::invalid_argument,
                          "model '" + name_ + "' has max_batch_size " + std::to_string(settings_.maxBatchSize) +
                              " but input '" + in.name + "' (shape " + shapeText(in.shape) +
                              ") has no dynamic batch dimension 0",
                          "");
  if (settings_.dynamicBatching) {
    if (settings_.maxBatchSize <= 0)
      throw kiln::Error(kiln::Code::invalid_argument,
                        "model '" + name_ + "' asks for dynamic_batching without a max_batch_size > 0", "");
    for (int p : settings_.preferredBatchSizes)
      if (p < 1 || p > settings_.maxBatchSize)
        throw kiln::Error(kiln::Code::invalid_argument,
                          "model '" + name_ + "': preferred_batch_size " + std::to_string(p) + " is outside 1.." +
                              std::to_string(settings_.maxBatchSize),
                          "");
    std::sort(settings_.preferredBatchSizes.begin(), settings_.preferredBatchSizes.end());
    batcher_ = batcher;
    if (batcher_) batcher_->add(this);
  }
}

ServedModel::~ServedModel() {
  drain();
  if (batcher_) batcher_->remove(this);
}

std::optional<ServeError> ServedModel::check(InferRequest &r, int64_t *batch) const {
  auto bad = [&](std::string m) { return ServeError{ErrorKind::invalid_argument, "model '" + name_ + "': " + m}; };
  if (r.inputs.size() != inputs_.size())
    return bad("expected " + std::to_string(inputs_.size()) + " inputs, got " + std::to_string(r.inputs.size()));
  std::vector<InputTensor> ordered(inputs_.size());
  std::vector<bool> seen(inputs_.size(), false);
  for (InputTensor &in : r.inputs) {
    size_t i = 0;
    while (i < inputs_.size() && inputs_[i].name != in.name) ++i;
    if (i == inputs_.size()) {
      std::string names;
      for (const TensorSpec &s : inputs_) names += (names.empty() ? "'" : ", '") + s.name + "'";
      return bad("unknown input '" + in.name + "' (inputs: " + names + ")");
    }
    if (seen[i]) return bad("input '" + in.name + "' given twice");
    seen[i] = true;
    const TensorSpec &spec = inputs_[i];
    if (in.dtype != spec.dtype)
      return bad("input '" + in.name + "' has datatype " + protocolName(in.dtype) + ", the model takes " +
                 protocolName(spec.dtype));
    bool fits = in.shape.size() == spec.shape.size();
    for (size_t d = 0; fits && d < in.shape.size(); ++d) fits = spec.shape[d] == -1 || spec.shape[d] == in.shape[d];
    if (!fits)
      return bad("input '" + in.name + "' has shape " + shapeText(in.shape) + ", the model takes " +
                 shapeText(spec.shape));
    std::optional<uint64_t> count = elementCount(in.shape);
    if (!count) return bad("input '" + in.name + "' has an invalid shape " + shapeText(in.shape));
    uint64_t want = *count * kiln::byteSize(in.dtype);
    if (in.bytes != want)
      return bad("input '" + in.name + "': " + std::to_string(in.bytes) + " bytes of data for shape " +
                 shapeText(in.shape) + " of " + protocolName(in.dtype) + " (" + std::to_string(want) + " expected)");
    ordered[i] = std::move(in);
  }
  r.inputs = std::move(ordered);
  *batch = 1;
  if (settings_.maxBatchSize > 0) {
    *batch = r.inputs.empty() ? 1 : r.inputs[0].shape[0];
    for (const InputTensor &in : r.inputs)
      if (in.shape[0] != *batch)
        return bad("inputs '" + r.inputs[0].name + "' and '" + in.name + "' have different batch sizes (" +
                   std::to_string(*batch) + " and " + std::to_string(in.shape[0]) + ")");
    if (*batch < 1 || *batch > settings_.maxBatchSize)
      return bad("batch size " + std::to_string(*batch) + " is outside 1.." + std::to_string(settings_.maxBatchSize));
  }
  for (const RequestedOutput &o : r.outputs) {
    bool known = std::any_of(outputs_.begin(), outputs_.end(), [&](const TensorSpec &s) { return s.name == o.name; });
    if (!known) return bad("unknown output '" + o.name + "'");
  }
  return std::nullopt;
}

void ServedModel::infer(InferRequest request, InferDone done) {
  Clock::time_point now = Clock::now();
  if (draining_.load()) {
    counters_.rejected++;
    counters_.failure++;  // (failures include rejections, as for a full queue)
    return done(ServeError{ErrorKind::unavailable, "model '" + name_ + "' is shutting down"}, {});
  }
  Pending p{std::move(request), std::move(done), 1, now};
  if (auto error = check(p.request, &p.batch)) {
    counters_.failure++;
    return p.done(std::move(error), {});
  }
  if (counters_.inFlight.fetch_add(1) >= int64_t(settings_.maxQueueSize)) {
    counters_.inFlight.fetch_sub(1);
    counters_.rejected++;
    counters_.failure++;
    return p.done(ServeError{ErrorKind::unavailable, "model '" + name_ + "' version " + version_ +
                                                         ": queue full (" + std::to_string(settings_.maxQueueSize) +
                                                         " requests waiting or running)"},
                  {});
  }
  if (batcher_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(p));
    }
    batcher_->wake();
    return;
  }
  std::vector<Pending> one;
  one.push_back(std::move(p));
  execute(std::move(one));
}

void ServedModel::finish(Pending &p, std::optional<ServeError> error, InferResponse response,
                         Clock::time_point started) {
  Clock::time_point end = Clock::now();
  auto us = [](Clock::duration d) { return uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(d).count()); };
  if (error)
    counters_.failure++;
  else
    counters_.success++;
  counters_.requestUs += us(end - p.request.received);
  counters_.queueUs += us(started - p.enqueued);
  counters_.computeUs += us(end - started);
  p.done(std::move(error), std::move(response));
  p.done = nullptr;
  p.request.payload.reset();
  if (counters_.inFlight.fetch_sub(1) == 1) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.notify_all();
  }
}

int64_t ServedModel::bucketFor(int64_t rows) const {
  if (separable_) return rows;  // kiln runs every batch size from one compile
  for (int p : settings_.preferredBatchSizes)
    if (p >= rows) return p;
  if (!settings_.preferredBatchSizes.empty()) return settings_.maxBatchSize;
  int64_t b = 1;
  while (b < rows) b *= 2;
  return std::min<int64_t>(b, settings_.maxBatchSize);
}

void ServedModel::execute(std::vector<Pending> batch) {
  Clock::time_point started = Clock::now();
  if (!batcher_) {
    std::lock_guard<std::mutex> lock(mu_);
    running_++;  // (the batcher counted its batch in takeBatch)
  }
  // Requests whose client left or whose deadline passed in the queue are answered now.
  std::vector<Pending> live;
  for (Pending &p : batch) {
    if (p.request.abandoned && p.request.abandoned())
      finish(p, ServeError{ErrorKind::cancelled, "the client went away"}, {}, started);
    else if (p.request.deadline <= started)
      finish(p, ServeError{ErrorKind::deadline_exceeded, "deadline exceeded while queued for model '" + name_ + "'"},
             {}, started);
    else
      live.push_back(std::move(p));
  }
  if (live.empty()) return executionDone();
  auto shared = std::make_shared<std::vector<Pending>>(std::move(live));
  std::vector<Pending> &ps = *shared;
  int64_t rows = 0;
  for (const Pending &p : ps) rows += p.batch;
  bool merged = ps.size() > 1 || (batcher_ && bucketFor(rows) != rows);
  int64_t padded = merged ? bucketFor(rows) : rows;
  auto failAll = [this, shared, started](const ServeError &e) {
    for (Pending &p : *shared) finish(p, e, {}, started);
    executionDone();
  };
  std::vector<kiln::Tensor> args;
  Clock::time_point deadline = Clock::time_point::max();
  for (const Pending &p : ps) deadline = std::min(deadline, p.request.deadline);
  bool hadDeadline = deadline != Clock::time_point::max();
  try {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (!merged) {
        const InputTensor &in = ps[0].request.inputs[i];
        if (in.bytes == 0) {
          args.push_back(kiln::Tensor::zeros(in.dtype, in.shape));
          continue;
        }
        std::shared_ptr<const void> keep = ps[0].request.payload;
        args.push_back(kiln::Tensor::wrapBytes(in.dtype, const_cast<uint8_t *>(in.data), in.shape, in.bytes,
                                               [keep]() mutable { keep.reset(); }));
        continue;
      }
      std::vector<int64_t> shape = ps[0].request.inputs[i].shape;
      shape[0] = padded;
      kiln::Tensor t = kiln::Tensor::zeros(ps[0].request.inputs[i].dtype, shape);
      uint8_t *out = static_cast<uint8_t *>(t.rawData());
      for (const Pending &p : ps) {
        const InputTensor &in = p.request.inputs[i];
        if (in.bytes) std::memcpy(out, in.data, in.bytes);
        out += in.bytes;
      }
      args.push_back(std::move(t));
    }
    double timeout = 0;
    if (hadDeadline)
      timeout = std::max(1e-6, std::chrono::duration<double>(deadline - started).count());
    counters_.executions++;
    counters_.inferences += uint64_t(rows);
    int bucket = 0;
    while (bucket + 1 < ModelCounters::kBatchBuckets && (int64_t(1) << bucket) < rows) ++bucket;
    counters_.batchSizes[bucket]++;
    auto call = std::make_shared<kiln::AsyncCall>(module_.callAsync(function_, args, timeout));
    call->onReady([this, call, shared, started, merged, padded, hadDeadline, failAll]() {
      std::vector<kiln::Tensor> results;
      try {
        results = call->wait();
      } catch (const kiln::Error &e) {
        return failAll(fromKiln(e, hadDeadline));
      } catch (const std::exception &e) {
        return failAll(ServeError{ErrorKind::internal, e.what()});
      }
      std::vector<std::shared_ptr<const kiln::Tensor>> tensors;
      for (kiln::Tensor &t : results) tensors.push_back(std::make_shared<const kiln::Tensor>(std::move(t)));
      if (merged)
        for (size_t o = 0; o < tensors.size(); ++o) {
          std::vector<int64_t> shape = tensors[o]->shape();
          if (shape.empty() || shape[0] != padded)
            return failAll(ServeError{ErrorKind::internal,
                                      "model '" + name_ + "': output '" + outputs_[o].name + "' has shape " +
                                          shapeText(shape) + " for a merged batch of " + std::to_string(padded) +
                                          " (dimension 0 is not the batch; turn dynamic_batching off)"});
        }
      int64_t row = 0;
      for (Pending &p : *shared) {
        InferResponse r;
        r.model = name_;
        r.version = version_;
        r.id = p.request.id;
        r.holders.assign(tensors.begin(), tensors.end());
        for (size_t o = 0; o < outputs_.size(); ++o) {
          bool wanted = p.request.outputs.empty();
          bool binary = p.request.binaryOutputs;
          for (const RequestedOutput &ro : p.request.outputs)
            if (ro.name == outputs_[o].name) wanted = true, binary = ro.binary;
          if (!wanted) continue;
          const kiln::Tensor *t = tensors[o].get();
          OutputTensor out{outputs_[o].name, t->dtype(), t->shape(), static_cast<const uint8_t *>(t->rawData()),
                           t->byteSize(), binary};
          if (merged) {
            size_t rowBytes = out.bytes / size_t(padded);
            out.data += size_t(row) * rowBytes;
            out.bytes = size_t(p.batch) * rowBytes;
            out.shape[0] = p.batch;
          }
          r.outputs.push_back(std::move(out));
        }
        row += p.batch;
        finish(p, std::nullopt, std::move(r), started);
      }
      executionDone();
    });
  } catch (const kiln::Error &e) {
    failAll(fromKiln(e, hadDeadline));
  } catch (const std::exception &e) {
    failAll(ServeError{ErrorKind::internal, e.what()});
  }
}

std::vector<ServedModel::Pending> ServedModel::takeBatch(Clock::time_point now, Clock::time_point *wake) {
  std::vector<Pending> batch;
  if (queue_.empty() || running_ >= settings_.instances) return batch;
  const Pending &front = queue_.front();
  auto sameShapes = [&](const Pending &p) {
    for (size_t i = 0; i < p.request.inputs.size(); ++i) {
      const auto &a = p.request.inputs[i].shape, &b = front.request.inputs[i].shape;
      if (!std::equal(a.begin() + 1, a.end(), b.begin() + 1, b.end())) return false;
    }
    return true;
  };
  int64_t rows = 0;
  size_t n = 0;
  bool full = false;
  for (; n < queue_.size(); ++n) {
    const Pending &p = queue_[n];
    if (!sameShapes(p) || rows + p.batch > settings_.maxBatchSize) {
      full = true;
      break;
    }
    rows += p.batch;
  }
  if (rows == settings_.maxBatchSize) full = true;
  if (!settings_.preferredBatchSizes.empty() && rows >= settings_.preferredBatchSizes.back()) full = true;
  Clock::time_point due = front.enqueued + settings_.maxQueueDelay;
  if (!full && due > now && !draining_.load()) {
    *wake = std::min(*wake, due);
    return batch;
  }
  for (size_t i = 0; i < n; ++i) {
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  running_++;
  return batch;
}

void ServedModel::executionDone() {
  Batcher *batcher = batcher_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_--;
    idle_.notify_all();
  }
  // `this` may be gone from here on (drain returned); the batcher outlives it.
  if (batcher) batcher->wake();
}

std::vector<std::string> ServedModel::prewarm() {
  std::vector<int64_t> sizes{1};
  if (settings_.dynamicBatching && !separable_) {
    for (int64_t r = 1; r <= settings_.maxBatchSize; ++r) sizes.push_back(bucketFor(r));
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  }
  std::vector<std::string> done;
  for (int64_t b : sizes) {
    std::vector<kiln::TensorInfo> infos;
    std::string text;
    bool open = false;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      std::vector<int64_t> shape = inputs_[i].shape;
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] == -1) {
          if (d == 0)
            shape[d] = b;
          else
            open = true;
        }
      text += (i ? ", " : "") + inputs_[i].name + " " + shapeText(shape);
      infos.push_back({inputs_[i].name, inputs_[i].dtype, shape});
    }
    if (open) {
      done.push_back(name_ + " v" + version_ + ": not prewarmed (an input has a dynamic dimension other than the batch)");
      break;
    }
    kiln::CompileInfo info = module_.compileInfo(function_, infos);
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f ms", info.compileMs);
    done.push_back(name_ + " v" + version_ + " (" + text + "): " +
                   (info.fromDiskCache ? std::string("from the compile cache") : "compiled in " + std::string(ms)));
  }
  return done;
}

void ServedModel::stopTaking() {
  draining_ = true;
  if (batcher_) batcher_->wake();
}

void ServedModel::drain() {
  stopTaking();
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return counters_.inFlight.load() == 0 && running_ == 0; });
}

Batcher::Batcher() : thread_([this] { loop(); }) {}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Batcher::add(ServedModel *model) {
  std::lock_guard<std::mutex> lock(mu_);
  models_.push_back(model);
}

void Batcher::remove(ServedModel *model) {
  std::lock_guard<std::mutex> lock(mu_);
  models_.erase(std::remove(models_.begin(), models_.end(), model), models_.end());
}

void Batcher::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poked_ = true;
  }
  cv_.notify_all();
}

void Batcher::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    poked_ = false;
    Clock::time_point now = Clock::now(), wake = Clock::time_point::max();
    std::vector<std::pair<ServedModel *, std::vector<ServedModel::Pending>>> ready;
    for (ServedModel *m : models_) {
      std::lock_guard<std::mutex> ml(m->mu_);
      std::vector<ServedModel::Pending> b = m->takeBatch(now, &wake);
      if (!b.empty()) ready.emplace_back(m, std::move(b));
    }
    if (!ready.empty()) {
      lock.unlock();  // a model is removed only after its drain, so it outlives its batches
      for (auto &[m, b] : ready) m->execute(std::move(b));
      lock.lock();
      continue;
    }
    if (poked_ || stop_) continue;
    if (wake == Clock::time_point::max())
      cv_.wait(lock, [&] { return poked_ || stop_; });
    else
      cv_.wait_until(lock, wake, [&] { return poked_ || stop_; });
  }
}

}  // namespace kiln::serve
