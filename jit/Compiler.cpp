#include "jit/Compiler.h"
#include "runtime/Clock.h"

#include "kernels/KernelRegistry.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <chrono>

namespace kiln::jit {

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
                  llvm::ArrayRef<TensorType> inputTypes, const lowering::PlacementOptions &placement) {
  auto t0 = Clock::now();
  auto out = std::make_shared<CompiledFunction>();
  out->function = function.str();
  std::set<std::string> forceKernel;
  while (true) {
    out->stats.stages.clear();
    out->objects.clear();
    out->plan = ExecPlan();
    auto spec = program.specialize(function, inputTypes, out->stats.stages);
    if (!spec) return spec.takeError();
    auto partStart = Clock::now();
    auto part = program.partition(**spec, placement, forceKernel);
    if (!part) return part.takeError();
    out->stats.stages.push_back({"partition", msSince(partStart)});
    out->inputTypes = (*part)->inputTypes;
    out->resultTypes = (*part)->resultTypes;
    out->weights = (*part)->weights;

    ExecPlan &plan = out->plan;
    for (const lowering::PlanValue &v : (*part)->values) {
      ExecPlan::Value pv;
      pv.kind = ExecPlan::Value::Kind(v.kind);
      pv.type = v.type;
      pv.index = v.index;
      if (v.kind == lowering::PlanValue::kConstant)
        pv.constant.assign(static_cast<const char *>(v.constant.rawData()), v.constant.byteSize());
      plan.values.push_back(std::move(pv));
    }
    plan.results = (*part)->results;
    std::set<std::string> failedOps;
    std::string failure;
    for (lowering::PlanStep &s : (*part)->steps) {
      ExecPlan::Step ps;
      ps.jit = s.kind == lowering::PlanStep::kJit;
      ps.name = s.name;
      ps.inputs = s.inputs;
      ps.outputs = s.outputs;
      if (!ps.jit) {
        ps.op = s.op;
        ps.attrs = s.attrs;
        plan.steps.push_back(std::move(ps));
        continue;
      }
      ps.ops = s.ops;
      llvm::Error err = llvm::Error::success();
      for (const std::string &op : s.ops)
        if (placement.failClustersWith.count(op) && !err)
          err = llvm::createStringError("injected failure (op %s)", op.c_str());
      llvm::LLVMContext llvmContext;
      llvm::SmallVector<char, 0> object;
      if (!err) {
        auto llvmModule = program.lowerToLLVMIR(*s.cluster, llvmContext, out->stats.stages);
        if (!llvmModule) {
          err = llvmModule.takeError();
        } else {
          codegen::ObjectTimes objTimes;
          auto obj = codegen_->emitObject(**llvmModule, &objTimes);
          if (!obj) {
            err = obj.takeError();
          } else {
            out->stats.stages.push_back({"llvm-opt", objTimes.optimizeMs});
            out->stats.stages.push_back({"llvm-codegen", objTimes.emitMs});
            object = std::move(*obj);
          }
        }
      }
      if (err) {
        std::string msg = llvm::toString(std::move(err));
        failure = "@" + function.str() + ": JIT compilation of " + s.name + " (" +
                  llvm::join(s.ops, ", ") + ") failed: " + msg;
        failedOps.insert(s.ops.begin(), s.ops.end());
        break;
      }
      ps.object = int(out->objects.size());
      ps.symbol = lowering::kEntryName.str();
      out->objects.push_back(std::move(object));
      plan.steps.push_back(std::move(ps));
    }
    if (failure.empty()) {
      plan.summary = (*part)->summary.str();
      for (const std::string &note : (*part)->summary.notes) plan.summary += "\n  note: " + note;
      break;
    }
    // Fall back: the failed cluster's ops go to kernels, if that changes anything.
    size_t before = forceKernel.size();
    forceKernel.insert(failedOps.begin(), failedOps.end());
    if (forceKernel.size() == before) return llvm::createStringError("%s", failure.c_str());
    ++out->stats.jitFallbacks;
    out->stats.warnings.push_back(failure + "; its ops fall back to handwritten kernels");
  }
  for (const auto &o : out->objects) out->stats.objectBytes += o.size();
  if (auto err = link(*out)) return std::move(err);
  out->stats.totalMs = msSince(t0);
  return out;
}

llvm::Error Compiler::link(CompiledFunction &out) {
  auto loadStart = Clock::now();
  out.code_.clear();
  for (size_t i = 0; i < out.objects.size(); ++i) {
    auto code = engine_->load(out.objects[i], out.function + "." + std::to_string(i));
    if (!code)
      return llvm::createStringError("@%s: loading object %zu failed: %s", out.function.c_str(), i,
                                     llvm::toString(code.takeError()).c_str());
    out.code_.push_back(std::move(*code));
  }
  out.entries_.assign(out.plan.steps.size(), nullptr);
  for (size_t s = 0; s < out.plan.steps.size(); ++s) {
    const ExecPlan::Step &step = out.plan.steps[s];
    if (!step.jit) continue;
    if (step.object < 0 || step.object >= int(out.code_.size()))
      return llvm::createStringError("@%s: step %s names object %d of %zu", out.function.c_str(),
                                     step.name.c_str(), step.object, out.code_.size());
    auto entry = out.code_[step.object]->lookup(step.symbol);
    if (!entry)
      return llvm::createStringError("@%s: %s", out.function.c_str(),
                                     llvm::toString(entry.takeError()).c_str());
    out.entries_[s] = reinterpret_cast<CompiledFunction::EntryFn>(*entry);
  }
  out.stats.stages.push_back({"jit-load", msSince(loadStart)});
  return buildExecutable(out);
}

llvm::Error Compiler::buildExecutable(CompiledFunction &out) {
  const ExecPlan &plan = out.plan;
  ExecutableBuilder b;
  std::vector<int> buf(plan.values.size(), -1);
  // Inputs in position order, then outputs in result order, then the rest.
  std::vector<int> inputs;
  for (size_t v = 0; v < plan.values.size(); ++v)
    if (plan.values[v].kind == ExecPlan::Value::kInput) inputs.push_back(int(v));
  std::sort(inputs.begin(), inputs.end(),
            [&](int a, int c) { return plan.values[a].index < plan.values[c].index; });
  if (inputs.size() != out.inputTypes.size())
    return llvm::createStringError("@%s: the plan has %zu inputs, the function %zu", out.function.c_str(),
                                   inputs.size(), out.inputTypes.size());
  for (int v : inputs) buf[v] = b.addInput(plan.values[v].type);
  std::vector<std::pair<int, int>> copies;  // (value, output buffer)
  for (int r : plan.results) {
    const ExecPlan::Value &v = plan.values[r];
    if (v.kind == ExecPlan::Value::kIntermediate && buf[r] < 0) buf[r] = b.addOutput(v.type);
    else copies.push_back({r, b.addOutput(v.type)});
  }
  for (size_t v = 0; v < plan.values.size(); ++v) {
    if (buf[v] >= 0) continue;
    const ExecPlan::Value &val = plan.values[v];
    switch (val.kind) {
    case ExecPlan::Value::kWeight:
      if (val.index < 0 || val.index >= int(out.weights.size()) || out.weights[val.index].type() != val.type)
        return llvm::createStringError("@%s: weight %d does not match the plan", out.function.c_str(), val.index);
      buf[v] = b.addConstant(out.weights[val.index]);
      break;
    case ExecPlan::Value::kConstant:
      if (val.constant.size() != val.type.byteSize())
        return llvm::createStringError("@%s: constant of the plan has %zu bytes, tensor<%s> needs %zu",
                                       out.function.c_str(), val.constant.size(), val.type.str().c_str(),
                                       val.type.byteSize());
      buf[v] = b.addConstant(Tensor::fromHost(val.type.dtype, val.type.shape, val.constant.data()));
      break;
    case ExecPlan::Value::kIntermediate:
      buf[v] = b.addIntermediate(val.type);
      break;
    case ExecPlan::Value::kInput:
      break;
    }
  }
  auto ids = [&](const std::vector<int> &values) {
    llvm::SmallVector<int, 8> out2;
    for (int v : values) out2.push_back(buf[v]);
    return out2;
  };
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const ExecPlan::Step &step = plan.steps[s];
    StepFn fn;
    if (step.jit) {
      CompiledFunction::EntryFn entry = out.entries_[s];
      // The step keeps its code loaded while any execution may still run it.
      fn = [entry, code = out.code_[step.object]](const StepContext &ctx) {
        llvm::SmallVector<void *, 16> buffers;
        for (unsigned i = 0; i < ctx.numInputs(); ++i) buffers.push_back(ctx.in(i));
        for (unsigned i = 0; i < ctx.numOutputs(); ++i) buffers.push_back(ctx.out(i));
        entry(buffers.data());
        return llvm::Error::success();
      };
    } else {
      const kernels::KernelDef *def = kernels::registry().lookup(step.op);
      if (!def)
        return llvm::createStringError("@%s: no handwritten kernel '%s' in this build", out.function.c_str(),
                                       step.op.c_str());
      std::vector<TensorType> inTypes, outTypes;
      for (int v : step.inputs) inTypes.push_back(plan.values[v].type);
      for (int v : step.outputs) outTypes.push_back(plan.values[v].type);
      fn = [def, attrs = step.attrs, inTypes, outTypes](const StepContext &ctx) -> llvm::Error {
        llvm::SmallVector<const void *, 8> in;
        llvm::SmallVector<void *, 4> outs;
        for (unsigned i = 0; i < ctx.numInputs(); ++i) in.push_back(ctx.in(i));
        for (unsigned i = 0; i < ctx.numOutputs(); ++i) outs.push_back(ctx.out(i));
        return def->compute(kernels::KernelArgs{in, inTypes, outs, outTypes, attrs, ctx.executor()});
      };
    }
    std::string name = step.jit ? "jit:@" + out.function + "." + step.name : "kernel:" + step.op;
    auto added = b.addStep(name, step.jit ? StepKind::kJit : StepKind::kKernel, std::move(fn),
                           ids(step.inputs), ids(step.outputs));
    if (!added) return added.takeError();
  }
  for (auto [value, output] : copies) {
    auto added = b.addStep("copy", StepKind::kCopy, copyStep(plan.values[value].type.byteSize()),
                           {buf[value]}, {output});
    if (!added) return added.takeError();
  }
  auto exe = b.build();
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
  out->plan = code.plan;
  out->code_ = code.code_;
  out->entries_ = code.entries_;
  if (auto err = buildExecutable(*out)) return std::move(err);
  return out;
}

llvm::Expected<std::shared_ptr<CompiledFunction>>
Compiler::load(llvm::StringRef function, std::vector<TensorType> inputTypes,
               std::vector<TensorType> resultTypes, std::vector<Tensor> weights, ExecPlan plan,
               std::vector<llvm::SmallVector<char, 0>> objects) {
  auto t0 = Clock::now();
  auto out = std::make_shared<CompiledFunction>();
  out->function = function.str();
  out->inputTypes = std::move(inputTypes);
  out->resultTypes = std::move(resultTypes);
  out->weights = std::move(weights);
  out->plan = std::move(plan);
  out->objects = std::move(objects);
  for (const auto &o : out->objects) out->stats.objectBytes += o.size();
  out->stats.fromObject = true;
  if (auto err = link(*out)) return std::move(err);
  out->stats.totalMs = msSince(t0);
  return out;
}

}  // namespace kiln::jit
