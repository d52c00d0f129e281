#include "lowering/graph/TypeIdCheck.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln::lowering {

const std::string &mlirTypeIdMismatch() {
  static const std::string mismatch = [] {
    mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
    context.loadDialect<mlir::arith::ArithDialect>();
    mlir::OpBuilder b(&context);
    mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(b.getUnknownLoc());
    b.setInsertionPointToEnd(module->getBody());
    auto c = mlir::arith::ConstantOp::create(b, b.getUnknownLoc(), b.getF32FloatAttr(1.0f));
    std::string what;
    auto expect = [&](bool ok, const char *check) {
      if (!ok) what += std::string(what.empty() ? "" : ", ") + check;
    };
    // A trait (named differently by GCC and Clang), the matcher built on it,
    // and an interface.
    expect(c->hasTrait<mlir::OpTrait::ConstantLike>(), "arith.constant has no ConstantLike trait");
    expect(mlir::matchPattern(c.getResult(), mlir::m_Constant()), "m_Constant() does not match arith.constant");
    expect(mlir::isa<mlir::MemoryEffectOpInterface>(c.getOperation()),
           "arith.constant has no MemoryEffectOpInterface");
    return what;
  }();
  return mismatch;
}

}  // namespace kiln::lowering
