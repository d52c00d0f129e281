#include "jit/Compiler.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <chrono>

namespace kiln::jit {
namespace {
using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

llvm::Expected<std::unique_ptr<Compiler>> Compiler::create(codegen::CodegenOptions options) {
  std::unique_ptr<Compiler> c(new Compiler());
  auto cg = codegen::HostCodegen::create(options);
  if (!cg) return cg.takeError();
  c->codegen_ = std::move(*cg);
  auto engine = JitEngine::create();
  if (!engine) return engine.takeError();
  c->engine_ = std::move(*engine);
  return std::move(c);
}

llvm::Expected<std::shared_ptr<CompiledFunction>>
Compiler::compile(lowering::Program &program, llvm::StringRef function,
                  llvm::ArrayRef<TensorType> inputTypes) {
  auto t0 = Clock::now();
  auto out = std::make_shared<CompiledFunction>();
  out->function = function.str();
  auto spec = program.specialize(function, inputTypes, out->stats.stages);
  if (!spec) return spec.takeError();
  out->inputTypes = (*spec)->inputTypes;
  out->resultTypes = (*spec)->resultTypes;
  out->weights = (*spec)->weights;

  llvm::LLVMContext llvmContext;
  auto llvmModule = program.lowerToLLVMIR(**spec, llvmContext, out->stats.stages);
  if (!llvmModule) return llvmModule.takeError();

  codegen::ObjectTimes objTimes;
  auto object = codegen_->emitObject(**llvmModule, &objTimes);
  if (!object)
    return llvm::createStringError("@%s: code generation failed: %s", function.str().c_str(),
                                   llvm::toString(object.takeError()).c_str());
  out->stats.stages.push_back({"llvm-opt", objTimes.optimizeMs});
  out->stats.stages.push_back({"llvm-codegen", objTimes.emitMs});
  out->object = std::move(*object);
  out->stats.objectBytes = out->object.size();

  if (auto err = link(*out, lowering::kEntryName)) return std::move(err);
  out->stats.totalMs = msSince(t0);
  return out;
}

llvm::Error Compiler::link(CompiledFunction &out, llvm::StringRef entrySymbol) {
  auto loadStart = Clock::now();
  auto code = engine_->load(out.object, out.function);
  if (!code)
    return llvm::createStringError("@%s: loading the object failed: %s", out.function.c_str(),
                                   llvm::toString(code.takeError()).c_str());
  auto entry = (*code)->lookup(entrySymbol);
  if (!entry)
    return llvm::createStringError("@%s: %s", out.function.c_str(),
                                   llvm::toString(entry.takeError()).c_str());
  out.code_ = std::move(*code);
  out.entry_ = reinterpret_cast<CompiledFunction::EntryFn>(*entry);
  out.stats.stages.push_back({"jit-load", msSince(loadStart)});
  return buildExecutable(out);
}

llvm::Error Compiler::buildExecutable(CompiledFunction &out) {
  // The executable: one JIT step reading inputs and weights, writing outputs.
  ExecutableBuilder builder;
  llvm::SmallVector<int, 8> stepInputs, stepOutputs;
  for (const TensorType &t : out.inputTypes) stepInputs.push_back(builder.addInput(t));
  for (const Tensor &w : out.weights) stepInputs.push_back(builder.addConstant(w));
  for (const TensorType &t : out.resultTypes) stepOutputs.push_back(builder.addOutput(t));
  CompiledFunction::EntryFn entryFn = out.entry_;
  auto step = builder.addStep(
      "jit:@" + out.function, StepKind::kJit,
      // The step keeps the code loaded while any execution may still run it.
      [entryFn, code = out.code_](const StepContext &ctx) {
        llvm::SmallVector<void *, 16> buffers;
        for (unsigned i = 0; i < ctx.numInputs(); ++i) buffers.push_back(ctx.in(i));
        for (unsigned i = 0; i < ctx.numOutputs(); ++i) buffers.push_back(ctx.out(i));
        entryFn(buffers.data());
        return llvm::Error::success();
      },
      stepInputs, stepOutputs);
  if (!step) return step.takeError();
  auto exe = builder.build();
  if (!exe) return exe.takeError();
  out.executable = std::move(*exe);
  return llvm::Error::success();
}

llvm::Expected<std::shared_ptr<CompiledFunction>>
Compiler::bind(const CompiledFunction &code, std::vector<Tensor> weights) {
  if (weights.size() != code.weights.size())
    return llvm::createStringError("@%s: the code takes %zu weights, got %zu", code.function.c_str(),
                                   code.weights.size(), weights.size());
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].type() != code.weights[i].type())
      return llvm::createStringError("@%s: weight %zu: the code takes tensor<%s>, got tensor<%s>",
                                     code.function.c_str(), i, code.weights[i].type().str().c_str(),
                                     weights[i].type().str().c_str());
  auto out = std::make_shared<CompiledFunction>();
  out->function = code.function;
  out->inputTypes = code.inputTypes;
  out->resultTypes = code.resultTypes;
  out->weights = std::move(weights);
  out->stats = code.stats;
  out->code_ = code.code_;
  out->entry_ = code.entry_;
  if (auto err = buildExecutable(*out)) return std::move(err);
  return out;
}

llvm::Expected<std::shared_ptr<CompiledFunction>>
Compiler::load(llvm::StringRef function, std::vector<TensorType> inputTypes,
               std::vector<TensorType> resultTypes, std::vector<Tensor> weights,
               llvm::ArrayRef<char> object, llvm::StringRef entrySymbol) {
  auto t0 = Clock::now();
  auto out = std::make_shared<CompiledFunction>();
  out->function = function.str();
  out->inputTypes = std::move(inputTypes);
  out->resultTypes = std::move(resultTypes);
  out->weights = std::move(weights);
  out->object.assign(object.begin(), object.end());
  out->stats.objectBytes = out->object.size();
  out->stats.fromObject = true;
  if (auto err = link(*out, entrySymbol)) return std::move(err);
  out->stats.totalMs = msSince(t0);
  return out;
}

}  // namespace kiln::jit
