#include "runtime/DType.h"

namespace kiln {
namespace {
struct Row {
  DType id;
  std::string_view name;
  size_t bytes;
  bool isFloat;
  std::string_view npy;
};
constexpr Row kRows[] = {
#define KILN_DTYPE(ID, NAME, BYTES, FLOAT, CTYPE, NPY) {DType::ID, NAME, BYTES, FLOAT != 0, NPY},
#include "runtime/DTypes.def"
#undef KILN_DTYPE
};
const Row &row(DType t) { return kRows[size_t(t)]; }  // the enum is declared in table order
}  // namespace

size_t dtypeSize(DType t) { return row(t).bytes; }
std::string_view dtypeName(DType t) { return row(t).name; }
bool isFloat(DType t) { return row(t).isFloat; }
std::string_view npyDescr(DType t) { return row(t).npy; }

std::optional<DType> parseDType(std::string_view n) {
  if (n == "u8") return DType::u8;
  for (const Row &r : kRows)
    if (r.name == n) return r.id;
  return std::nullopt;
}

std::optional<DType> dtypeFromNpyDescr(std::string_view d) {
  if (d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=')) d.remove_prefix(1);
  for (const Row &r : kRows)
    if (r.npy.substr(1) == d) return r.id;
  return std::nullopt;
}

}  // namespace kiln
