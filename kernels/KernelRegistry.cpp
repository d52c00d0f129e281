#include "kernels/KernelRegistry.h"

#include <sstream>

namespace kiln::kernels {

namespace {
llvm::Error missing(llvm::StringRef name, const char *kind) {
  return llvm::createStringError("attribute '%s' (%s) is missing or has another type",
                                 name.str().c_str(), kind);
}
}  // namespace

llvm::Expected<int64_t> AttrMap::getInt(llvm::StringRef name) const {
  auto it = attrs_.find(name.str());
  if (it == attrs_.end() || !std::holds_alternative<int64_t>(it->second)) return missing(name, "integer");
  return std::get<int64_t>(it->second);
}
llvm::Expected<double> AttrMap::getFloat(llvm::StringRef name) const {
  auto it = attrs_.find(name.str());
  if (it != attrs_.end() && std::holds_alternative<double>(it->second)) return std::get<double>(it->second);
  if (it != attrs_.end() && std::holds_alternative<int64_t>(it->second))
    return double(std::get<int64_t>(it->second));
  return missing(name, "float");
}
llvm::Expected<std::vector<int64_t>> AttrMap::getInts(llvm::StringRef name) const {
  auto it = attrs_.find(name.str());
  if (it == attrs_.end() || !std::holds_alternative<std::vector<int64_t>>(it->second))
    return missing(name, "integer list");
  return std::get<std::vector<int64_t>>(it->second);
}
llvm::Expected<std::string> AttrMap::getString(llvm::StringRef name) const {
  auto it = attrs_.find(name.str());
  if (it == attrs_.end() || !std::holds_alternative<std::string>(it->second)) return missing(name, "string");
  return std::get<std::string>(it->second);
}
int64_t AttrMap::getIntOr(llvm::StringRef name, int64_t fallback) const {
  auto v = getInt(name);
  if (!v) {
    llvm::consumeError(v.takeError());
    return fallback;
  }
  return *v;
}
double AttrMap::getFloatOr(llvm::StringRef name, double fallback) const {
  auto v = getFloat(name);
  if (!v) {
    llvm::consumeError(v.takeError());
    return fallback;
  }
  return *v;
}

std::string AttrMap::str() const {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (const auto &[k, v] : attrs_) {
    os << (first ? "" : ", ") << k << " = ";
    first = false;
    if (auto *i = std::get_if<int64_t>(&v)) os << *i;
    else if (auto *d = std::get_if<double>(&v)) os << *d;
    else if (auto *s = std::get_if<std::string>(&v)) os << '"' << *s << '"';
    else {
      os << "[";
      const auto &l = std::get<std::vector<int64_t>>(v);
      for (size_t j = 0; j < l.size(); ++j) os << (j ? ", " : "") << l[j];
      os << "]";
    }
  }
  os << "}";
  return os.str();
}

const KernelDef *KernelRegistry::lookup(llvm::StringRef op) const {
  auto it = defs_.find(op);
  return it == defs_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::ops() const {
  std::vector<std::string> out;
  for (const auto &d : defs_) out.push_back(d.first);
  return out;
}

void KernelRegistry::add(KernelDef def) {
  std::string op = def.op;
  defs_[op] = std::move(def);
}

const KernelRegistry &registry() {
  static const KernelRegistry r = [] {
    KernelRegistry reg;
    registerElementwiseKernels(reg);
    registerReductionKernels(reg);
    registerDataMovementKernels(reg);
    registerNNKernels(reg);
    return reg;
  }();
  return r;
}

llvm::Expected<std::vector<Tensor>> runKernel(llvm::StringRef op, llvm::ArrayRef<Tensor> inputs,
                                              const AttrMap &attrs, HostExecutor &executor) {
  const KernelDef *def = registry().lookup(op);
  if (!def) return llvm::createStringError("no handwritten kernel for '%s'", op.str().c_str());
  std::vector<TensorType> types;
  std::vector<const void *> in;
  for (const Tensor &t : inputs) {
    types.push_back(t.type());
    in.push_back(t.rawData());
  }
  auto outTypes = def->shape(types, attrs);
  if (!outTypes)
    return llvm::createStringError("%s: %s", op.str().c_str(),
                                   llvm::toString(outTypes.takeError()).c_str());
  std::vector<Tensor> outputs;
  std::vector<void *> out;
  for (const TensorType &t : *outTypes) {
    outputs.push_back(Tensor::empty(t.dtype, t.shape));
    out.push_back(outputs.back().rawData());
  }
  KernelArgs args{in, types, out, *outTypes, attrs, executor};
  if (auto err = def->compute(args))
    return llvm::createStringError("%s: %s", op.str().c_str(), llvm::toString(std::move(err)).c_str());
  return outputs;
}

}  // namespace kiln::kernels
