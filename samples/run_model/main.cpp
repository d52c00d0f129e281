// Loads a model file, prints its inputs and outputs, and calls it on inputs
// filled with 0.1, 0.2, ... (by input name), printing the first values of
// each result.
//   run_model [MODEL.mlir]   (default: the samples' classifier)
#include <kiln/kiln.hpp>

#include <cstdio>

static std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + (d == kiln::kDynamic ? std::string("?") : std::to_string(d));
  return s;
}

int main(int argc, char **argv) {
  const std::string path = argc > 1 ? argv[1] : KILN_SAMPLE_MODEL;
  try {
    std::printf("kiln %s\n", kiln::version().c_str());
    kiln::Runtime runtime;
    kiln::Module model = runtime.load(path);
    std::vector<std::pair<std::string, kiln::Tensor>> inputs;
    for (const kiln::TensorInfo &in : model.inputs()) {
      std::printf("input  %-10s %s %s\n", in.name.c_str(), std::string(kiln::name(in.dtype)).c_str(),
                  shapeText(in.shape).c_str());
      std::vector<int64_t> shape = in.shape;
      for (int64_t &d : shape)
        if (d == kiln::kDynamic) d = 1;  // pick 1 for dynamic dims
      kiln::Tensor t = kiln::Tensor::zeros(in.dtype, shape);
      if (in.dtype == kiln::DType::f32)
        for (int64_t i = 0; i < t.elementCount(); ++i) t.data<float>()[i] = 0.1f * float(i % 10 + 1);
      inputs.emplace_back(in.name, t);
    }
    std::vector<kiln::TensorInfo> outputs = model.outputs();
    std::vector<kiln::Tensor> results = model.call("", inputs);  // compiles on this first call
    for (size_t i = 0; i < results.size(); ++i) {
      std::printf("output %-10s %s:", outputs[i].name.c_str(), shapeText(results[i].shape()).c_str());
      if (results[i].dtype() == kiln::DType::f32)
        for (int64_t j = 0; j < results[i].elementCount() && j < 6; ++j) std::printf(" %.4f", results[i].data<float>()[j]);
      std::printf("\n");
    }
    return 0;
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "run_model: %s error: %s%s%s\n", e.codeName(), e.what(),
                 e.location().empty() ? "" : " at ", e.location().c_str());
    return 1;
  }
}
