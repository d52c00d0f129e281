#include "lowering/EmitTosa.h"
#include "runtime/Error.h"

#include "llvm/ADT/StringExtras.h"

#include <map>
#include <sstream>

namespace kiln::lowering {

std::string mlirTensorType(const TensorType &t) { return "tensor<" + t.str() + ">"; }

const std::vector<std::string> *tosaOperandNames(llvm::StringRef op) {
  static const std::map<std::string, std::vector<std::string>, std::less<>> names = {
      {"tosa.mul", {"input1", "input2", "shift"}},
      {"tosa.conv2d", {"input", "weight", "bias", "input_zp", "weight_zp"}},
      {"tosa.depthwise_conv2d", {"input", "weight", "bias", "input_zp", "weight_zp"}},
      {"tosa.conv3d", {"input", "weight", "bias", "input_zp", "weight_zp"}},
      {"tosa.transpose_conv2d", {"input", "weight", "bias", "input_zp", "weight_zp"}},
      {"tosa.matmul", {"a", "b", "a_zp", "b_zp"}},
      {"tosa.avg_pool2d", {"input", "input_zp", "output_zp"}},
      {"tosa.negate", {"input1", "input1_zp", "output_zp"}},
      {"tosa.reshape", {"input1", "shape"}},
      {"tosa.slice", {"input1", "start", "size"}},
      {"tosa.pad", {"input1", "padding", "pad_const"}},
      {"tosa.tile", {"input1", "multiples"}},
  };
  auto it = names.find(op);
  return it == names.end() ? nullptr : &it->second;
}

bool isFoldedOperand(llvm::StringRef name) {
  return name == "shift" || name.ends_with("_zp") || name == "shape" || name == "start" ||
         name == "size" || name == "padding" || name == "pad_const" || name == "multiples";
}

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

/// A property value typed as the TOSA op expects it.
llvm::Expected<std::string> property(llvm::StringRef name, const ops::Attr &v, DType elem) {
  if (name == "axis") return std::to_string(std::get<int64_t>(v)) + " : i32";
  if (name == "perms") return "array<i32: " + intList(std::get<std::vector<int64_t>>(v)) + ">";
  if (name == "pad" || name == "stride" || name == "dilation" || name == "kernel" || name == "out_pad")
    return "array<i64: " + intList(std::get<std::vector<int64_t>>(v)) + ">";
  if (name == "acc_type") return std::get<std::string>(v);
  if (name == "round" || name == "local_bound") return std::string(std::get<int64_t>(v) ? "true" : "false");
  if (name == "min_val" || name == "max_val") {
    double d = std::holds_alternative<double>(v) ? std::get<double>(v) : double(std::get<int64_t>(v));
    if (isFloat(elem)) return floatText(d) + " : " + std::string(dtypeName(elem));
    return std::to_string(int64_t(d)) + " : " + std::string(dtypeName(elem));
  }
  if (name == "operator_name" || name == "domain_name" || name == "implementation_attrs")
    return "\"" + std::get<std::string>(v) + "\"";
  return error(ErrorCode::kInvalidArgument, "attribute '%s' cannot be written as MLIR here", name.str().c_str());
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
  // Operands, with folded constants materialized in order.
  std::vector<std::string> ops;
  std::vector<std::string> types;
  const auto *names = tosaOperandNames(opName);
  size_t next = 0;
  size_t count = names ? names->size() : operands.size();
  if (opName == "tosa.concat" || opName == "tosa.select" || !names) count = operands.size();
  for (size_t i = 0; i < count; ++i) {
    std::string name = names && i < names->size() ? (*names)[i] : "";
    if (!name.empty() && isFoldedOperand(name)) {
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
    auto p = property(k, v, elem);
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
