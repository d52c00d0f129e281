#include "ops/Placement.h"
#include "ops/OpTable.h"
#include "runtime/Error.h"

#include "llvm/ADT/SmallVector.h"

namespace kiln::ops {

const char *opModeName(OpMode m) {
  return m == OpMode::kJit ? "jit" : m == OpMode::kKernel ? "kernel" : "auto";
}

OpMode PlacementOptions::modeFor(llvm::StringRef op) const {
  if (auto it = modes.find(op.str()); it != modes.end()) return it->second;
  if (op.starts_with("tosa.custom:"))
    if (auto it = modes.find("tosa.custom"); it != modes.end()) return it->second;
  if (auto it = modes.find("*"); it != modes.end()) return it->second;
  return OpMode::kAuto;
}

std::string PlacementOptions::canonical() const {
  std::string s;
  for (const auto &[op, mode] : modes) s += (s.empty() ? "" : ",") + op + "=" + opModeName(mode);
  if (!measuring()) s += std::string(s.empty() ? "" : ",") + "measure=off";
  if (!winogradOn()) s += std::string(s.empty() ? "" : ",") + "winograd=off";
  if (!padRowsOn()) s += std::string(s.empty() ? "" : ",") + "padrows=off";
  if (!panelsOn()) s += std::string(s.empty() ? "" : ",") + "panels=off";
  if (!attentionOn()) s += std::string(s.empty() ? "" : ",") + "attention=off";
  return s;
}

void PlacementOptions::merge(const PlacementOptions &other) {
  for (const auto &[op, mode] : other.modes) modes[op] = mode;
  if (other.measure) measure = other.measure;
  if (other.winograd) winograd = other.winograd;
  if (other.padRows) padRows = other.padRows;
  if (other.panels) panels = other.panels;
  if (other.attention) attention = other.attention;
}

llvm::Expected<PlacementOptions> parseOpModes(llvm::StringRef spec) {
  PlacementOptions o;
  llvm::SmallVector<llvm::StringRef> items;
  spec.split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    item = item.trim();
    auto [op, mode] = item.split('=');
    op = op.trim();
    mode = mode.trim();
    if (op.empty() || mode.empty())
      return error(ErrorCode::kInvalidArgument, "op mode '%s': expected OP=jit|kernel|auto", item.str().c_str());
    if (std::optional<bool> *toggle = op == "measure"    ? &o.measure
                                      : op == "winograd" ? &o.winograd
                                      : op == "padrows"  ? &o.padRows
                                      : op == "panels"   ? &o.panels
                                      : op == "attention" ? &o.attention
                                                         : nullptr) {
      if (mode != "on" && mode != "off")
        return error(ErrorCode::kInvalidArgument, "op mode '%s': %s takes on or off", item.str().c_str(),
                     op.str().c_str());
      *toggle = mode == "on";
      continue;
    }
    OpMode m;
    if (mode == "jit") m = OpMode::kJit;
    else if (mode == "kernel") m = OpMode::kKernel;
    else if (mode == "auto") m = OpMode::kAuto;
    else
      return error(ErrorCode::kInvalidArgument, "op mode '%s': mode '%s' is not jit, kernel or auto",
                   item.str().c_str(), mode.str().c_str());
    if (op != "*" && !op.contains('.'))
      return error(ErrorCode::kInvalidArgument, "op mode '%s': '%s' is not an op name like tosa.conv2d",
                   item.str().c_str(), op.str().c_str());
    if (op != "*" && !lookupOp(op))
      return error(ErrorCode::kInvalidArgument, "op mode '%s': '%s' is not an op kiln knows (ops/Ops.def)",
                   item.str().c_str(), op.str().c_str());
    o.modes[op.str()] = m;
  }
  return o;
}

}  // namespace kiln::ops
