#include "kernels/KernelRegistry.h"
#include "ops/OpTable.h"
#include "runtime/Error.h"

#include "llvm/ADT/STLExtras.h"

#include <new>


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
  if (it == defs_.end()) return nullptr;
  for (const KernelDef &d : it->second)
    if (d.dtypes.empty()) return &d;
  return nullptr;
}

llvm::Expected<KernelChoice> KernelRegistry::select(llvm::StringRef op, llvm::ArrayRef<TensorType> inputs,
                                                    const AttrMap &attrs) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = defs_.find(op);
  if (it == defs_.end()) return error(ErrorCode::kUnsupported, "no kernel");
  llvm::Error last = error(ErrorCode::kUnsupported, "no kernel for %s",
                           inputs.empty() ? "no operands" : std::string(dtypeName(inputs[0].dtype)).c_str());
  for (const KernelDef &d : it->second) {
    if (!d.dtypes.empty() && (inputs.empty() || !llvm::is_contained(d.dtypes, inputs[0].dtype))) continue;
    auto results = d.shape(inputs, attrs);
    if (!results) {
      llvm::consumeError(std::move(last));
      last = results.takeError();
      continue;
    }
    llvm::consumeError(std::move(last));
    return KernelChoice{&d, std::move(*results), d.nameFor(inputs)};
  }
  return std::move(last);
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
  if (!ops::lookupOp(def.op))
    return error(ErrorCode::kInvalidArgument, "kernel for '%s': the op is not in kiln's op table (ops/Ops.def)",
                 def.op.c_str());
  std::unique_lock<std::shared_mutex> lock(mu_);
  std::deque<KernelDef> &kernels = defs_[def.op];
  for (const KernelDef &k : kernels) {
    if (def.dtypes.empty() && k.dtypes.empty())
      return error(ErrorCode::kInvalidArgument, "'%s' already has a kernel (%s)", def.op.c_str(), k.impl.c_str());
    for (DType d : def.dtypes)
      if (llvm::is_contained(k.dtypes, d))
        return error(ErrorCode::kInvalidArgument, "'%s' already has a kernel for %s (%s)", def.op.c_str(),
                     std::string(dtypeName(d)).c_str(), k.impl.c_str());
  }
  if (def.dtypes.empty()) kernels.push_back(std::move(def));
  else kernels.push_front(std::move(def));
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

llvm::Error KernelDef::run(const KernelArgs &args) const {
  try {
    return compute(args);
  } catch (const std::bad_alloc &) {
    return error(ErrorCode::kResourceExhausted, "%s (%s): out of memory for the kernel's temporary buffers",
                 op.c_str(), impl.c_str());
  }
}

llvm::Expected<std::vector<Tensor>> runKernel(llvm::StringRef op, llvm::ArrayRef<Tensor> inputs,
                                              const AttrMap &attrs, HostExecutor &executor) {
  std::vector<TensorType> types;
  std::vector<const void *> in;
  for (const Tensor &t : inputs) {
    types.push_back(t.type());
    in.push_back(t.rawData());
  }
  auto choice = registry().select(op, types, attrs);
  if (!choice) {
    Status s = toStatus(choice.takeError());
    if (s.message == "no kernel") s.message = "no handwritten kernel for '" + op.str() + "'";
    else s.message = op.str() + ": " + s.message;
    return makeError(std::move(s));
  }
  std::vector<Tensor> outputs;
  std::vector<void *> out;
  for (const TensorType &t : choice->results) {
    auto o = Tensor::allocate(t.dtype, t.shape, op.str() + "'s result");
    if (!o) return o.takeError();
    outputs.push_back(std::move(*o));
    out.push_back(outputs.back().rawData());
  }
  KernelArgs args{in, types, out, choice->results, attrs, executor};
  if (auto err = choice->def->run(args)) return withContext(std::move(err), op.str() + ": ");
  return outputs;
}

}  // namespace kiln::kernels
