// A program's weights: the constants weight hoisting turns into arguments,
// as tensors bound to compiled code (zero-copy from dense_resource blobs and
// MLIR's attribute storage, one tensor per attribute), for a compile or a
// warm start from the disk cache.
#include "lowering/graph/Program.h"
#include "runtime/Error.h"
#include "lowering/graph/ProgramImpl.h"
#include "lowering/graph/Passes.h"
#include "lowering/graph/OpView.h"
#include "lowering/ir/IRText.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"


#include <cstring>
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>

using namespace mlir;

namespace kiln::lowering {

llvm::Expected<Tensor> Program::Impl::weightTensor(ElementsAttr value, const TensorType &type) {
  auto it = weights.find(value.getAsOpaquePointer());
  if (it != weights.end()) return it->second;
  size_t elemSize = dtypeSize(type.dtype);
  size_t bytes = type.byteSize();
  Tensor t;
  auto fromRaw = [&](const char *data, size_t size) -> llvm::Error {
    if (size != bytes)
      return error(ErrorCode::kInvalidArgument, "weight of type %s holds %zu bytes, expected %zu",
                                     type.str().c_str(), size, bytes);
    if (reinterpret_cast<uintptr_t>(data) % elemSize == 0) {  // zero-copy
      t = Tensor::wrap(type.dtype, type.shape, const_cast<char *>(data), ctx);
      return llvm::Error::success();
    }
    auto copy = Tensor::allocate(type.dtype, type.shape, "a weight");
    if (!copy) return copy.takeError();
    t = std::move(*copy);
    if (bytes) std::memcpy(t.rawData(), data, bytes);
    return llvm::Error::success();
  };
  if (auto r = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = r.getRawHandle().getBlob();
    if (!blob)
      return error(ErrorCode::kInvalidArgument, "dense_resource '%s' has no data in the module",
                                     r.getRawHandle().getKey().str().c_str());
    ArrayRef<char> data = blob->getData();
    if (auto err = fromRaw(data.data(), data.size())) return std::move(err);
  } else if (auto d = dyn_cast<DenseElementsAttr>(value)) {
    auto allocate = [&]() -> llvm::Error {
      auto a = Tensor::allocate(type.dtype, type.shape, "a constant");
      if (!a) return a.takeError();
      t = std::move(*a);
      return llvm::Error::success();
    };
    if (type.dtype == DType::i1) {
      if (auto err = allocate()) return std::move(err);
      uint8_t *out = t.data<uint8_t>();
      for (bool b : d.getValues<bool>()) *out++ = b;
    } else if (d.isSplat()) {
      ArrayRef<char> one = d.getRawData();
      if (auto err = allocate()) return std::move(err);
      for (int64_t i = 0; i < t.numElements(); ++i)
        std::memcpy(t.data<char>() + i * elemSize, one.data(), elemSize);
    } else {
      ArrayRef<char> data = d.getRawData();
      if (auto err = fromRaw(data.data(), data.size())) return std::move(err);
    }
  } else {
    return error(ErrorCode::kUnsupported, "unsupported constant attribute kind for a weight");
  }
  weights[value.getAsOpaquePointer()] = t;
  return t;
}

llvm::Expected<std::vector<Tensor>> Program::weights(llvm::StringRef function, const WeightLayouts &layouts) {
  std::lock_guard<std::shared_mutex> lock(impl->mu);
  // Weights found without a specialization (code from a cache): the key's
  // hoisted module, kept for one, is not needed.
  impl->hoistedPlain.erase(function);
  auto fn = impl->module->lookupSymbol<func::FuncOp>(function);
  if (!fn || !fn.isPublic() || fn.isExternal())
    return error(ErrorCode::kInvalidArgument, "no public function @%s in the module", function.str().c_str());
  std::vector<Tensor> out;
  for (const HoistedWeight &w : planHoisting(fn, kDefaultHoistMinElements, layouts).weights) {
    std::string why;
    auto type = toTensorType(w.type, why);
    if (!type) return error(ErrorCode::kInvalidArgument, "@%s: weight: %s", function.str().c_str(), why.c_str());
    auto t = impl->weightTensor(w.value, *type);
    if (!t)
      return error(ErrorCode::kInvalidArgument, "@%s: weight at %s: %s", function.str().c_str(),
                                     locationString(w.loc).c_str(),
                                     llvm::toString(t.takeError()).c_str());
    out.push_back(*t);
  }
  return out;
}

std::vector<Program::ConstantOperand> Program::constantOperands(llvm::StringRef function,
                                                                const std::set<std::string> &ops) {
  std::vector<ConstantOperand> out;
  std::lock_guard<std::shared_mutex> lock(impl->mu);
  auto fn = impl->module->lookupSymbol<func::FuncOp>(function);
  if (!fn || fn.isExternal()) return out;
  fn.walk([&](Operation *op) {
    std::string key = kernelKey(op);
    if (!ops.count(key)) return;
    KernelView view = kernelView(op);
    if (!view.whyNot.empty()) return;
    ConstantOperand c;
    c.op = std::move(key);
    std::string why;
    for (Value v : view.data) {
      auto type = toTensorType(v.getType(), why);
      if (!type) return;
      c.operandTypes.push_back(*type);
    }
    for (auto [i, v] : llvm::enumerate(view.data)) {
      ElementsAttr value;
      // Only what weight hoisting makes a weight (smaller constants are
      // the plan's own, in buffers of their own).
      if (!matchPattern(v, m_Constant(&value)) || value.getNumElements() < kDefaultHoistMinElements) continue;
      auto t = impl->weightTensor(value, c.operandTypes[i]);
      if (!t) {
        llvm::consumeError(t.takeError());  // weights() names it, when the compile asks
        continue;
      }
      ConstantOperand each = c;
      each.operand = unsigned(i);
      each.value = std::move(*t);
      out.push_back(std::move(each));
    }
  });
  return out;
}

}  // namespace kiln::lowering
