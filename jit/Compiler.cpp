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

  auto loadStart = Clock::now();
  auto code = engine_->load(out->object, function);
  if (!code)
    return llvm::createStringError("@%s: loading the object failed: %s", function.str().c_str(),
                                   llvm::toString(code.takeError()).c_str());
  auto entry = (*code)->lookup(lowering::kEntryName);
  if (!entry)
    return llvm::createStringError("@%s: %s", function.str().c_str(),
                                   llvm::toString(entry.takeError()).c_str());
  out->code_ = std::move(*code);
  out->entry_ = reinterpret_cast<CompiledFunction::EntryFn>(*entry);
  out->stats.stages.push_back({"jit-load", msSince(loadStart)});
  out->stats.totalMs = msSince(t0);
  return out;
}

void CompiledFunction::run(llvm::ArrayRef<Tensor> inputs, llvm::ArrayRef<Tensor> outputs) const {
  llvm::SmallVector<void *, 16> buffers;
  buffers.reserve(inputs.size() + weights.size() + outputs.size());
  for (const Tensor &t : inputs) buffers.push_back(t.rawData());
  for (const Tensor &t : weights) buffers.push_back(t.rawData());
  for (const Tensor &t : outputs) buffers.push_back(t.rawData());
  entry_(buffers.data());
}

llvm::Expected<std::vector<Tensor>> CompiledFunction::call(llvm::ArrayRef<Tensor> inputs) const {
  if (inputs.size() != inputTypes.size())
    return llvm::createStringError("@%s takes %zu inputs, got %zu", function.c_str(),
                                   inputTypes.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].type() != inputTypes[i])
      return llvm::createStringError("@%s argument %zu: compiled for tensor<%s>, got tensor<%s>",
                                     function.c_str(), i, inputTypes[i].str().c_str(),
                                     inputs[i].type().str().c_str());
  std::vector<Tensor> outputs;
  outputs.reserve(resultTypes.size());
  for (const TensorType &t : resultTypes) outputs.push_back(Tensor::empty(t.dtype, t.shape));
  run(inputs, outputs);
  return outputs;
}

}  // namespace kiln::jit
