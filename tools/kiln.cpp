// kiln: the command-line driver.
//   kiln run <file.mlir | built-in model> [--function NAME] [--input ARG=FILE.npy]...
//            [--output DIR] [--iterations N]
//   kiln models            list the built-in models
#include "jit/Compiler.h"
#include "runtime/Kiln.h"
#include "runtime/Npy.h"
#include "tools/models/BuiltinModels.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "kiln: error: %s\n", msg.c_str());
  return 1;
}

/// Deterministic inputs: floats in [-1, 1), integers in [0, 8), booleans.
kiln::Tensor randomTensor(const kiln::TensorType &type, unsigned seed) {
  kiln::Tensor t = kiln::Tensor::empty(type.dtype, type.shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = real(rng);
    int iv = int(rng() % 8);
    switch (type.dtype) {
    case kiln::DType::f32: t.data<float>()[i] = v; break;
    case kiln::DType::f64: t.data<double>()[i] = v; break;
    case kiln::DType::f16: t.data<uint16_t>()[i] = kiln::floatToHalf(v); break;
    case kiln::DType::bf16: t.data<uint16_t>()[i] = kiln::floatToBf16(v); break;
    case kiln::DType::i64: t.data<int64_t>()[i] = iv; break;
    case kiln::DType::i32: t.data<int32_t>()[i] = iv; break;
    case kiln::DType::i16: t.data<int16_t>()[i] = int16_t(iv); break;
    case kiln::DType::i8: t.data<int8_t>()[i] = int8_t(iv); break;
    case kiln::DType::u8: t.data<uint8_t>()[i] = uint8_t(iv); break;
    case kiln::DType::i1: t.data<uint8_t>()[i] = iv & 1; break;
    }
  }
  return t;
}

int runCommand(const std::string &model, const std::string &function,
               const std::vector<std::string> &inputSpecs, const std::string &outputDir,
               int iterations, int optLevel) {
  auto rt = kiln::Runtime::create({.threads = 0, .cacheDir = "", .optLevel = optLevel});
  if (!rt) return fail(llvm::toString(rt.takeError()));
  llvm::Expected<std::unique_ptr<kiln::Module>> module = [&] {
    if (const auto *m = kiln::models::findBuiltinModel(model))
      return (*rt)->loadModule(m->mlir, "builtin:" + m->name);
    if (!llvm::sys::fs::exists(model))
      return llvm::Expected<std::unique_ptr<kiln::Module>>(llvm::createStringError(
          "'%s' is neither a file nor a built-in model (built-in: mlp, cnn)", model.c_str()));
    return (*rt)->loadModuleFromFile(model);
  }();
  if (!module) return fail(llvm::toString(module.takeError()));
  const kiln::FunctionSignature *sig = (*module)->signature(function);
  if (!sig) {
    std::string names;
    for (auto &f : (*module)->functions()) names += (names.empty() ? "@" : ", @") + f.name;
    return fail("no public function @" + function + " in '" + model + "' (it has: " +
                (names.empty() ? "none" : names) + ")");
  }

  // Inputs: ARG=FILE.npy where ARG is a position or an argument name.
  std::vector<kiln::Tensor> inputs(sig->args.size());
  for (const std::string &spec : inputSpecs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return fail("--input '" + spec + "' is not ARG=FILE.npy");
    std::string arg = spec.substr(0, eq), file = spec.substr(eq + 1);
    int index = -1;
    for (size_t i = 0; i < sig->args.size(); ++i)
      if (sig->args[i].name == arg || std::to_string(i) == arg) index = int(i);
    if (index < 0)
      return fail("--input " + arg + ": @" + function + " has no argument '" + arg + "'");
    auto t = kiln::readNpy(file);
    if (!t) return fail("--input " + arg + ": " + llvm::toString(t.takeError()));
    inputs[index] = *t;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].valid()) continue;
    kiln::TensorType type = sig->args[i].type;
    for (int64_t &d : type.shape)
      if (d == kiln::kDynamic) d = 1;
    inputs[i] = randomTensor(type, unsigned(1234 + i));
    std::printf("input %zu%s: random tensor<%s>%s\n", i,
                sig->args[i].name.empty() ? "" : (" (" + sig->args[i].name + ")").c_str(),
                type.str().c_str(), sig->args[i].type.isStatic() ? "" : " (dynamic dims set to 1)");
  }

  std::vector<kiln::TensorType> types;
  for (auto &t : inputs) types.push_back(t.type());
  if (auto err = kiln::lowering::checkInputs(*sig, types))
    return fail(llvm::toString(std::move(err)));

  auto t0 = Clock::now();
  auto result = (*module)->call(function, inputs);
  double firstMs = msSince(t0);
  if (!result) return fail(llvm::toString(result.takeError()));
  auto compiled = (*module)->compile(function, types);
  if (!compiled) return fail(llvm::toString(compiled.takeError()));

  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    auto t1 = Clock::now();
    auto r = (*module)->call(function, inputs);
    times.push_back(msSince(t1));
    if (!r) return fail(llvm::toString(r.takeError()));
  }
  std::sort(times.begin(), times.end());

  for (size_t i = 0; i < result->size(); ++i) {
    const kiln::Tensor &out = (*result)[i];
    double sum = 0, absSum = 0;
    for (int64_t j = 0; j < out.numElements(); ++j) {
      double v = out.elementAsDouble(j);
      sum += v;
      absSum += std::abs(v);
    }
    std::printf("output %zu: tensor<%s> sum=%.6g abs_sum=%.6g first=[", i, out.type().str().c_str(),
                sum, absSum);
    for (int64_t j = 0; j < std::min<int64_t>(out.numElements(), 8); ++j)
      std::printf("%s%.6g", j ? ", " : "", out.elementAsDouble(j));
    std::printf("%s]\n", out.numElements() > 8 ? ", ..." : "");
  }
  std::printf("first call (compile + run): %.2f ms  [", firstMs);
  const auto &stages = (*compiled)->stats.stages;
  for (size_t i = 0; i < stages.size(); ++i)
    std::printf("%s%s %.1f", i ? ", " : "", stages[i].stage.c_str(), stages[i].ms);
  std::printf("]\n");
  if (!times.empty())
    std::printf("steady state: median %.4f ms, min %.4f ms over %d iterations\n",
                times[times.size() / 2], times.front(), iterations);

  if (!outputDir.empty()) {
    if (auto ec = llvm::sys::fs::create_directories(outputDir))
      return fail("cannot create output directory '" + outputDir + "': " + ec.message());
    for (size_t i = 0; i < result->size(); ++i) {
      llvm::SmallString<256> path(outputDir);
      llvm::sys::path::append(path, "out" + std::to_string(i) + ".npy");
      if (auto err = kiln::writeNpy(path, (*result)[i])) return fail(llvm::toString(std::move(err)));
      std::printf("wrote %s\n", path.c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"kiln: a JIT-compiling ML runtime (MLIR -> LLVM ORC)"};
  app.require_subcommand(1);

  std::string model, function = "main", outputDir;
  std::vector<std::string> inputs;
  int iterations = 10, optLevel = 3;
  CLI::App *run = app.add_subcommand("run", "compile on first call and run a model");
  run->add_option("model", model, "MLIR file (text or bytecode) or built-in model (mlp, cnn)")
      ->required();
  run->add_option("--function,-f", function, "function to call")->capture_default_str();
  run->add_option("--input,-i", inputs, "ARG=FILE.npy (ARG: position or argument name)");
  run->add_option("--output,-o", outputDir, "write outputs as DIR/out0.npy, ...");
  run->add_option("--iterations,-n", iterations, "timed calls after the first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--opt-level,-O", optLevel, "LLVM optimization level")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();

  CLI::App *list = app.add_subcommand("models", "list the built-in models");

  CLI11_PARSE(app, argc, argv);
  if (*run) return runCommand(model, function, inputs, outputDir, iterations, optLevel);
  if (*list) {
    for (const std::string &name : kiln::models::builtinModelNames())
      std::printf("%-6s %s\n", name.c_str(),
                  kiln::models::findBuiltinModel(name)->description.c_str());
    return 0;
  }
  return 0;
}
