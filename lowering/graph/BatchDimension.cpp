// The batch analysis (see BatchDimension.h): one walk over the function's
// ops in order, each value mapped to where it carries the batch, or to
// nothing when it does not depend on it.
#include "lowering/graph/BatchDimension.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "lowering/ir/IRText.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;

namespace kiln::lowering {
namespace {

/// Where a value carries the batch: dims [0, dim) are 1 and dim `dim` is
/// batch x `factor` (every other dim static).
struct Carried {
  int dim = 0;
  int64_t factor = 1;
  bool operator==(const Carried &o) const { return dim == o.dim && factor == o.factor; }
};

/// A refusal: the op and why.
struct Refused {
  std::string why;
};

class Analysis {
public:
  BatchDimension run(func::FuncOp fn);

private:
  llvm::DenseMap<Value, Carried> carried_;
  std::string why_;

  std::optional<Carried> of(Value v) const {
    auto it = carried_.find(v);
    if (it == carried_.end()) return std::nullopt;
    return it->second;
  }
  bool refuse(Operation *op, const std::string &why) {
    why_ = op->getName().getStringRef().str() + " at " + locationString(op->getLoc()) + " " + why;
    return false;
  }
  /// Records `result` as carrying the batch at `c`, if its type agrees.
  bool carry(Operation *op, Value result, Carried c);
  bool visit(Operation *op);
  bool elementwise(Operation *op);
  bool reshape(tosa::ReshapeOp op, Carried in);
  bool matmul(tosa::MatMulOp op);
  bool gather(tosa::GatherOp op);
};

/// The static values of a tosa.const_shape operand, or nothing.
std::optional<llvm::SmallVector<int64_t>> shapeValues(Value v) {
  auto c = v.getDefiningOp<tosa::ConstShapeOp>();
  if (!c) return std::nullopt;
  llvm::SmallVector<int64_t> out;
  for (const APInt &x : c.getValues().getValues<APInt>()) out.push_back(x.getSExtValue());
  return out;
}

/// The product of `shape`'s dims from `from` on, or nothing if one is dynamic.
std::optional<int64_t> staticProduct(ArrayRef<int64_t> shape, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < shape.size(); ++i) {
    if (ShapedType::isDynamic(shape[i])) return std::nullopt;
    p *= shape[i];
  }
  return p;
}

bool Analysis::carry(Operation *op, Value result, Carried c) {
  auto t = dyn_cast<RankedTensorType>(result.getType());
  if (!t || c.dim < 0 || c.dim >= t.getRank()) return refuse(op, "gives the batch a place its result lacks");
  for (int64_t i = 0; i < t.getRank(); ++i) {
    if (i < c.dim && t.getDimSize(i) != 1)
      return refuse(op, "puts dimension " + std::to_string(i) + " (not 1) before the batch");
    if (i == c.dim && !t.isDynamicDim(i)) return refuse(op, "gives the batch a static size");
    if (i != c.dim && t.isDynamicDim(i)) return refuse(op, "has a dynamic dimension besides the batch");
  }
  carried_[result] = c;
  return true;
}

bool Analysis::elementwise(Operation *op) {
  std::optional<Carried> c;
  for (Value v : op->getOperands())
    if (auto here = of(v)) {
      if (c && !(*c == *here)) return refuse(op, "combines operands that carry the batch differently");
      c = here;
    }
  auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!result) return refuse(op, "has an unranked result");
  for (Value v : op->getOperands()) {
    if (of(v)) continue;
    auto t = dyn_cast<RankedTensorType>(v.getType());
    // Operands of the result's rank broadcast along the batch; others (mul's
    // shift, rescale's multipliers, table's table) are parameters.
    if (t && t.getRank() == result.getRank() && t.getDimSize(c->dim) != 1)
      return refuse(op, "meets the batch with an operand of static size " + std::to_string(t.getDimSize(c->dim)) +
                            " along it");
  }
  return carry(op, op->getResult(0), *c);
}

bool Analysis::reshape(tosa::ReshapeOp op, Carried in) {
  auto src = cast<RankedTensorType>(op.getInput1().getType());
  auto dst = dyn_cast<RankedTensorType>(op.getResult().getType());
  if (!dst) return refuse(op, "has an unranked result");
  std::optional<int64_t> inner = staticProduct(src.getShape(), in.dim + 1);
  if (!inner) return refuse(op, "reshapes a dynamic dimension besides the batch");
  int64_t block = in.factor * *inner;  // elements per batch item
  int dim = -1;
  for (int64_t i = 0; i < dst.getRank(); ++i)
    if (dst.isDynamicDim(i)) {
      if (dim >= 0) return refuse(op, "has two dynamic dimensions in its result");
      dim = int(i);
    }
  if (dim < 0) return refuse(op, "gives a value that carries the batch a static shape");
  std::optional<int64_t> after = staticProduct(dst.getShape(), dim + 1);
  if (!after || *after == 0 || block % *after != 0)
    return refuse(op, "splits the items of the batch across its dimensions");
  return carry(op, op.getResult(), Carried{dim, block / *after});
}

bool Analysis::matmul(tosa::MatMulOp op) {
  std::optional<Carried> a = of(op.getA()), b = of(op.getB());
  if (a && b && *a == *b && a->dim == 0) return carry(op, op.getResult(), *a);
  if (a && !b && a->dim == 1) return carry(op, op.getResult(), *a);  // rows of A times a constant B
  return refuse(op, "multiplies across the batch (it is neither N of both operands nor H of A with a constant B)");
}

bool Analysis::gather(tosa::GatherOp op) {
  std::optional<Carried> values = of(op.getValues()), indices = of(op.getIndices());
  if (values && indices && *values == *indices && values->dim == 0) return carry(op, op.getResult(), *values);
  if (!values && indices && indices->dim == 1) return carry(op, op.getResult(), *indices);  // a table lookup
  return refuse(op, "gathers across the batch");
}

bool Analysis::visit(Operation *op) {
  bool touches = llvm::any_of(op->getOperands(), [&](Value v) { return bool(of(v)); });
  if (isa<func::ReturnOp>(op)) return true;  // checked by run()
  if (!touches) {
    // Weights and what is computed from them only; nested regions could
    // still use a value that carries the batch.
    if (op->getNumRegions() == 0) return true;
    bool inside = false;
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands()) inside |= bool(of(v));
    });
    return inside ? refuse(op, "uses the batch inside a region") : true;
  }
  if (op->getNumResults() != 1) return refuse(op, "has " + std::to_string(op->getNumResults()) + " results");
  Value result = op->getResult(0);
  // Ops with one data operand that carries the batch; the others must not.
  auto single = [&](Value data) -> std::optional<Carried> {
    for (Value v : op->getOperands())
      if (v != data && of(v)) return std::nullopt;
    return of(data);
  };
  // By class, not by the TosaElementwiseOperator trait: inside libkiln.so
  // (hidden visibility) that trait's TypeID is not libMLIR's, and
  // hasTrait<> answered false for every op.
  if (isa<tosa::AddOp, tosa::SubOp, tosa::MulOp, tosa::IntDivOp, tosa::PowOp, tosa::MaximumOp, tosa::MinimumOp,
          tosa::ArithmeticRightShiftOp, tosa::LogicalLeftShiftOp, tosa::LogicalRightShiftOp, tosa::BitwiseAndOp,
          tosa::BitwiseOrOp, tosa::BitwiseXorOp, tosa::BitwiseNotOp, tosa::LogicalAndOp, tosa::LogicalOrOp,
          tosa::LogicalXorOp, tosa::LogicalNotOp, tosa::EqualOp, tosa::GreaterOp, tosa::GreaterEqualOp,
          tosa::SelectOp>(op) ||
      isa<tosa::AbsOp, tosa::CeilOp, tosa::ClzOp, tosa::CosOp, tosa::ExpOp, tosa::FloorOp, tosa::LogOp,
          tosa::NegateOp, tosa::ReciprocalOp, tosa::RsqrtOp, tosa::SinOp, tosa::ClampOp, tosa::ErfOp, tosa::SigmoidOp,
          tosa::TanhOp, tosa::CastOp, tosa::RescaleOp, tosa::TableOp, tosa::IdentityOp>(op))
    return elementwise(op);
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case<tosa::Conv2DOp, tosa::Conv3DOp, tosa::DepthwiseConv2DOp, tosa::TransposeConv2DOp, tosa::AvgPool2dOp,
            tosa::MaxPool2dOp, tosa::ResizeOp>([&](Operation *) {
        std::optional<Carried> c = single(op->getOperand(0));
        if (!c || c->dim != 0) return refuse(op, "takes the batch somewhere other than its input's N");
        return carry(op, result, *c);
      })
      .Case<tosa::MatMulOp>([&](tosa::MatMulOp m) { return matmul(m); })
      .Case<tosa::GatherOp>([&](tosa::GatherOp g) { return gather(g); })
      .Case<tosa::ReshapeOp>([&](tosa::ReshapeOp r) {
        std::optional<Carried> c = single(r.getInput1());
        return c ? reshape(r, *c) : refuse(op, "takes its shape from the batch");
      })
      .Case<tosa::TransposeOp>([&](tosa::TransposeOp t) {
        std::optional<Carried> c = single(t.getInput1());
        if (!c) return refuse(op, "has a second operand that carries the batch");
        ArrayRef<int32_t> perms = t.getPerms();
        auto at = llvm::find(perms, c->dim);
        if (at == perms.end()) return refuse(op, "drops the batch's dimension");
        return carry(op, result, Carried{int(at - perms.begin()), c->factor});
      })
      .Case<tosa::ReduceAllOp, tosa::ReduceAnyOp, tosa::ReduceMaxOp, tosa::ReduceMinOp, tosa::ReduceProductOp,
            tosa::ReduceSumOp, tosa::ReverseOp>([&](Operation *) {
        std::optional<Carried> c = single(op->getOperand(0));
        auto axis = op->getAttrOfType<IntegerAttr>("axis");
        if (!c || !axis) return refuse(op, "has operands the analysis does not know");
        if (axis.getInt() == c->dim) return refuse(op, "works along the batch");
        return carry(op, result, *c);
      })
      .Case<tosa::ArgMaxOp>([&](tosa::ArgMaxOp a) {
        std::optional<Carried> c = single(a.getInput());
        if (!c) return refuse(op, "has operands the analysis does not know");
        int axis = int(a.getAxis());
        if (axis == c->dim) return refuse(op, "works along the batch");
        return carry(op, result, Carried{axis < c->dim ? c->dim - 1 : c->dim, c->factor});
      })
      .Case<tosa::ConcatOp>([&](tosa::ConcatOp cat) {
        std::optional<Carried> c;
        for (Value v : cat.getInput1()) {
          std::optional<Carried> here = of(v);
          if (!here || (c && !(*c == *here))) return refuse(op, "joins values that carry the batch differently");
          c = here;
        }
        if (int64_t(cat.getAxis()) == c->dim) return refuse(op, "joins along the batch");
        return carry(op, result, *c);
      })
      .Case<tosa::PadOp>([&](tosa::PadOp p) {
        std::optional<Carried> c = single(p.getInput1());
        auto pads = shapeValues(p.getPadding());
        if (!c || !pads || int64_t(pads->size()) <= 2 * c->dim + 1)
          return refuse(op, "has padding the analysis cannot read");
        if ((*pads)[2 * c->dim] != 0 || (*pads)[2 * c->dim + 1] != 0) return refuse(op, "pads the batch");
        return carry(op, result, *c);
      })
      .Case<tosa::TileOp>([&](tosa::TileOp t) {
        std::optional<Carried> c = single(t.getInput1());
        auto multiples = shapeValues(t.getMultiples());
        if (!c || !multiples || int64_t(multiples->size()) <= c->dim)
          return refuse(op, "has multiples the analysis cannot read");
        if ((*multiples)[c->dim] != 1) return refuse(op, "repeats the batch");
        return carry(op, result, *c);
      })
      .Case<tosa::SliceOp>([&](tosa::SliceOp s) {
        std::optional<Carried> c = single(s.getInput1());
        auto start = shapeValues(s.getStart()), size = shapeValues(s.getSize());
        if (!c || !start || !size || int64_t(start->size()) <= c->dim || int64_t(size->size()) <= c->dim)
          return refuse(op, "has bounds the analysis cannot read");
        int64_t extent = (*size)[c->dim];  // -1: to the end
        if ((*start)[c->dim] != 0 || (extent != -1 && !ShapedType::isDynamic(extent))) return refuse(op, "cuts the batch");
        return carry(op, result, *c);
      })
      .Default([&](Operation *) { return refuse(op, "is an op the batch analysis does not know"); });
}

BatchDimension Analysis::run(func::FuncOp fn) {
  BatchDimension out;
  auto fail = [&](std::string why) {
    out = BatchDimension();
    out.why = std::move(why);
    return out;
  };
  if (!fn.getBody().hasOneBlock()) return fail("@" + fn.getSymName().str() + " has more than one block");
  bool any = false;
  for (BlockArgument arg : fn.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    bool batched = t && t.getRank() > 0 && t.isDynamicDim(0);
    out.inputs.push_back(batched);
    if (!t) return fail("argument " + std::to_string(arg.getArgNumber()) + " is not a ranked tensor");
    for (int64_t i = batched ? 1 : 0; i < t.getRank(); ++i)
      if (t.isDynamicDim(i))
        return fail("argument " + std::to_string(arg.getArgNumber()) + " has a dynamic dimension " +
                    std::to_string(i) + " (only dimension 0 can be a batch)");
    if (batched) {
      carried_[arg] = Carried{0, 1};
      any = true;
    }
  }
  if (!any) return fail("no argument has a dynamic dimension 0");
  for (Operation &op : fn.getBody().front()) {
    if (!visit(&op)) return fail(why_);
    if (auto ret = dyn_cast<func::ReturnOp>(op))
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        std::optional<Carried> c = of(v);
        if (!c) return fail("result " + std::to_string(i) + " does not depend on the batch");
        out.results.push_back(c->dim);
      }
  }
  out.separable = true;
  return out;
}

}  // namespace

BatchDimension analyzeBatchDimension(func::FuncOp fn) { return Analysis().run(fn); }

}  // namespace kiln::lowering
