//===- GuardTraps.cpp - no trap or stray access in generated code ---------===//
//
// kiln-guard-traps: makes generated code safe on any input data. Before
// bufferization, for every
//   - integer division or remainder: a zero divisor reports a fault, and the
//     division runs on 1 instead (no SIGFPE); INT_MIN / -1 divides by 1 too,
//     which wraps to INT_MIN as the kernels do;
//   - tensor.extract / tensor.insert (gather, table, ... after tosa-to-linalg)
//     and slices at dynamic offsets (scatter's rows): an index outside the
//     tensor reports a fault, and the access uses index 0 instead (no stray
//     read or write).
//   - cf.assert (exporters' shape and value checks): a false condition
//     reports a fault with the assert's message; the assert goes away;
//   - shifts by an amount outside [0, bits): 0 for left and logical right
//     shifts, the sign for arithmetic right shifts (as the kernels give);
//   - float-to-integer conversions: NaN becomes the largest integer, as
//     tosa.cast's lowering and the kernels give (LLVM leaves it undefined).
// A fault calls `kiln_report_fault(site)`; the runtime turns it into an error
// naming the op and its location once the step returns. The sites' messages
// are left in the module attribute `kiln.fault_sites`.
//
//===----------------------------------------------------------------------===//
#include "lowering/guards/Passes.h"
#include "lowering/ir/IRText.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNGUARDTRAPS
#include "lowering/guards/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// The op's source: the TOSA op it came from, by its location.
std::string siteText(Operation *op, llvm::StringRef what) { return locationString(op->getLoc()) + ": " + what.str(); }

struct GuardTraps : impl::KilnGuardTrapsBase<GuardTraps> {
  void runOnOperation() override {
    module = getOperation();
    ctx = module.getContext();
    b = OpBuilder(ctx);
    sites.clear();
    report = nullptr;
    llvm::SmallVector<Operation *> divisions, accesses, slices, floatToInt, shifts;
    llvm::SmallVector<cf::AssertOp> asserts;
    module.walk([&](Operation *op) {
      if (auto a = dyn_cast<cf::AssertOp>(op)) asserts.push_back(a);
      if (isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp, arith::FloorDivSIOp,
              arith::CeilDivSIOp, arith::CeilDivUIOp>(op) &&
          isa<IntegerType>(op->getResult(0).getType()))
        divisions.push_back(op);
      else if (isa<tensor::ExtractOp, tensor::InsertOp>(op))
        accesses.push_back(op);
      else if (isa<tensor::ExtractSliceOp, tensor::InsertSliceOp>(op))
        slices.push_back(op);
      else if (isa<arith::FPToSIOp, arith::FPToUIOp>(op) && isa<IntegerType>(op->getResult(0).getType()))
        floatToInt.push_back(op);
      else if (isa<arith::ShLIOp, arith::ShRUIOp, arith::ShRSIOp>(op) && isa<IntegerType>(op->getResult(0).getType()))
        shifts.push_back(op);
    });
    for (Operation *op : shifts) guardShift(op);
    for (Operation *op : floatToInt) guardFloatToInt(op);
    for (cf::AssertOp a : asserts) guardAssert(a);
    for (Operation *op : divisions) guardDivision(op);
    for (Operation *op : accesses) guardAccess(op);
    for (Operation *op : slices) guardSlice(op);
    if (!sites.empty()) module->setAttr(kFaultSitesAttr, ArrayAttr::get(ctx, sites));
  }

private:
  /// Calls the fault report (declared on first use) with a new site's id
  /// where `bad` holds.
  void reportFault(OpBuilder &at, Location loc, Value bad, std::string message) {
    if (!report) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(module.getBody());
      report = func::FuncOp::create(b, module.getLoc(), kFaultSymbol, b.getFunctionType({b.getI64Type()}, {}));
      report.setPrivate();
    }
    int64_t site = int64_t(sites.size());
    sites.push_back(StringAttr::get(ctx, message));
    auto ifOp = scf::IfOp::create(at, loc, bad, /*withElseRegion=*/false);
    OpBuilder then = ifOp.getThenBodyBuilder();
    Value id = arith::ConstantIntOp::create(then, loc, site, 64);
    func::CallOp::create(then, loc, report, ValueRange{id});
  }

  /// Shift amounts outside [0, bits) (poison in LLVM, undefined in TOSA):
  /// left and logical right shifts give 0, arithmetic right shifts the sign.
  void guardShift(Operation *op) {
    auto type = cast<IntegerType>(op->getResult(0).getType());
    unsigned bits = type.getWidth();
    Value amount = op->getOperand(1);
    APInt constant;
    if (matchPattern(amount, m_ConstantInt(&constant)) && constant.ult(bits)) return;
    Location loc = op->getLoc();
    b.setInsertionPoint(op);
    Value width = arith::ConstantIntOp::create(b, loc, type, bits);
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, amount, width);
    if (isa<arith::ShRSIOp>(op)) {
      Value last = arith::ConstantIntOp::create(b, loc, type, bits - 1);
      op->setOperand(1, arith::SelectOp::create(b, loc, inRange, amount, last));
      return;
    }
    b.setInsertionPointAfter(op);
    Value zero = arith::ConstantIntOp::create(b, loc, type, 0);
    Value safe = arith::SelectOp::create(b, loc, inRange, op->getResult(0), zero);
    op->getResult(0).replaceAllUsesExcept(safe, safe.getDefiningOp());
  }

  /// NaN converts to the largest integer (LLVM's fptosi of NaN is poison;
  /// tosa.cast's lowering and the kernels saturate NaN to the maximum).
  void guardFloatToInt(Operation *op) {
    Location loc = op->getLoc();
    b.setInsertionPointAfter(op);
    Value x = op->getOperand(0);
    Value isNaN = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
    auto type = cast<IntegerType>(op->getResult(0).getType());
    APInt largest = isa<arith::FPToSIOp>(op) ? APInt::getSignedMaxValue(type.getWidth())
                                             : APInt::getMaxValue(type.getWidth());
    Value big = arith::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, largest));
    Value safe = arith::SelectOp::create(b, loc, isNaN, big, op->getResult(0));
    op->getResult(0).replaceAllUsesExcept(safe, safe.getDefiningOp());
  }

  /// An assertion reports its message where it fails, instead of aborting.
  void guardAssert(cf::AssertOp a) {
    Location loc = a.getLoc();
    b.setInsertionPoint(a);
    Value failed = arith::XOrIOp::create(b, loc, a.getArg(), arith::ConstantIntOp::create(b, loc, 1, 1));
    reportFault(b, loc, failed, siteText(a, "assertion failed: " + a.getMsg().str()));
    a.erase();
  }

  /// Division by zero reports a fault and divides by 1; signed INT_MIN / -1
  /// wraps.
  void guardDivision(Operation *op) {
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    auto type = cast<IntegerType>(rhs.getType());
    bool isSigned = isa<arith::DivSIOp, arith::RemSIOp, arith::FloorDivSIOp, arith::CeilDivSIOp>(op);
    APInt divisor;
    if (matchPattern(rhs, m_ConstantInt(&divisor)) && !divisor.isZero() && !(isSigned && divisor.isAllOnes()))
      return;  // a constant that cannot trap
    Location loc = op->getLoc();
    b.setInsertionPoint(op);
    Value zero = arith::ConstantIntOp::create(b, loc, type, 0);
    Value one = arith::ConstantIntOp::create(b, loc, type, 1);
    Value isZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rhs, zero);
    reportFault(b, loc, isZero, siteText(op, "integer division by zero"));
    Value unsafe = isZero;
    if (isSigned) {  // INT_MIN / -1 overflows: divide by 1 (wraps to INT_MIN)
      Value min = arith::ConstantIntOp::create(b, loc, type, APInt::getSignedMinValue(type.getWidth()).getSExtValue());
      Value minusOne = arith::ConstantIntOp::create(b, loc, type, -1);
      Value overflow = arith::AndIOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lhs, min),
                                             arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rhs, minusOne));
      unsafe = arith::OrIOp::create(b, loc, isZero, overflow);
    }
    op->setOperand(1, arith::SelectOp::create(b, loc, unsafe, one, rhs));
  }

  /// tensor.extract / insert at an index out of range report a fault and
  /// read or write index 0.
  void guardAccess(Operation *op) {
    Value tensor = isa<tensor::ExtractOp>(op) ? cast<tensor::ExtractOp>(op).getTensor()
                                               : cast<tensor::InsertOp>(op).getDest();
    auto indices = isa<tensor::ExtractOp>(op) ? cast<tensor::ExtractOp>(op).getIndices()
                                               : cast<tensor::InsertOp>(op).getIndices();
    auto shaped = cast<RankedTensorType>(tensor.getType());
    unsigned firstIndex = isa<tensor::ExtractOp>(op) ? 1 : 2;
    Location loc = op->getLoc();
    b.setInsertionPoint(op);
    Value outside;
    llvm::SmallVector<std::pair<unsigned, Value>> guarded;
    for (auto [d, index] : llvm::enumerate(indices)) {
      APInt c;
      int64_t extent = shaped.getDimSize(d);
      if (matchPattern(index, m_ConstantInt(&c)) && !ShapedType::isDynamic(extent) && c.getSExtValue() >= 0 &&
          c.getSExtValue() < extent)
        continue;  // constant and in range
      Value dim = ShapedType::isDynamic(extent) ? Value(tensor::DimOp::create(b, loc, tensor, d))
                                                : Value(arith::ConstantIndexOp::create(b, loc, extent));
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value bad = arith::OrIOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, index, zero),
                                       arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, index, dim));
      outside = outside ? arith::OrIOp::create(b, loc, outside, bad).getResult() : bad;
      guarded.push_back({unsigned(firstIndex + d), arith::SelectOp::create(b, loc, bad, zero, index)});
    }
    if (!outside) return;
    reportFault(b, loc, outside, siteText(op, "index out of range"));
    for (auto [operand, safe] : guarded) op->setOperand(operand, safe);
  }

  /// Slices at dynamic offsets (scatter's rows): offset in [0, dim - size].
  void guardSlice(Operation *op) {
    auto slice = cast<OffsetSizeAndStrideOpInterface>(op);
    Value source = isa<tensor::ExtractSliceOp>(op) ? cast<tensor::ExtractSliceOp>(op).getSource()
                                                  : cast<tensor::InsertSliceOp>(op).getDest();
    auto shaped = cast<RankedTensorType>(source.getType());
    llvm::ArrayRef<int64_t> offsets = slice.getStaticOffsets(), sizes = slice.getStaticSizes();
    Location loc = op->getLoc();
    b.setInsertionPoint(op);
    Value outside;
    llvm::SmallVector<std::pair<OpOperand *, Value>> guarded;
    unsigned dynamic = 0;
    for (size_t d = 0; d < offsets.size(); ++d) {
      if (!ShapedType::isDynamic(offsets[d])) continue;
      MutableOperandRange dynOffsets = isa<tensor::ExtractSliceOp>(op)
                                           ? cast<tensor::ExtractSliceOp>(op).getOffsetsMutable()
                                           : cast<tensor::InsertSliceOp>(op).getOffsetsMutable();
      OpOperand &operand = dynOffsets[dynamic++];
      if (ShapedType::isDynamic(sizes[d]) || ShapedType::isDynamic(shaped.getDimSize(d))) continue;
      Value offset = operand.get();
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value last = arith::ConstantIndexOp::create(b, loc, shaped.getDimSize(d) - sizes[d]);
      Value bad = arith::OrIOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, offset, zero),
                                       arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, offset, last));
      outside = outside ? arith::OrIOp::create(b, loc, outside, bad).getResult() : bad;
      guarded.push_back({&operand, arith::SelectOp::create(b, loc, bad, zero, offset)});
    }
    if (!outside) return;
    reportFault(b, loc, outside, siteText(op, "index out of range"));
    for (auto [operand, safe] : guarded) operand->set(safe);
  }

  ModuleOp module;
  MLIRContext *ctx = nullptr;
  OpBuilder b{static_cast<MLIRContext *>(nullptr)};
  std::vector<Attribute> sites;
  func::FuncOp report;
};

}  // namespace
}  // namespace kiln::lowering
