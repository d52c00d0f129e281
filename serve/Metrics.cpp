#include "serve/Metrics.h"

#include <sstream>

namespace kiln::serve {

namespace {
struct Family {
  const char *name, *type, *help;
};

std::string labels(const ServedModel &m) { return "model=\"" + m.name() + "\",version=\"" + m.version() + "\""; }
}  // namespace

std::string prometheusText(const Repository &repository) {
  std::ostringstream out;
  std::vector<const ServedModel *> served;
  for (const auto &m : repository.models())
    for (const auto &[v, s] : m->versions) served.push_back(s.get());
  auto family = [&](const Family &f, auto value) {
    out << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " " << f.type << "\n";
    for (const ServedModel *m : served) out << f.name << "{" << labels(*m) << "} " << value(*m) << "\n";
  };
  family({"kiln_request_success_total", "counter", "Requests answered with results"},
         [](const ServedModel &m) { return m.counters().success.load(); });
  family({"kiln_request_failure_total", "counter", "Requests answered with an error (rejected ones included)"},
         [](const ServedModel &m) { return m.counters().failure.load(); });
  family({"kiln_request_rejected_total", "counter", "Requests refused because the queue was full or the server stopping"},
         [](const ServedModel &m) { return m.counters().rejected.load(); });
  family({"kiln_inference_count_total", "counter", "Batch items inferred (a request of batch 4 counts 4)"},
         [](const ServedModel &m) { return m.counters().inferences.load(); });
  family({"kiln_execution_count_total", "counter", "kiln calls run (merged requests count once)"},
         [](const ServedModel &m) { return m.counters().executions.load(); });
  family({"kiln_request_duration_us_total", "counter", "Time from request received to answer, summed"},
         [](const ServedModel &m) { return m.counters().requestUs.load(); });
  family({"kiln_queue_duration_us_total", "counter", "Time requests waited before their call started, summed"},
         [](const ServedModel &m) { return m.counters().queueUs.load(); });
  family({"kiln_compute_duration_us_total", "counter", "Time from call start to results, summed over requests"},
         [](const ServedModel &m) { return m.counters().computeUs.load(); });
  family({"kiln_requests_in_flight", "gauge", "Requests accepted and not yet answered"},
         [](const ServedModel &m) { return m.counters().inFlight.load(); });
  family({"kiln_model_compiled_signatures", "gauge", "Distinct input types the model holds code for"},
         [](const ServedModel &m) { return m.module().stats().functions_compiled; });
  family({"kiln_model_pipeline_runs_total", "counter", "MLIR compiles run for the model (0 when all came from the cache)"},
         [](const ServedModel &m) { return m.module().stats().pipeline_runs; });
  const char *batch = "kiln_batch_size";
  out << "# HELP " << batch << " Batch sizes of the kiln calls run\n# TYPE " << batch << " histogram\n";
  for (const ServedModel *m : served) {
    uint64_t cumulative = 0;
    for (int b = 0; b < ModelCounters::kBatchBuckets; ++b) {
      cumulative += m->counters().batchSizes[b].load();
      std::string le = b + 1 == ModelCounters::kBatchBuckets ? "+Inf" : std::to_string(1 << b);
      out << batch << "_bucket{" << labels(*m) << ",le=\"" << le << "\"} " << cumulative << "\n";
    }
    out << batch << "_count{" << labels(*m) << "} " << cumulative << "\n";
    out << batch << "_sum{" << labels(*m) << "} " << m->counters().inferences.load() << "\n";
  }
  std::vector<kiln::CacheStats> runtimes;  // read once per runtime, for every family below
  for (const std::shared_ptr<kiln::Runtime> &r : repository.runtimes()) runtimes.push_back(r->cacheStats());
  auto runtimeFamily = [&](const Family &f, auto value) {
    out << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " " << f.type << "\n";
    for (size_t i = 0; i < runtimes.size(); ++i) out << f.name << "{runtime=\"" << i << "\"} " << value(runtimes[i]) << "\n";
  };
  runtimeFamily({"kiln_compiles_total", "counter", "Functions compiled (not found in memory or on disk)"},
                [](const kiln::CacheStats &s) { return s.compiles; });
  runtimeFamily({"kiln_compile_failures_total", "counter", "Compiles that failed"},
                [](const kiln::CacheStats &s) { return s.compile_failures; });
  runtimeFamily({"kiln_compile_ms_total", "counter", "Milliseconds spent compiling"},
                [](const kiln::CacheStats &s) { return s.compile_ms; });
  runtimeFamily({"kiln_compile_cache_memory_hits_total", "counter", "Compiled functions found in memory"},
                [](const kiln::CacheStats &s) { return s.memory_hits; });
  runtimeFamily({"kiln_compile_cache_disk_hits_total", "counter", "Compiled functions loaded from the persistent cache"},
                [](const kiln::CacheStats &s) { return s.disk_hits; });
  return out.str();
}

}  // namespace kiln::serve
