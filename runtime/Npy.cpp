#include "runtime/Npy.h"
#include "runtime/Error.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
namespace {

const char kMagic[] = "\x93NUMPY";

// Value of `'key': <value>` in the header dict, up to the next top-level ',' or '}'.
llvm::StringRef dictValue(llvm::StringRef header, llvm::StringRef key) {
  std::string pat = "'" + key.str() + "'";
  size_t pos = header.find(pat);
  if (pos == llvm::StringRef::npos) return {};
  llvm::StringRef rest = header.drop_front(pos + pat.size()).ltrim();
  if (!rest.consume_front(":")) return {};
  rest = rest.ltrim();
  if (rest.starts_with("(")) return rest.substr(0, rest.find(')') + 1);
  return rest.substr(0, rest.find_first_of(",}")).trim();
}

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
  llvm::StringRef descr = dictValue(header, "descr").trim("'\" ");
  auto dtype = dtypeFromNpyDescr(descr);
  if (!dtype) return fail("unsupported dtype '" + descr + "'");
  if (descr.starts_with(">")) return fail("big-endian data is not supported");
  if (dictValue(header, "fortran_order") != "False")
    return fail("Fortran-ordered arrays are not supported");
  llvm::StringRef shapeValue = dictValue(header, "shape");
  if (shapeValue.empty()) return fail("the header has no 'shape'");
  llvm::StringRef shapeText = shapeValue.trim("() ");
  Shape shape;
  llvm::SmallVector<llvm::StringRef, 6> parts;
  shapeText.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef p : parts) {
    int64_t d;
    if (p.trim().getAsInteger(10, d) || d < 0) return fail("bad shape '" + shapeText + "'");
    shape.push_back(d);
  }
  llvm::StringRef payload = bytes.drop_front(headerStart + headerLen);
  size_t need = TensorType{*dtype, shape}.byteSize();  // saturates: never wraps to a small size
  if (need == SIZE_MAX) return fail("shape " + shapeToString(shape) + " has more bytes than 64 bits can count");
  if (payload.size() != need)
    return fail("payload has " + llvm::Twine(payload.size()) + " bytes, shape " + shapeToString(shape) + " needs " +
                llvm::Twine(need));
  return Tensor::fromHost(*dtype, shape, payload.data());
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
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec) return error(ErrorCode::kIO, "cannot write '%s': %s", path.str().c_str(), ec.message().c_str());
  os << serializeNpy(t);
  os.close();
  if (os.has_error())
    return error(ErrorCode::kIO, "cannot write '%s': %s", path.str().c_str(),
                                   os.error().message().c_str());
  return llvm::Error::success();
}

}  // namespace kiln
