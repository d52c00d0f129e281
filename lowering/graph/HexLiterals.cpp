// Big hex literals in MLIR text, decoded outside MLIR's parser.
//
// torch-mlir and MLIR's printer write every weight as `dense<"0x...">`: a
// model's text is almost all hex (ResNet-50: 205 MB). MLIR's lexer reads a
// string literal a character at a time, then decodes it, hashes it and
// copies it into the context: 300 of ResNet-50's 590 ms load. Here each
// float literal of kMinLiftBytes or more becomes `dense_resource<key>`
// before parsing, its bytes decoded once into a blob that the parsed
// attribute then holds. So is the data of each builtin resource of
// kMinLiftBytes or more in the `{-# dialect_resources #-}` section (where
// torch-mlir writes weights as `dense_resource`s): the parser then reads an
// empty blob of the same alignment, replaced once parsed. Line numbers stay
// those of the file; columns after a lifted literal on its own line move
// left.
#include "lowering/graph/Passes.h"
#include "lowering/graph/ProgramImpl.h"

#include "mlir/IR/AsmState.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ThreadPool.h"

#include <atomic>
#include <cctype>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::lowering {
namespace {

/// Float literals smaller than this stay the parser's (scalars: not worth a
/// blob and a task). Bigger ones are lifted however small: torch-mlir's
/// TOSA writes every per-channel parameter as a `dense<"0x...">` literal
/// (MobileNetV3-small: 40 under 64 KiB, 1.9 MB of hex, which MLIR's lexer
/// read a character at a time and the context hashed; its cold start 57 ->
/// 49 ms, ShuffleNetV2's 75 -> 58, bench/peers/cold.py). The load-time
/// rewrites fold them as resources all the same (every zoo model's
/// `graph rewrites at load` unchanged). Integer literals (shapes, tables)
/// are never lifted (floatBytes).
/// The same for resources: a model's per-channel parameters (RegNetY-400MF:
/// 286 resources under 64 KiB, 3 MB of hex) cost MLIR's lexer 20 ms a
/// character at a time.
constexpr size_t kMinLiftBytes = 256;
/// Decoded bytes per task (a big literal is many tasks).
constexpr size_t kDecodeChunk = 1 << 20;

/// Bytes per element of a float element type name, 0 for others.
size_t floatBytes(llvm::StringRef elem) {
  if (elem == "f32") return 4;
  if (elem == "f16" || elem == "bf16") return 2;
  if (elem == "f64") return 8;
  return 0;
}

/// The element count and element type of the static tensor type at the
/// start of `code` (`> : tensor<2x3xf32>` after a literal); {0, ""} when it
/// is not one.
std::pair<size_t, llvm::StringRef> tensorType(llvm::StringRef code) {
  code = code.ltrim(" ");
  if (!code.consume_front(">")) return {0, ""};
  code = code.ltrim(" ");
  if (!code.consume_front(":")) return {0, ""};
  code = code.ltrim(" ");
  if (!code.consume_front("tensor<")) return {0, ""};
  size_t close = code.find('>');
  if (close == llvm::StringRef::npos) return {0, ""};
  llvm::StringRef body = code.take_front(close);
  size_t elements = 1;
  for (;;) {
    size_t x = body.find('x');
    if (x == llvm::StringRef::npos) break;
    uint64_t d = 0;
    if (body.take_front(x).getAsInteger(10, d) || d > (uint64_t(1) << 40)) return {0, ""};  // also `?`
    elements *= size_t(d);
    body = body.drop_front(x + 1);
  }
  return {elements, body};
}

/// The bytes of the static float tensor type at the start of `code`, 0
/// when it is not one.
size_t typeBytes(llvm::StringRef code) {
  auto [elements, element] = tensorType(code);
  return elements * floatBytes(element);
}

/// The value of hex digit `c` ((c & 15) + 9 for letters, whose bit 6 is
/// set), and whether it is one.
inline uint8_t digit(uint8_t c, unsigned &bad) {
  unsigned lower = c | 0x20u;
  bad |= unsigned(!((c >= '0' && c <= '9') || (lower >= 'a' && lower <= 'f')));
  return uint8_t((c & 15) + 9 * (c >> 6));
}

#if defined(__x86_64__)
/// decodeHex's vector loop at 32 digits a time (AVX2): the bytes decoded
/// (a multiple of 16) and whether a character was not a hex digit.
__attribute__((target("avx2"))) size_t decodeHex32(const char *hex, char *out, size_t n, bool &bad) {
  const __m256i lo4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1), lowerBit = _mm256_set1_epi8(0x20);
  const __m256i below0 = _mm256_set1_epi8('0' - 1), above9 = _mm256_set1_epi8('9' + 1);
  const __m256i belowA = _mm256_set1_epi8('a' - 1), aboveF = _mm256_set1_epi8('f' + 1);
  const __m256i lowByte = _mm256_set1_epi16(0x00FF);
  __m256i valid = _mm256_set1_epi8(-1);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(hex + 2 * i));
    // As the SSE2 loop: digits or letters, nibble = (c & 15) + 9 * bit 6.
    __m256i isDigit = _mm256_and_si256(_mm256_cmpgt_epi8(c, below0), _mm256_cmpgt_epi8(above9, c));
    __m256i lc = _mm256_or_si256(c, lowerBit);
    __m256i isLetter = _mm256_and_si256(_mm256_cmpgt_epi8(lc, belowA), _mm256_cmpgt_epi8(aboveF, lc));
    valid = _mm256_and_si256(valid, _mm256_or_si256(isDigit, isLetter));
    __m256i b6 = _mm256_and_si256(_mm256_srli_epi16(c, 6), one);
    __m256i nib = _mm256_add_epi8(_mm256_and_si256(c, lo4), _mm256_add_epi8(_mm256_slli_epi16(b6, 3), b6));
    __m256i bytes =
        _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(nib, lowByte), 4), _mm256_srli_epi16(nib, 8));
    // Packed within each 128-bit half; the two halves' 8 bytes side by side.
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(bytes, bytes), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), _mm256_castsi256_si128(packed));
  }
  bad = unsigned(_mm256_movemask_epi8(valid)) != 0xFFFFFFFFu;
  return i;
}
#endif

/// Decodes 2 * n hex digits at `hex` into n bytes at `out`; false on a
/// character that is not a hex digit. 32 digits at a time with AVX2 where
/// the host has it (ResNet-50's 205 MB of hex: 74 -> 43 ms of CPU, perf
/// samples of its load; its load 118 -> 109 ms, medians of 4 alternating),
/// else 16 with SSE2 (the scalar loop ran at 0.3 GB/s: 700 ms for
/// ResNet-50's weights).
bool decodeHex(const char *hex, char *out, size_t n) {
  unsigned bad = 0;
  size_t i = 0;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && n >= 16) {
    bool wide = false;
    i = decodeHex32(hex, out, n, wide);
    bad |= unsigned(wide);
  }
#endif
#if defined(__SSE2__)
  const __m128i lo4 = _mm_set1_epi8(0x0F), one = _mm_set1_epi8(1), lowerBit = _mm_set1_epi8(0x20);
  __m128i invalid = _mm_setzero_si128();
  for (; i + 8 <= n; i += 8) {  // (from where the AVX2 loop stopped)
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(hex + 2 * i));
    // Digits '0'..'9' or letters a..f / A..F; bytes >= 0x80 compare negative and fail both.
    __m128i isDigit = _mm_and_si128(_mm_cmpgt_epi8(c, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(c, _mm_set1_epi8('9' + 1)));
    __m128i lc = _mm_or_si128(c, lowerBit);
    __m128i isLetter = _mm_and_si128(_mm_cmpgt_epi8(lc, _mm_set1_epi8('a' - 1)), _mm_cmplt_epi8(lc, _mm_set1_epi8('f' + 1)));
    invalid = _mm_or_si128(invalid, _mm_andnot_si128(_mm_or_si128(isDigit, isLetter), _mm_set1_epi8(-1)));
    // Nibble = (c & 15) + 9 * bit 6.
    __m128i b6 = _mm_and_si128(_mm_srli_epi16(c, 6), one);
    __m128i nib = _mm_add_epi8(_mm_and_si128(c, lo4), _mm_add_epi8(_mm_slli_epi16(b6, 3), b6));
    // Per 16-bit lane: first digit in the low byte (high nibble), second in the high byte.
    __m128i bytes = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(nib, _mm_set1_epi16(0x00FF)), 4), _mm_srli_epi16(nib, 8));
    _mm_storel_epi64(reinterpret_cast<__m128i *>(out + i), _mm_packus_epi16(bytes, bytes));
  }
  bad |= unsigned(_mm_movemask_epi8(invalid));
#endif
  for (; i < n; ++i) {
    uint8_t h = digit(uint8_t(hex[2 * i]), bad), l = digit(uint8_t(hex[2 * i + 1]), bad);
    out[i] = char((h << 4) | l);
  }
  return !bad;
}

/// A boolean literal (`dense<"0x..."> : tensor<...xi1>`) as MLIR after 22
/// writes it, one byte per element (torch-mlir's wheels are built on such
/// an MLIR: GPT-Neo's causal mask), in the form MLIR 22 reads: bits packed
/// eight to a byte, element 0 in bit 0; and that MLIR's one-byte splat of
/// `true` (0x01) as 22's (0xFF). nullopt for anything else: a literal MLIR
/// 22 wrote, or one of 2-8 elements in one byte, which either could have.
std::optional<std::string> packedBooleans(llvm::StringRef literal, llvm::StringRef typeText) {
  auto [elements, element] = tensorType(typeText);
  if (element != "i1" || elements < 2 || !literal.starts_with("0x") || literal.size() % 2) return std::nullopt;
  size_t bytes = (literal.size() - 2) / 2;
  if (bytes == 1 && elements > 8 && literal.drop_front(2) == "01") return std::string("0xFF");
  if (bytes != elements) return std::nullopt;
  std::string values(bytes, '\0');
  if (!decodeHex(literal.data() + 2, values.data(), bytes)) return std::nullopt;
  std::string packed((elements + 7) / 8, '\0');
  for (size_t i = 0; i < elements; ++i) {
    if (uint8_t(values[i]) > 1) return std::nullopt;  // not booleans of a byte each
    if (values[i]) packed[i / 8] = char(uint8_t(packed[i / 8]) | uint8_t(1u << (i % 8)));
  }
  return "0x" + llvm::toHex(packed);
}

/// Follows the code of a `{-# ... #-}` resource section, stretch by stretch
/// (string literals left out), far enough to tell where a literal is the
/// value of a `builtin` dialect resource: `dialect_resources: { builtin: {
/// key: "0x..." } }`.
class ResourceSection {
public:
  void feed(llvm::StringRef code) {
    for (size_t i = 0; i < code.size();) {
      char c = code[i];
      if (std::isalpha(uint8_t(c)) || c == '_') {
        size_t j = i + 1;
        while (j < code.size() && (std::isalnum(uint8_t(code[j])) || llvm::is_contained("_$.-", code[j]))) ++j;
        word_ = code.slice(i, j).str();
        key_.clear();
        i = j;
        continue;
      }
      if (c == ':') {
        key_ = std::move(word_);
      } else if (c == '{') {
        open_.push_back(key_.empty() ? word_ : key_);
        key_.clear();
      } else if (c == '}') {
        if (!open_.empty()) open_.pop_back();
        key_.clear();
      } else if (!std::isspace(uint8_t(c))) {
        key_.clear();
      }
      word_.clear();
      ++i;
    }
  }
  /// The key whose value the next literal is, if it is a builtin resource's
  /// (bare keys only); forgets it.
  std::string takeBuiltinKey() {
    std::string key = std::move(key_);
    key_.clear();
    bool builtin = open_.size() == 2 && open_[0] == "dialect_resources" && open_[1] == "builtin";
    return builtin ? key : std::string();
  }

private:
  std::vector<std::string> open_;  // the names of the open braces
  std::string word_, key_;
};

}  // namespace

std::optional<LiftedText> liftHexLiterals(llvm::StringRef source, llvm::ArrayRef<std::pair<size_t, size_t>> code) {
  for (auto [begin, end] : code)  // a key of the file's own: leave the text alone
    if (source.slice(begin, end).contains("__kiln_hex")) return std::nullopt;
  LiftedText lifted;
  std::vector<LiftedText::Decode> &decodes = lifted.decodes;
  size_t copied = 0;  // source bytes up to here are in lifted.text
  auto textUpTo = [&](size_t at) {
    if (lifted.text.empty()) lifted.text.reserve(source.size() / 64 + 4096);
    lifted.text.append(source.data() + copied, at - copied);
  };
  auto decodeLater = [&](const char *hex, mlir::AsmResourceBlob &blob) {
    size_t bytes = blob.getData().size();
    for (size_t at = 0; at < bytes; at += kDecodeChunk)
      decodes.push_back({hex + 2 * at, blob.getMutableData().data() + at, std::min(kDecodeChunk, bytes - at)});
  };
  bool inResources = false;
  ResourceSection section;
  for (size_t s = 0; s + 1 < code.size(); ++s) {
    size_t quote = code[s].second, next = code[s + 1].first;  // a literal or a comment between
    llvm::StringRef stretch = source.slice(code[s].first, quote);
    if (!inResources) {
      if (size_t at = stretch.find("{-#"); at != llvm::StringRef::npos) {
        inResources = true;
        stretch = stretch.drop_front(at + 3);
      }
    }
    if (inResources) {
      // A builtin resource (`key: "0x<alignment, 4 bytes><data>"`, where
      // torch-mlir puts every weight): its data is decoded here, and the
      // parser reads only the alignment (an empty blob, replaced after the
      // parse). MLIR's lexer took 2.5 s over GPT-2's 995 MB of text.
      section.feed(stretch);
      std::string key = section.takeBuiltinKey();
      if (key.empty() || source[quote] != '"' || source[next - 1] != '"') continue;
      llvm::StringRef literal = source.slice(quote + 1, next - 1);
      if (!literal.starts_with("0x") || literal.size() < 10 + 2 * kMinLiftBytes || literal.size() % 2)
        continue;
      uint8_t a[4];
      if (!decodeHex(literal.data() + 2, reinterpret_cast<char *>(a), 4)) continue;
      uint32_t alignment = uint32_t(a[0]) | uint32_t(a[1]) << 8 | uint32_t(a[2]) << 16 | uint32_t(a[3]) << 24;
      // Not a power of two, or beyond a page: the parser's (and its error).
      if (!alignment || (alignment & (alignment - 1)) || alignment > 4096) continue;
      mlir::AsmResourceBlob blob =
          mlir::HeapAsmResourceBlob::allocate((literal.size() - 10) / 2, alignment, /*dataIsMutable=*/true);
      decodeLater(literal.data() + 10, blob);
      textUpTo(quote + 1 + 10);  // the quote, "0x" and the alignment
      copied = next - 1;         // from the closing quote
      lifted.blobs.emplace_back(std::move(key), std::move(blob));
      continue;
    }
    if (source[quote] != '"' || source[next - 1] != '"' || !stretch.ends_with("dense<")) continue;
    llvm::StringRef literal = source.slice(quote + 1, next - 1);  // without its quotes
    if (std::optional<std::string> packed = packedBooleans(literal, source.slice(next, code[s + 1].second))) {
      textUpTo(quote + 1);
      lifted.text += *packed;
      copied = next - 1;  // from the closing quote
      ++lifted.rewrittenBooleans;
      continue;
    }
    if (!literal.starts_with("0x") || literal.size() < 2 + 2 * kMinLiftBytes || literal.size() % 2) continue;
    size_t bytes = (literal.size() - 2) / 2;
    if (typeBytes(source.slice(next, code[s + 1].second)) != bytes) continue;  // e.g. a splat, or i1
    mlir::AsmResourceBlob blob = mlir::HeapAsmResourceBlob::allocate(bytes, 64, /*dataIsMutable=*/true);
    decodeLater(literal.data() + 2, blob);  // by HexDecoding, while the text parses
    std::string key = kLiftedBlobPrefix.str() + std::to_string(lifted.blobs.size());
    textUpTo(quote - std::strlen("dense<"));
    lifted.text += "dense_resource<" + key;
    copied = next;  // from the '>' that closed dense<...>
    lifted.blobs.emplace_back(std::move(key), std::move(blob));
  }
  if (lifted.blobs.empty() && !lifted.rewrittenBooleans) return std::nullopt;
  lifted.text.append(source.data() + copied, source.size() - copied);
  return lifted;
}

// The decode (and the first touch of each blob's fresh pages, as costly as
// the decode itself) on every core: EfficientNet-B0's 21 MB took 22 ms on
// one thread of a 2-core machine. Started before the parse, on the pool's
// threads, while the calling thread parses (RegNetY-400MF's 17 MB: 14 ms
// on both cores, then a parse of 12-16).
HexDecoding::HexDecoding(const LiftedText &lifted, llvm::ThreadPoolInterface *pool) : decodes_(lifted.decodes) {
  if (!pool || decodes_.size() < 2) return;  // wait() decodes
  group_ = std::make_unique<llvm::ThreadPoolTaskGroup>(*pool);
  unsigned tasks = std::min<size_t>(pool->getMaxConcurrency(), decodes_.size());
  for (unsigned t = 0; t < tasks; ++t) group_->async([this] { work(); });
}

void HexDecoding::work() {
  for (size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < decodes_.size();)
    if (!decodeHex(decodes_[i].hex, decodes_[i].out, decodes_[i].bytes)) bad_.store(true, std::memory_order_relaxed);
}

bool HexDecoding::wait() {
  work();  // this thread takes what the pool has not
  if (group_) {
    group_->wait();
    group_.reset();
  }
  return !bad_.load();
}

}  // namespace kiln::lowering
