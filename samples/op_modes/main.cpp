// Per-op placement: runs the model with every op on generated (JIT) code,
// then every op on handwritten kernels, then matmuls on kernels and the rest
// JIT; prints where each placement put the ops and checks that all agree.
//   op_modes [MODEL]
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>

int main(int argc, char **argv) {
  const std::string model = argc > 1 ? argv[1] : KILN_SAMPLE_MODEL;
  try {
    std::vector<std::vector<float>> firsts;
    for (const char *modes : {"*=jit", "*=kernel", "tosa.matmul=kernel,*=jit"}) {
      kiln::Options options;
      options.set("op_mode", modes).set("cache", "off");
      kiln::Runtime runtime(options);
      kiln::Module m = runtime.load(model);
      std::vector<kiln::TensorInfo> inputs = m.inputs();
      std::vector<kiln::Tensor> args;
      for (const kiln::TensorInfo &in : inputs) {
        kiln::Tensor t = kiln::Tensor::zeros(in.dtype, in.shape);
        if (in.dtype == kiln::DType::f32)
          for (int64_t i = 0; i < t.elementCount(); ++i) t.data<float>()[i] = std::sin(float(i));
        args.push_back(t);
      }
      std::vector<kiln::Tensor> out = m.call(args);
      kiln::CompileInfo info = m.compileInfo("", inputs);
      std::printf("%-26s placement: %s\n", modes, info.placement.c_str());
      firsts.push_back(out[0].values<float>());
    }
    for (size_t k = 1; k < firsts.size(); ++k)
      for (size_t i = 0; i < firsts[0].size(); ++i)
        if (std::fabs(firsts[k][i] - firsts[0][i]) > 1e-4f * (1 + std::fabs(firsts[0][i]))) {
          std::fprintf(stderr, "op_modes: placement %zu differs at %zu: %g vs %g\n", k, i, firsts[k][i], firsts[0][i]);
          return 1;
        }
    std::printf("all placements agree\n");
    return 0;
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "op_modes: %s error: %s\n", e.codeName(), e.what());
    return 1;
  }
}
