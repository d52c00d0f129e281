//===- GraphBuilder.cpp - TOSA graphs from MLIR builders -------------------===//
#include "lowering/graph/GraphBuilder.h"
#include "lowering/graph/Passes.h"
#include "lowering/pipelines/Pipelines.h"
#include "lowering/graph/ProgramImpl.h"
#include "ops/OpTable.h"
#include "runtime/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/AsmParser/AsmParser.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln::lowering {

struct GraphBuilder::Impl {
  std::shared_ptr<MLIRContext> ctx;
  OwningOpRef<ModuleOp> module;
  func::FuncOp fn;
  Block *body = nullptr;
  std::unique_ptr<OpBuilder> b;
  std::string source;
  std::vector<mlir::Value> values;
  std::vector<TensorType> types;
  std::vector<std::pair<unsigned, std::string>> argNames;  // set with the results, when all arguments exist
  bool returned = false;
  int ops = 0;

  /// `source`:N:1 for the N-th op written, named after it ("tosa.add#3").
  Location loc(llvm::StringRef what) {
    return NameLoc::get(StringAttr::get(ctx.get(), what),
                        FileLineColLoc::get(ctx.get(), source, unsigned(ops + 1), 1));
  }
  Type element(DType t) {
    MLIRContext *c = ctx.get();
    switch (t) {
    case DType::f32: return Float32Type::get(c);
    case DType::f16: return Float16Type::get(c);
    case DType::bf16: return BFloat16Type::get(c);
    case DType::f64: return Float64Type::get(c);
    case DType::i64: return IntegerType::get(c, 64);
    case DType::i32: return IntegerType::get(c, 32);
    case DType::i16: return IntegerType::get(c, 16);
    case DType::i8: return IntegerType::get(c, 8);
    case DType::u8: return IntegerType::get(c, 8, IntegerType::Unsigned);
    case DType::i1: return IntegerType::get(c, 1);
    }
    return Float32Type::get(c);
  }
  RankedTensorType tensor(const TensorType &t) {
    llvm::SmallVector<int64_t> dims;
    for (int64_t d : t.shape) dims.push_back(d == kDynamic ? ShapedType::kDynamic : d);
    return RankedTensorType::get(dims, element(t.dtype));
  }
  int add(mlir::Value v, const TensorType &t) {
    values.push_back(v);
    types.push_back(t);
    return int(values.size() - 1);
  }
  /// Creates `state`'s op and sets its properties from `props`; an error
  /// (the op is erased) when the op does not take them.
  llvm::Expected<Operation *> create(OperationState &state, DictionaryAttr props) {
    Operation *op = b->create(state);
    if (props.empty()) return op;
    std::string diag;
    ScopedDiagnosticHandler handler(ctx.get(), [&](Diagnostic &d) {
      diag += (diag.empty() ? "" : "; ") + d.str();
      return success();
    });
    if (succeeded(op->setPropertiesFromAttribute(props, [&] { return op->emitError(); }))) return op;
    std::string name = state.name.getStringRef().str();
    op->erase();
    return error(ErrorCode::kInvalidArgument, "%s: its attributes do not fit the op: %s", name.c_str(),
                 diag.c_str());
  }
  mlir::Value create(llvm::StringRef name, ValueRange operands, Type result, DictionaryAttr props,
                     llvm::StringRef what) {
    OperationState state(loc(what), name);
    state.addOperands(operands);
    state.addTypes(result);
    auto op = create(state, props);
    if (!op) llvm::report_fatal_error(llvm::Twine("kiln GraphBuilder: ") + llvm::toString(op.takeError()));
    return (*op)->getResult(0);
  }
  /// tosa.const_shape for shape-like folded operands (shape, start, size, padding, multiples).
  mlir::Value constShape(llvm::ArrayRef<int64_t> v, llvm::StringRef what) {
    auto type = RankedTensorType::get({int64_t(v.size())}, IndexType::get(ctx.get()));
    auto attr = DenseIntElementsAttr::get(type, v);
    return create("tosa.const_shape", {}, tosa::shapeType::get(ctx.get(), int(v.size())),
                  b->getDictionaryAttr({b->getNamedAttr("values", attr)}), what);
  }
  /// A one-element tosa.const of `t` (shift, zero points, pad_const).
  mlir::Value scalarConst(DType t, double v, llvm::StringRef what) {
    auto type = RankedTensorType::get({1}, element(t));
    Attribute value;
    if (isFloat(t)) value = DenseElementsAttr::get(type, FloatAttr::get(element(t), v));
    else value = DenseElementsAttr::get(type, IntegerAttr::get(element(t), int64_t(v)));
    return create("tosa.const", {}, type, b->getDictionaryAttr({b->getNamedAttr("values", value)}), what);
  }
  /// A property typed as the op table says.
  llvm::Expected<Attribute> property(const ops::OpSpec &op, llvm::StringRef name, const ops::Attr &v, DType elem) {
    const ops::AttrSpec *spec = op.attr(name);
    if (!spec)
      return error(ErrorCode::kInvalidArgument, "%s has no attribute '%s' (ops/Ops.def)", op.name.c_str(),
                   name.str().c_str());
    auto number = [&]() -> std::optional<double> {
      if (auto *d = std::get_if<double>(&v)) return *d;
      if (auto *i = std::get_if<int64_t>(&v)) return double(*i);
      return std::nullopt;
    };
    auto wrong = [&](const char *kind) {
      return error(ErrorCode::kInvalidArgument, "%s: attribute '%s' must be %s", op.name.c_str(),
                   name.str().c_str(), kind);
    };
    switch (spec->type) {
    case ops::AttrType::kI32:
      if (auto *i = std::get_if<int64_t>(&v)) return Attribute(b->getI32IntegerAttr(int32_t(*i)));
      return wrong("an integer");
    case ops::AttrType::kBool:
      if (auto *i = std::get_if<int64_t>(&v)) return Attribute(b->getBoolAttr(*i != 0));
      return wrong("a boolean");
    case ops::AttrType::kI32Array:
      if (auto *l = std::get_if<std::vector<int64_t>>(&v)) {
        llvm::SmallVector<int32_t> w(l->begin(), l->end());
        return Attribute(b->getDenseI32ArrayAttr(w));
      }
      return wrong("an integer list");
    case ops::AttrType::kI64Array:
      if (auto *l = std::get_if<std::vector<int64_t>>(&v)) return Attribute(b->getDenseI64ArrayAttr(*l));
      return wrong("an integer list");
    case ops::AttrType::kString:
      if (auto *s = std::get_if<std::string>(&v)) return Attribute(b->getStringAttr(*s));
      return wrong("a string");
    case ops::AttrType::kTypeName:
      if (auto *s = std::get_if<std::string>(&v))
        if (auto dt = parseDType(*s)) return Attribute(TypeAttr::get(element(*dt)));
      return wrong("a type name such as f32");
    case ops::AttrType::kAttrText:
      if (auto *s = std::get_if<std::string>(&v))
        if (Attribute a = parseAttribute(*s, ctx.get())) return a;
      return wrong("MLIR attribute text such as #tosa.rounding_mode<SINGLE_ROUND>");
    case ops::AttrType::kElement: {
      auto n = number();
      if (!n) return wrong("a number");
      if (isFloat(elem)) return Attribute(FloatAttr::get(element(elem), *n));
      return Attribute(IntegerAttr::get(element(elem), int64_t(*n)));
    }
    }
    return error(ErrorCode::kInternal, "unknown attribute type");
  }
};

GraphBuilder::GraphBuilder(llvm::StringRef function, llvm::StringRef source) : impl_(std::make_unique<Impl>()) {
  registerKilnPassesAndPipelines();
  DialectRegistry registry;
  registerKilnDialects(registry);
  Impl &I = *impl_;
  I.ctx = std::make_shared<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  I.ctx->loadDialect<func::FuncDialect, tosa::TosaDialect, tensor::TensorDialect>();
  I.source = source.str();
  I.module = ModuleOp::create(I.loc(source));
  I.b = std::make_unique<OpBuilder>(I.ctx.get());
  I.b->setInsertionPointToEnd(I.module->getBody());
  I.fn = func::FuncOp::create(*I.b, I.loc(source), function, I.b->getFunctionType({}, {}));
  I.body = I.fn.addEntryBlock();
  I.b->setInsertionPointToEnd(I.body);
}

GraphBuilder::~GraphBuilder() {
  if (impl_) impl_->module = nullptr;  // before its context
}

const TensorType &GraphBuilder::type(Value v) const { return impl_->types.at(size_t(v)); }

GraphBuilder::Value GraphBuilder::argument(const TensorType &type, llvm::StringRef name) {
  Impl &I = *impl_;
  mlir::Value arg = I.body->addArgument(I.tensor(type), I.loc(I.source));
  unsigned index = llvm::cast<BlockArgument>(arg).getArgNumber();
  llvm::SmallVector<Type> inputs(I.body->getArgumentTypes());
  I.fn.setFunctionType(I.b->getFunctionType(inputs, {}));
  if (!name.empty()) I.argNames.push_back({index, name.str()});
  return I.add(arg, type);
}

llvm::Expected<GraphBuilder::Value> GraphBuilder::constant(const Tensor &value) {
  Impl &I = *impl_;
  if (!value.valid()) return error(ErrorCode::kInvalidArgument, "a graph constant must be a tensor");
  RankedTensorType type = I.tensor(value.type());
  DenseElementsAttr attr;
  if (value.dtype() == DType::i1) {
    llvm::SmallVector<bool> bits;
    for (int64_t i = 0; i < value.numElements(); ++i) bits.push_back(value.data<uint8_t>()[i] != 0);
    attr = DenseElementsAttr::get(type, bits);
  } else {
    attr = DenseElementsAttr::getFromRawBuffer(
        type, llvm::ArrayRef<char>(static_cast<const char *>(value.rawData()), value.byteSize()));
  }
  mlir::Value v = I.create("tosa.const", {}, type, I.b->getDictionaryAttr({I.b->getNamedAttr("values", attr)}),
                           "const" + std::to_string(I.ops++));
  return I.add(v, value.type());
}

llvm::Expected<GraphBuilder::Value> GraphBuilder::resourceConstant(llvm::StringRef key, const Tensor &value) {
  Impl &I = *impl_;
  if (!value.valid() || value.dtype() == DType::i1)
    return error(ErrorCode::kInvalidArgument, "resource constant '%s' must be a tensor of bytes-sized elements",
                 key.str().c_str());
  RankedTensorType type = I.tensor(value.type());
  auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
      llvm::ArrayRef<char>(static_cast<const char *>(value.rawData()), value.byteSize()), dtypeSize(value.dtype()));
  auto attr = DenseResourceElementsAttr::get(type, key, std::move(blob));
  mlir::Value v = I.create("tosa.const", {}, type, I.b->getDictionaryAttr({I.b->getNamedAttr("values", attr)}),
                           key);
  ++I.ops;
  return I.add(v, value.type());
}

llvm::Expected<GraphBuilder::Value> GraphBuilder::cast(Value v, const TensorType &type) {
  Impl &I = *impl_;
  if (v < 0 || size_t(v) >= I.values.size())
    return error(ErrorCode::kInvalidArgument, "tensor.cast: operand %d is not a value of this graph", v);
  const TensorType &from = I.types[v];
  bool compatible = from.dtype == type.dtype && from.shape.size() == type.shape.size();
  for (size_t d = 0; compatible && d < type.shape.size(); ++d)
    compatible = from.shape[d] == kDynamic || type.shape[d] == kDynamic || from.shape[d] == type.shape[d];
  if (!compatible)
    return error(ErrorCode::kInvalidArgument, "tensor.cast: tensor<%s> cannot become tensor<%s>", from.str().c_str(),
                 type.str().c_str());
  OperationState state(I.loc("tensor.cast#" + std::to_string(I.ops)), "tensor.cast");
  state.addOperands(I.values[v]);
  state.addTypes(I.tensor(type));
  Operation *op = I.b->create(state);
  ++I.ops;
  return I.add(op->getResult(0), type);
}

llvm::Expected<std::vector<GraphBuilder::Value>>
GraphBuilder::op(llvm::StringRef name, llvm::ArrayRef<Value> operands, const ops::AttrMap &attrs,
                 llvm::ArrayRef<TensorType> results) {
  Impl &I = *impl_;
  if (I.returned || !I.module) return error(ErrorCode::kInternal, "GraphBuilder: the graph is already complete");
  std::string opName = name.str();
  ops::AttrMap props = attrs;
  if (name.starts_with("tosa.custom:")) {  // "tosa.custom:domain.name"
    auto [domain, custom] = name.drop_front(strlen("tosa.custom:")).split('.');
    opName = "tosa.custom";
    props.set("domain_name", domain.str());
    props.set("operator_name", custom.str());
    props.set("implementation_attrs", std::string());
  }
  const ops::OpSpec *spec = ops::lookupOp(opName);
  if (!spec) return error(ErrorCode::kUnsupported, "'%s' is not in kiln's op table (ops/Ops.def)", opName.c_str());
  for (Value v : operands)
    if (v < 0 || size_t(v) >= I.values.size())
      return error(ErrorCode::kInvalidArgument, "%s: operand %d is not a value of this graph", opName.c_str(), v);
  // Tensor operands: as many as the table declares (any number from a variadic one on).
  size_t declared = 0;
  bool variadic = false;
  for (const ops::OperandSpec &o : spec->operands) {
    declared += !o.folded && !o.variadic;
    variadic |= o.variadic;
  }
  if (variadic ? operands.size() < declared : operands.size() != declared)
    return error(ErrorCode::kInvalidArgument, "%s takes %s%zu tensor operand%s, got %zu", opName.c_str(),
                 variadic ? "at least " : "", declared, declared == 1 ? "" : "s", operands.size());
  std::string what = name.str() + "#" + std::to_string(I.ops);
  DType elem = operands.empty() ? DType::f32 : I.types[operands[0]].dtype;

  // Operands, with folded constants materialized in table order.
  llvm::SmallVector<mlir::Value> values;
  size_t next = 0;
  bool folds = spec->hasFoldedOperands();
  size_t count = folds ? spec->operands.size() : operands.size();
  for (size_t i = 0; i < count; ++i) {
    if (folds && spec->operands[i].folded) {
      const std::string &o = spec->operands[i].name;
      if (o == "shape" || o == "start" || o == "size" || o == "padding" || o == "multiples") {
        auto v = attrs.getInts(o);
        if (!v) return withContext(v.takeError(), opName + ": ");
        values.push_back(I.constShape(*v, what));
      } else {
        // shift is i8; zero points and pad_const take their operand's element type.
        DType t = o == "shift" ? DType::i8 : elem;
        if ((o == "weight_zp" || o == "b_zp") && operands.size() > 1) t = I.types[operands[1]].dtype;
        values.push_back(I.scalarConst(t, attrs.getFloatOr(o, 0), what));
      }
      props.erase(o);  // folded operands are not properties
      continue;
    }
    if (next >= operands.size())
      return error(ErrorCode::kInvalidArgument, "%s: expected more operands (%zu given)", opName.c_str(),
                   operands.size());
    values.push_back(I.values[operands[next++]]);
  }
  if (next != operands.size())
    return error(ErrorCode::kInvalidArgument, "%s: %zu operands given, the op takes %zu", opName.c_str(),
                 operands.size(), next);

  llvm::SmallVector<NamedAttribute> named, discardable;
  for (const auto &[k, v] : props.all()) {
    if (k == "to") continue;  // cast's target comes from its result type
    if (opName == "tosa.custom" && !spec->attr(k)) {
      // A custom op's own attributes (kiln.grouped_conv2d's stride, pad,
      // dilation) are discardable attributes beside its properties, in
      // the form kiln's importers write them.
      if (auto *l = std::get_if<std::vector<int64_t>>(&v))
        discardable.push_back(I.b->getNamedAttr(k, I.b->getDenseI64ArrayAttr(*l)));
      else if (auto *i = std::get_if<int64_t>(&v))
        discardable.push_back(I.b->getNamedAttr(k, I.b->getI64IntegerAttr(*i)));
      else if (auto *d = std::get_if<double>(&v))
        discardable.push_back(I.b->getNamedAttr(k, I.b->getF32FloatAttr(float(*d))));
      else
        discardable.push_back(I.b->getNamedAttr(k, I.b->getStringAttr(std::get<std::string>(v))));
      continue;
    }
    auto a = I.property(*spec, k, v, elem);
    if (!a) return a.takeError();
    named.push_back(I.b->getNamedAttr(k, *a));
  }
  OperationState state(I.loc(what), opName);
  state.addOperands(values);
  for (const TensorType &t : results) state.addTypes(I.tensor(t));
  auto op = I.create(state, I.b->getDictionaryAttr(named));
  if (!op) return op.takeError();
  for (const NamedAttribute &d : discardable) (*op)->setDiscardableAttr(d.getName(), d.getValue());
  ++I.ops;
  std::vector<Value> out;
  for (size_t r = 0; r < results.size(); ++r) out.push_back(I.add((*op)->getResult(r), results[r]));
  return out;
}

llvm::Error GraphBuilder::setResults(llvm::ArrayRef<Value> results) {
  Impl &I = *impl_;
  if (!I.module) return error(ErrorCode::kInternal, "GraphBuilder: the graph was already finished");
  if (I.returned) return error(ErrorCode::kInternal, "GraphBuilder: the results were already set");
  llvm::SmallVector<mlir::Value> returned;
  llvm::SmallVector<Type> resultTypes;
  for (Value v : results) {
    if (v < 0 || size_t(v) >= I.values.size())
      return error(ErrorCode::kInvalidArgument, "result %d is not a value of this graph", v);
    returned.push_back(I.values[v]);
    resultTypes.push_back(I.values[v].getType());
  }
  func::ReturnOp::create(*I.b, I.loc(I.source), returned);
  llvm::SmallVector<Type> inputs(I.body->getArgumentTypes());
  I.fn.setFunctionType(I.b->getFunctionType(inputs, resultTypes));
  for (const auto &[index, name] : I.argNames) I.fn.setArgAttr(index, "kiln.name", I.b->getStringAttr(name));
  I.returned = true;
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Program>> GraphBuilder::finish(llvm::ArrayRef<Value> results) {
  if (auto err = setResults(results)) return std::move(err);
  return finish();
}

llvm::Expected<std::unique_ptr<Program>> GraphBuilder::finish() {
  Impl &I = *impl_;
  if (!I.module) return error(ErrorCode::kInternal, "GraphBuilder::finish called twice");
  if (!I.returned) return error(ErrorCode::kInternal, "GraphBuilder::finish: the results are not set");
  std::unique_ptr<Program> p(new Program());
  Program::Impl &P = *p->impl;
  P.ctx = I.ctx;
  if (auto err = P.diagnose(ErrorCode::kInvalidArgument, "the graph '" + I.source + "' is not valid",
                            [&] { return verify(*I.module); }))
    return std::move(err);
  P.module = std::move(I.module);
  I.fn = nullptr;
  if (auto err = P.import(I.source)) return std::move(err);
  return std::move(p);
}

std::string GraphBuilder::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (impl_->module) impl_->module->print(os, OpPrintingFlags().printGenericOpForm());
  return s;
}

}  // namespace kiln::lowering
