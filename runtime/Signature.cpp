#include "runtime/Signature.h"
#include "runtime/Error.h"

namespace kiln {

llvm::Error checkInputs(const FunctionSignature &sig, llvm::ArrayRef<TensorType> inputs) {
  if (!sig.unsupported.empty())
    return errorAt(ErrorCode::kUnsupported, sig.location, "function @%s cannot be called by kiln: %s",
                   sig.name.c_str(), sig.unsupported.c_str());
  if (inputs.size() != sig.args.size())
    return error(ErrorCode::kInvalidArgument, "function @%s takes %zu inputs, got %zu", sig.name.c_str(),
                 sig.args.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ArgumentInfo &a = sig.args[i];
    std::string label = "argument " + std::to_string(i) +
                        (a.name.empty() ? std::string() : " ('" + a.name + "')");
    const TensorType &got = inputs[i];
    bool ok = got.dtype == a.type.dtype && got.shape.size() == a.type.shape.size();
    for (size_t d = 0; ok && d < got.shape.size(); ++d)
      ok = a.type.shape[d] == kDynamic || a.type.shape[d] == got.shape[d];
    if (!ok)
      return error(ErrorCode::kInvalidArgument, "function @%s %s: expected tensor<%s>, got tensor<%s>",
                   sig.name.c_str(), label.c_str(), a.type.str().c_str(), got.str().c_str());
  }
  return llvm::Error::success();
}

std::string functionNames(llvm::ArrayRef<FunctionSignature> functions) {
  std::string names;
  for (const FunctionSignature &f : functions) names += (names.empty() ? "@" : ", @") + f.name;
  return names.empty() ? "none" : names;
}

llvm::Error noSuchFunction(llvm::StringRef function, llvm::ArrayRef<FunctionSignature> functions) {
  return error(ErrorCode::kInvalidArgument, "no public function @%s in the module (it has: %s)",
               function.str().c_str(), functionNames(functions).c_str());
}

}  // namespace kiln
