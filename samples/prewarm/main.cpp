// Prewarm in one process, run warm in another: the first process compiles
// the model into a persistent compile cache; the second loads the compiled
// code from it and must never compile.
//   prewarm compile CACHE_DIR [MODEL]   compiles main for its declared input types
//   prewarm run CACHE_DIR [MODEL]       calls it with a read-only cache; fails if it compiled
#include <kiln/kiln.hpp>

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  if (argc < 3 || (std::strcmp(argv[1], "compile") && std::strcmp(argv[1], "run"))) {
    std::fprintf(stderr, "usage: prewarm compile|run CACHE_DIR [MODEL]\n");
    return 2;
  }
  const bool compile = std::strcmp(argv[1], "compile") == 0;
  const std::string model = argc > 3 ? argv[3] : KILN_SAMPLE_MODEL;
  try {
    kiln::Options options;
    options.set("cache_dir", argv[2]).set("cache", compile ? "rw" : "ro");
    kiln::Runtime runtime(options);
    kiln::Module m = runtime.load(model);
    std::vector<kiln::TensorInfo> inputs = m.inputs();
    if (compile) {
      m.prewarm("", inputs);
      kiln::CacheStats s = runtime.cacheStats();
      std::printf("compiled %llu function(s) into %s (%.0f ms)\n", (unsigned long long)s.compiles, argv[2],
                  s.compile_ms);
      return 0;
    }
    std::vector<kiln::Tensor> args;
    for (const kiln::TensorInfo &in : inputs) args.push_back(kiln::Tensor::zeros(in.dtype, in.shape));
    m.call(args);
    kiln::CacheStats s = runtime.cacheStats();
    std::printf("ran warm: %llu loaded from the disk cache, %llu compiled, %llu MLIR pipelines\n",
                (unsigned long long)s.disk_hits, (unsigned long long)s.compiles,
                (unsigned long long)m.stats().pipeline_runs);
    return s.compiles == 0 && s.disk_hits >= 1 && m.stats().pipeline_runs == 0 ? 0 : 1;
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "prewarm: %s error: %s\n", e.codeName(), e.what());
    return 1;
  }
}
