#include "lowering/EmitTosa.h"
#include "ops/OpTable.h"
#include "runtime/Error.h"
#include "runtime/Error.h"

#include "llvm/ADT/StringExtras.h"

#include <map>
#include <sstream>

namespace kiln::lowering {

std::string mlirTensorType(const TensorType &t) { return "tensor<" + t.str() + ">"; }

namespace {

std::string intList(const std::vector<int64_t> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

std::string floatText(double d) {
  std::ostringstream os;
  os.precision(17);
  os << d;
  std::string s = os.str();
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

/// A property value typed as the op table says the TOSA op expects it.
llvm::Expected<std::string> property(const ops::OpSpec &op, llvm::StringRef name, const ops::Attr &v, DType elem) {
  const ops::AttrSpec *spec = op.attr(name);
  if (!spec)
    return error(ErrorCode::kInvalidArgument, "%s has no attribute '%s' (ops/Ops.def)", op.name.c_str(),
                 name.str().c_str());
  auto ints = [&]() -> llvm::Expected<std::vector<int64_t>> {
    if (auto *l = std::get_if<std::vector<int64_t>>(&v)) return *l;
    return error(ErrorCode::kInvalidArgument, "%s: attribute '%s' must be an integer list", op.name.c_str(),
                 name.str().c_str());
  };
  auto number = [&]() -> double {
    return std::holds_alternative<double>(v) ? std::get<double>(v)
           : std::holds_alternative<int64_t>(v) ? double(std::get<int64_t>(v))
                                                : 0.0;
  };
  auto text = [&]() -> llvm::Expected<std::string> {
    if (auto *t = std::get_if<std::string>(&v)) return *t;
    return error(ErrorCode::kInvalidArgument, "%s: attribute '%s' must be a string", op.name.c_str(),
                 name.str().c_str());
  };
  switch (spec->type) {
  case ops::AttrType::kI32:
    return std::to_string(int64_t(number())) + " : i32";
  case ops::AttrType::kBool:
    return std::string(number() != 0 ? "true" : "false");
  case ops::AttrType::kI32Array:
  case ops::AttrType::kI64Array: {
    auto l = ints();
    if (!l) return l.takeError();
    return std::string(spec->type == ops::AttrType::kI32Array ? "array<i32: " : "array<i64: ") + intList(*l) + ">";
  }
  case ops::AttrType::kTypeName:
    return text();
  case ops::AttrType::kString: {
    auto t = text();
    if (!t) return t.takeError();
    return "\"" + *t + "\"";
  }
  case ops::AttrType::kElement:
    if (isFloat(elem)) return floatText(number()) + " : " + std::string(dtypeName(elem));
    return std::to_string(int64_t(number())) + " : " + std::string(dtypeName(elem));
  }
  return error(ErrorCode::kInternal, "unknown attribute type");
}

}  // namespace

llvm::Error emitTosaOp(std::string &out, llvm::StringRef op, llvm::ArrayRef<std::string> operands,
                       llvm::ArrayRef<TensorType> operandTypes, const ops::AttrMap &attrs,
                       llvm::ArrayRef<std::string> results, llvm::ArrayRef<TensorType> resultTypes,
                       llvm::StringRef prefix) {
  std::string opName = op.str();
  ops::AttrMap props = attrs;
  if (op.starts_with("tosa.custom:")) {  // "tosa.custom:domain.name"
    llvm::StringRef rest = op.drop_front(strlen("tosa.custom:"));
    auto [domain, name] = rest.split('.');
    opName = "tosa.custom";
    props.set("domain_name", domain.str());
    props.set("operator_name", name.str());
    props.set("implementation_attrs", std::string());
  }
  DType elem = operandTypes.empty() ? DType::f32 : operandTypes[0].dtype;
  const ops::OpSpec *spec = ops::lookupOp(opName);
  if (!spec) return error(ErrorCode::kUnsupported, "'%s' is not in kiln's op table (ops/Ops.def)", opName.c_str());
  // Operands, with folded constants materialized in order.
  std::vector<std::string> ops;
  std::vector<std::string> types;
  size_t next = 0;
  size_t count = spec->hasFoldedOperands() ? spec->operands.size() : operands.size();
  for (size_t i = 0; i < count; ++i) {
    std::string name = spec->hasFoldedOperands() ? spec->operands[i].name : "";
    if (spec->hasFoldedOperands() && spec->operands[i].folded) {
      std::string ssa = "%" + prefix.str() + "_" + name;
      if (name == "shape" || name == "start" || name == "size" || name == "padding" || name == "multiples") {
        auto v = attrs.getInts(name);
        if (!v) return v.takeError();
        std::string n = std::to_string(v->size());
        out += "  " + ssa + " = \"tosa.const_shape\"() <{values = dense<[" + intList(*v) + "]> : tensor<" + n +
               "xindex>}> : () -> !tosa.shape<" + n + ">\n";
        types.push_back("!tosa.shape<" + n + ">");
      } else {
        // Scalar constants: shift is i8; zero points and pad_const take the operand's element type.
        DType t = name == "shift" ? DType::i8 : elem;
        if (name == "weight_zp" && operandTypes.size() > 1) t = operandTypes[1].dtype;
        if (name == "b_zp" && operandTypes.size() > 1) t = operandTypes[1].dtype;
        double v = attrs.getFloatOr(name, 0);
        std::string value = isFloat(t) ? floatText(v) : std::to_string(int64_t(v));
        std::string tt = "tensor<1x" + std::string(dtypeName(t)) + ">";
        out += "  " + ssa + " = \"tosa.const\"() <{values = dense<" + value + "> : " + tt + "}> : () -> " + tt + "\n";
        types.push_back(tt);
      }
      ops.push_back(ssa);
      props = [&] {  // folded operands are not properties
        ops::AttrMap p;
        for (const auto &[k, val] : props.all())
          if (k != name) p.set(k, val);
        return p;
      }();
      continue;
    }
    if (next >= operands.size())
      return error(ErrorCode::kInvalidArgument, "%s: expected more operands (%zu given)", op.str().c_str(), operands.size());
    ops.push_back(operands[next]);
    types.push_back(mlirTensorType(operandTypes[next]));
    ++next;
  }
  if (next != operands.size())
    return error(ErrorCode::kInvalidArgument, "%s: %zu operands given, the op takes %zu", op.str().c_str(), operands.size(), next);
  std::string propText;
  for (const auto &[k, v] : props.all()) {
    if (k == "to") continue;  // cast's target comes from its result type
    auto p = property(*spec, k, v, elem);
    if (!p) return p.takeError();
    propText += (propText.empty() ? "" : ", ") + k + " = " + *p;
  }
  out += "  " + llvm::join(results, ", ") + " = \"" + opName + "\"(" + llvm::join(ops, ", ") + ")";
  if (!propText.empty()) out += " <{" + propText + "}>";
  std::vector<std::string> resTypes;
  for (const TensorType &t : resultTypes) resTypes.push_back(mlirTensorType(t));
  out += " : (" + llvm::join(types, ", ") + ") -> ";
  out += resTypes.size() == 1 ? resTypes[0] : "(" + llvm::join(resTypes, ", ") + ")";
  out += "\n";
  return llvm::Error::success();
}

}  // namespace kiln::lowering
