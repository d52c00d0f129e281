#include "runtime/Npy.h"
#include "runtime/Error.h"
#include "runtime/FileIO.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
namespace {

const char kMagic[] = "\x93NUMPY";

/// The header dict, parsed as the Python literal it is (NumPy reads it with
/// ast.literal_eval and insists on exactly these three keys): string keys,
/// values that are strings, True/False or tuples of non-negative integers.
/// Anything else -- another key, a duplicate, a NUL, text after the dict --
/// is refused, as NumPy refuses it.
struct NpyHeader {
  std::string descr;
  bool fortranOrder = false;
  Shape shape;
};

class HeaderParser {
public:
  explicit HeaderParser(llvm::StringRef text) : s_(text) {}

  llvm::Expected<NpyHeader> parse() {
    NpyHeader h;
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    if (!eat('{')) return fail("the header is not a dict");
    skipSpace();
    while (!eat('}')) {
      std::string key;
      if (auto err = string(key)) return std::move(err);
      skipSpace();
      if (!eat(':')) return fail("':' expected after '" + key + "'");
      skipSpace();
      if (key == "descr") {
        if (haveDescr) return fail("'descr' appears twice");
        haveDescr = true;
        if (auto err = string(h.descr)) return std::move(err);
      } else if (key == "fortran_order") {
        if (haveOrder) return fail("'fortran_order' appears twice");
        haveOrder = true;
        if (s_.consume_front("True")) h.fortranOrder = true;
        else if (s_.consume_front("False")) h.fortranOrder = false;
        else return fail("'fortran_order' is not True or False");
      } else if (key == "shape") {
        if (haveShape) return fail("'shape' appears twice");
        haveShape = true;
        if (auto err = tuple(h.shape)) return std::move(err);
      } else {
        return fail("unexpected key '" + key + "' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      skipSpace();
      if (eat(',')) {
        skipSpace();
        continue;
      }
      skipSpace();
      if (!eat('}')) return fail("',' or '}' expected after the value of '" + key + "'");
      break;
    }
    skipSpace();
    if (!s_.empty()) return fail("unexpected text after the header dict");
    if (!haveDescr || !haveOrder || !haveShape)
      return fail(std::string("the header has no '") + (!haveDescr ? "descr" : !haveOrder ? "fortran_order" : "shape") +
                  "'");
    return h;
  }

private:
  llvm::Error fail(const llvm::Twine &why) { return error(ErrorCode::kIO, "%s", why.str().c_str()); }
  bool eat(char c) { return s_.consume_front(llvm::StringRef(&c, 1)); }
  // Python whitespace between tokens (the header ends with spaces and '\n').
  void skipSpace() { s_ = s_.ltrim(" \t\n\r\f\v"); }
  llvm::Error string(std::string &out) {
    if (s_.empty() || (s_[0] != '\'' && s_[0] != '"')) return fail("a quoted string expected");
    char quote = s_[0];
    size_t end = s_.find(quote, 1);
    if (end == llvm::StringRef::npos) return fail("unterminated string");
    llvm::StringRef body = s_.substr(1, end - 1);
    // Plain printable text only: NumPy's keys and dtype strings need no
    // escapes, and a backslash or control byte is not worth interpreting.
    for (char c : body)
      if (static_cast<unsigned char>(c) < 0x20 || c == '\\' || static_cast<unsigned char>(c) >= 0x7f)
        return fail("unexpected byte in a header string");
    out = body.str();
    s_ = s_.drop_front(end + 1);
    return llvm::Error::success();
  }
  llvm::Error tuple(Shape &out) {
    if (!eat('(')) return fail("'shape' is not a tuple");
    skipSpace();
    bool trailingComma = false;
    while (!eat(')')) {
      size_t digits = 0;
      while (digits < s_.size() && llvm::isDigit(s_[digits])) ++digits;
      int64_t d;
      if (!digits || digits > 18 || s_.substr(0, digits).getAsInteger(10, d))
        return fail("'shape' holds something that is not a non-negative integer");
      out.push_back(d);
      s_ = s_.drop_front(digits);
      skipSpace();
      trailingComma = eat(',');
      skipSpace();
      if (!trailingComma && !s_.starts_with(")")) return fail("',' or ')' expected in 'shape'");
    }
    if (out.size() == 1 && !trailingComma) return fail("'shape' (n) is not a tuple; a 1-d shape is written (n,)");
    return llvm::Error::success();
  }
  llvm::StringRef s_;
};

}  // namespace

llvm::Expected<Tensor> parseNpy(llvm::StringRef bytes, llvm::StringRef name) {
  auto fail = [&](const llvm::Twine &why) {
    return error(ErrorCode::kIO, "%s: not a valid .npy file: %s", name.str().c_str(),
                                   why.str().c_str());
  };
  if (!bytes.starts_with(llvm::StringRef(kMagic, 6)) || bytes.size() < 10)
    return fail("missing \\x93NUMPY magic");
  uint8_t major = uint8_t(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail("truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i) headerLen |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return fail("unsupported format version " + llvm::Twine(int(major)));
  }
  if (headerStart + headerLen > bytes.size()) return fail("truncated header");
  llvm::StringRef header = bytes.substr(headerStart, headerLen);
  if (header.contains('\0')) return fail("the header holds a NUL byte");
  auto parsed = HeaderParser(header).parse();
  if (!parsed) return fail("bad header: " + toStatus(parsed.takeError()).message);
  llvm::StringRef descr = parsed->descr;
  auto dtype = dtypeFromNpyDescr(descr);
  if (!dtype) return fail("unsupported dtype '" + descr + "'");
  if (descr.starts_with(">")) return fail("big-endian data is not supported");
  if (parsed->fortranOrder) return fail("Fortran-ordered arrays are not supported");
  Shape shape = parsed->shape;
  llvm::StringRef payload = bytes.drop_front(headerStart + headerLen);
  size_t need = TensorType{*dtype, shape}.byteSize();  // saturates: never wraps to a small size
  if (need == SIZE_MAX) return fail("shape " + shapeToString(shape) + " has more bytes than 64 bits can count");
  if (payload.size() != need)
    return fail("payload has " + llvm::Twine(payload.size()) + " bytes, shape " + shapeToString(shape) + " needs " +
                llvm::Twine(need));
  auto t = Tensor::allocate(*dtype, shape, name.str());
  if (!t) return t.takeError();
  if (need) std::memcpy(t->rawData(), payload.data(), need);
  return t;
}

llvm::Expected<Tensor> readNpy(llvm::StringRef path) {
  // A regular file (links are followed), not a device or FIFO, that fits in memory.
  llvm::sys::fs::file_status st;
  if (auto ec = llvm::sys::fs::status(path, st))
    return error(ErrorCode::kIO, "cannot read '%s': %s", path.str().c_str(), ec.message().c_str());
  if (st.type() != llvm::sys::fs::file_type::regular_file)
    return error(ErrorCode::kInvalidArgument, "'%s' is not a regular file", path.str().c_str());
  if (auto err = checkAllocatable(st.getSize(), "'" + path.str() + "'")) return std::move(err);
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return error(ErrorCode::kIO, "cannot read '%s': %s", path.str().c_str(),
                                   buf.getError().message().c_str());
  return parseNpy((*buf)->getBuffer(), path);
}

std::string serializeNpy(const Tensor &t) {
  std::string tuple;
  for (int64_t d : t.shape()) tuple += (tuple.empty() ? "" : ", ") + std::to_string(d);
  if (t.rank() == 1) tuple += ",";
  std::string dict = "{'descr': '" + std::string(npyDescr(t.dtype())) +
                     "', 'fortran_order': False, 'shape': (" + tuple + ")";
  dict += ", }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += char(1);
  out += char(0);
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  out += dict;
  out.append(static_cast<const char *>(t.rawData()), t.byteSize());
  return out;
}

llvm::Error writeNpy(llvm::StringRef path, const Tensor &t) {
  // A temporary file beside the name, renamed over it: a link, FIFO or hard
  // link at `path` is replaced, never written through.
  return writeFileReplacing(path, serializeNpy(t));
}

}  // namespace kiln
