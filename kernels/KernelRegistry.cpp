#include "kernels/KernelRegistry.h"
#include "runtime/Error.h"


namespace kiln::kernels {

std::string KernelDef::nameFor(llvm::ArrayRef<TensorType> inputs) const {
  llvm::StringRef o = op;
  o.consume_front("tosa.");
  o.consume_front("custom:");
  std::string name = o.str();
  for (char &c : name)
    if (c == '.') c = '_';
  name += "_" + std::string(inputs.empty() ? "none" : dtypeName(inputs[0].dtype));
  return name + "_" + impl;
}

const KernelDef *KernelRegistry::lookup(llvm::StringRef op) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = defs_.find(op);
  return it == defs_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::ops() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto &d : defs_) out.push_back(d.first);
  return out;
}

llvm::Error KernelRegistry::add(KernelDef def) {
  if (def.op.empty() || def.impl.empty() || !def.shape || !def.compute)
    return error(ErrorCode::kInvalidArgument, "kernel for '%s': op, implementation name, shape and compute "
                 "functions are all required", def.op.c_str());
  if (!llvm::StringRef(def.op).contains('.'))
    return error(ErrorCode::kInvalidArgument, "kernel for '%s': not an op name like tosa.add or "
                 "tosa.custom:domain.name", def.op.c_str());
  std::unique_lock<std::shared_mutex> lock(mu_);
  std::string op = def.op;
  if (defs_.count(op))
    return error(ErrorCode::kInvalidArgument, "'%s' already has a kernel (%s)", op.c_str(),
                 defs_.find(op)->second.impl.c_str());
  defs_.emplace(op, std::move(def));
  return llvm::Error::success();
}

KernelRegistry &registry() {
  static KernelRegistry r;
  static const bool builtins = [] {
    registerElementwiseKernels(r);
    registerReductionKernels(r);
    registerDataMovementKernels(r);
    registerNNKernels(r);
    return true;
  }();
  (void)builtins;
  return r;
}

llvm::Expected<std::vector<Tensor>> runKernel(llvm::StringRef op, llvm::ArrayRef<Tensor> inputs,
                                              const AttrMap &attrs, HostExecutor &executor) {
  const KernelDef *def = registry().lookup(op);
  if (!def) return error(ErrorCode::kUnsupported, "no handwritten kernel for '%s'", op.str().c_str());
  std::vector<TensorType> types;
  std::vector<const void *> in;
  for (const Tensor &t : inputs) {
    types.push_back(t.type());
    in.push_back(t.rawData());
  }
  auto outTypes = def->shape(types, attrs);
  if (!outTypes) return withContext(outTypes.takeError(), op.str() + ": ");
  std::vector<Tensor> outputs;
  std::vector<void *> out;
  for (const TensorType &t : *outTypes) {
    outputs.push_back(Tensor::empty(t.dtype, t.shape));
    out.push_back(outputs.back().rawData());
  }
  KernelArgs args{in, types, out, *outTypes, attrs, executor};
  if (auto err = def->compute(args)) return withContext(std::move(err), op.str() + ": ");
  return outputs;
}

}  // namespace kiln::kernels
