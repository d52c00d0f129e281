#include "ops/OpTable.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

namespace kiln::ops {
namespace {

struct Row {
  const char *name;
  int lowers;
  const char *operands;
  const char *attrs;
};

constexpr Row kRows[] = {
#define KILN_OP(NAME, LOWERS, OPERANDS, ATTRS, EAGER, METHOD) {NAME, LOWERS, OPERANDS, ATTRS},
#include "ops/Ops.def"
#undef KILN_OP
};

AttrType parseType(llvm::StringRef op, llvm::StringRef t) {
  if (t == "i32") return AttrType::kI32;
  if (t == "i32s") return AttrType::kI32Array;
  if (t == "i64s") return AttrType::kI64Array;
  if (t == "bool") return AttrType::kBool;
  if (t == "str") return AttrType::kString;
  if (t == "type") return AttrType::kTypeName;
  if (t == "elem") return AttrType::kElement;
  if (t == "attr") return AttrType::kAttrText;
  llvm::report_fatal_error(llvm::Twine("Ops.def: ") + op + ": unknown attribute type '" + t + "'");
}

std::vector<OpSpec> build() {
  std::vector<OpSpec> out;
  for (const Row &r : kRows) {
    OpSpec s;
    s.name = r.name;
    s.lowers = r.lowers != 0;
    llvm::SmallVector<llvm::StringRef> words;
    llvm::StringRef(r.operands).split(words, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef w : words) {
      OperandSpec o;
      o.folded = w.consume_front("~");
      o.variadic = w.consume_back("*");
      o.name = w.str();
      s.operands.push_back(o);
    }
    words.clear();
    llvm::StringRef(r.attrs).split(words, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef w : words) {
      auto [name, type] = w.split(':');
      s.attrs.push_back({name.str(), parseType(r.name, type)});
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

const AttrSpec *OpSpec::attr(llvm::StringRef n) const {
  for (const AttrSpec &a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

bool OpSpec::hasFoldedOperands() const {
  for (const OperandSpec &o : operands)
    if (o.folded) return true;
  return false;
}

const std::vector<OpSpec> &opTable() {
  static const std::vector<OpSpec> table = build();
  return table;
}

const OpSpec *lookupOp(llvm::StringRef name) {
  static const llvm::StringMap<const OpSpec *> index = [] {
    llvm::StringMap<const OpSpec *> m;
    for (const OpSpec &s : opTable()) m[s.name] = &s;
    return m;
  }();
  if (name.starts_with("tosa.custom:")) name = "tosa.custom";
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

}  // namespace kiln::ops
