// Profiles a model: 20 calls recorded, a Chrome trace (open it in Perfetto)
// and an HTML report written, the per-kernel table printed.
//   profile OUT_DIR [MODEL]
#include <kiln/kiln.hpp>

#include <cstdio>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: profile OUT_DIR [MODEL]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string model = argc > 2 ? argv[2] : KILN_SAMPLE_MODEL;
  try {
    kiln::Runtime runtime;
    kiln::Module m = runtime.load(model);
    std::vector<kiln::Tensor> args;
    for (const kiln::TensorInfo &in : m.inputs()) args.push_back(kiln::Tensor::zeros(in.dtype, in.shape));
    kiln::Profiler profiler(runtime);
    for (int i = 0; i < 20; ++i) m.call(args);
    std::string table = profiler.stop(dir + "/trace.json", dir + "/report.html");
    std::printf("%s", table.c_str());
    std::printf("wrote %s/trace.json and %s/report.html\n", dir.c_str(), dir.c_str());
    return 0;
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "profile: %s error: %s\n", e.codeName(), e.what());
    return 1;
  }
}
