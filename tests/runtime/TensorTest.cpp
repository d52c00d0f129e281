#include "runtime/Error.h"
#include "runtime/HostBlocks.h"
#include "runtime/Npy.h"
#include "runtime/Tensor.h"
#include "tests/TestUtil.h"

#include "llvm/Support/FileSystem.h"

#include <atomic>
#include <cstring>
#include <vector>
#include <thread>

using namespace kiln;

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtypeSize(DType::f32), 4u);
  EXPECT_EQ(dtypeSize(DType::bf16), 2u);
  EXPECT_EQ(dtypeSize(DType::i1), 1u);
  EXPECT_EQ(dtypeSize(DType::i64), 8u);
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i64, DType::i32,
                  DType::i16, DType::i8, DType::u8, DType::i1})
    EXPECT_EQ(parseDType(dtypeName(t)), t);
  EXPECT_FALSE(parseDType("f17").has_value());
}

TEST(Tensor, AlignedRefCountedBuffers) {
  Tensor a = Tensor::empty(DType::f32, {3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.rawData()) % kBufferAlignment, 0u);
  EXPECT_EQ(a.numElements(), 15);
  EXPECT_EQ(a.byteSize(), 60u);
  EXPECT_EQ(a.strides(), (Shape{5, 1}));
  Tensor b = a;  // shares the buffer
  EXPECT_EQ(a.buffer().get(), b.buffer().get());
  EXPECT_EQ(a.buffer()->UseCount(), 2u);
}

TEST(Tensor, FromHostCopiesAndReadsBack) {
  std::vector<int64_t> v = {1, -2, 3, 1LL << 40};
  Tensor t = Tensor::fromVector<int64_t>(DType::i64, {2, 2}, v);
  v[0] = 99;
  EXPECT_EQ(t.toVector<int64_t>(), (std::vector<int64_t>{1, -2, 3, 1LL << 40}));
  EXPECT_EQ(t.type().str(), "2x2xi64");
  EXPECT_DOUBLE_EQ(t.elementAsDouble(3), double(1LL << 40));
}

TEST(Tensor, WrapKeepsOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  Tensor t = Tensor::wrap(DType::f32, {3}, owner->data(), owner);
  std::weak_ptr<std::vector<float>> weak = owner;
  owner.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(t.toVector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_FALSE(t.buffer()->ownsMemory());
  t = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(Tensor, ShapesParseAndPrint) {
  EXPECT_EQ(shapeToString({1, kDynamic, 3}), "1x?x3");
  auto s = parseShape("1x224x224x3");
  ASSERT_TRUE(bool(s));
  EXPECT_EQ(*s, (Shape{1, 224, 224, 3}));
  EXPECT_NE(test::errorOf(parseShape("1xbx3")).find("'b'"), std::string::npos);
  EXPECT_TRUE(bool(parseShape("?x3", /*allowDynamic=*/true)));
}

TEST(Tensor, HalfAndBf16Conversions) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(halfToFloat(floatToHalf(f)), f) << f;
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(floatToBf16(-3.0f)), -3.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(1e6f))));
}

TEST(Npy, RoundTripsEveryDType) {
  for (DType t : {DType::f32, DType::f16, DType::f64, DType::i64, DType::i32, DType::i8,
                  DType::u8, DType::i1}) {
    Tensor x = Tensor::empty(t, {2, 3});
    for (size_t i = 0; i < x.byteSize(); ++i) x.data<uint8_t>()[i] = uint8_t(t == DType::i1 ? i % 2 : i * 7);
    auto y = parseNpy(serializeNpy(x), "mem");
    ASSERT_TRUE(bool(y)) << llvm::toString(y.takeError());
    EXPECT_EQ(y->type(), x.type());
    EXPECT_EQ(0, std::memcmp(y->rawData(), x.rawData(), x.byteSize()));
  }
  Tensor scalar = Tensor::fromVector<float>(DType::f32, {}, std::vector<float>{4.5f});
  auto s = parseNpy(serializeNpy(scalar), "mem");
  ASSERT_TRUE(bool(s));
  EXPECT_EQ(s->rank(), 0);
  Tensor vec = Tensor::fromVector<float>(DType::f32, {2}, std::vector<float>{1, 2});
  EXPECT_NE(serializeNpy(vec).find("'shape': (2,)"), std::string::npos);
}

TEST(Npy, RejectsBadFiles) {
  EXPECT_NE(test::errorOf(parseNpy("hello", "x.npy")).find("x.npy: not a valid .npy file"),
            std::string::npos);
  Tensor x = Tensor::empty(DType::f32, {4, 4});
  std::string bytes = serializeNpy(x);
  EXPECT_NE(test::errorOf(parseNpy(bytes.substr(0, bytes.size() - 8), "t.npy")).find("payload"),
            std::string::npos);
  EXPECT_NE(test::errorOf(readNpy("/nonexistent/dir/x.npy")).find("cannot read"),
            std::string::npos);
}

// Issue 14: sizes never wrap; the payload is exactly the shape's bytes.
TEST(Npy, SizesNeverWrapAndPayloadsAreExact) {
  auto npy = [](const std::string &shape, size_t payload) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
    std::string out("\x93NUMPY\x01\x00", 8);
    out += char(header.size() & 0xff);
    out += char(header.size() >> 8);
    return out + header + std::string(payload, '\0');
  };
  // 2^58 * 64 elements wraps to 0 bytes in 64-bit arithmetic.
  EXPECT_NE(test::errorOf(parseNpy(npy("(288230376151711744, 64)", 0), "w.npy")).find("more bytes than 64 bits"),
            std::string::npos);
  EXPECT_NE(test::errorOf(parseNpy(npy("(2, 2)", 17), "x.npy")).find("payload has 17 bytes, shape 2x2 needs 16"),
            std::string::npos);
  EXPECT_TRUE(bool(parseNpy(npy("(2, 2)", 16), "ok.npy")));
  std::string noShape = npy("(2, 2)", 16);
  noShape.replace(noShape.find("'shape'"), 7, "'shapf'");
  EXPECT_NE(test::errorOf(parseNpy(noShape, "s.npy")).find("unexpected key 'shapf'"), std::string::npos);
  // Saturating sizes.
  EXPECT_EQ(numElements({3, INT64_MAX}), kSizeOverflow);
  EXPECT_EQ((TensorType{DType::f32, {4294967296, 4294967296}}.byteSize()), SIZE_MAX);
  EXPECT_EQ((TensorType{DType::f32, {2, 3}}.byteSize()), 24u);
  EXPECT_NE(toStatus(checkAllocatable(SIZE_MAX, "x")).message.find("more bytes than 64 bits can count"),
            std::string::npos);
}

TEST(HugePageSlabs, AdoptMovesTheBytesOnceAndKeepsThemReadable) {
  const int64_t n = 300 * 1024;  // 1.2 MB of floats
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[size_t(i)] = float(i % 1000) * 0.5f;
  Tensor a = Tensor::fromVector<float>(DType::f32, {n}, values);
  Tensor b = Tensor::fromVector<float>(DType::f32, {16}, llvm::ArrayRef<float>(values).take_front(16));
  const void *before = a.rawData();
  HugePageSlabs slabs;
  EXPECT_TRUE(slabs.adopt(a));
  EXPECT_NE(a.rawData(), before);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.rawData()) % kBufferAlignment, 0u);
  EXPECT_EQ(a.toVector<float>(), values);
  Tensor copy = a;  // shares the relocated buffer
  EXPECT_EQ(copy.rawData(), a.rawData());
  // Claimed once: adopting again (here or elsewhere) leaves it in place.
  const void *moved = a.rawData();
  EXPECT_FALSE(slabs.adopt(a));
  EXPECT_FALSE(HugePageSlabs::shared().adopt(a));
  EXPECT_EQ(a.rawData(), moved);
  // A small tensor goes into the same slab, after the first one.
  EXPECT_TRUE(slabs.adopt(b));
  EXPECT_GE(static_cast<const char *>(b.rawData()), static_cast<const char *>(a.rawData()) + a.byteSize());
  EXPECT_EQ(b.toVector<float>(), std::vector<float>(values.begin(), values.begin() + 16));
}

TEST(HugePageSlabs, ReadersSeeTheSameValuesWhileABufferMoves) {
  // Calls read weights while the compile service moves them: every read
  // sees the old or the new memory, both with the same bytes.
  const int64_t n = 64 * 1024;
  std::vector<float> values(static_cast<size_t>(n), 0.25f);
  std::vector<Tensor> weights;
  for (int i = 0; i < 8; ++i) weights.push_back(Tensor::fromVector<float>(DType::f32, {n}, values));
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      do {
        for (const Tensor &w : weights) {
          const float *p = w.data<float>();
          double sum = 0;
          for (int64_t i = 0; i < n; i += 97) sum += p[i];
          if (sum != 0.25 * double((n + 96) / 97)) bad.fetch_add(1);
        }
      } while (!done.load());
    });
  HugePageSlabs slabs;
  for (const Tensor &w : weights) slabs.adopt(w);
  done.store(true);
  for (std::thread &t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// Host blocks of 64 KiB and more come back from a free list of their size
// (a steady stream of calls does not map, fault in and zero its outputs
// again); smaller ones and other alignments go to malloc; trim() returns
// the cached ones.
TEST(HostBlocks, LargeBlocksAreReusedBySizeSmallOnesAreNot) {
  HostBlocks &blocks = hostBlocks();
  blocks.trim();
  void *a = blocks.allocate(384 * 1024);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, 384 * 1024);
  blocks.release(a);
  EXPECT_EQ(blocks.cachedBytes(), 384u * 1024);
  void *b = blocks.allocate(384 * 1024 - 100);  // the same size class (whole pages)
  EXPECT_EQ(b, a);
  EXPECT_EQ(blocks.cachedBytes(), 0u);
  void *c = blocks.allocate(1024 * 1024);  // another class: a fresh block
  EXPECT_NE(c, a);
  blocks.release(b);
  blocks.release(c);
  EXPECT_EQ(blocks.cachedBytes(), (384u + 1024) * 1024);
  void *small = blocks.allocate(1000);
  blocks.release(small);
  EXPECT_EQ(blocks.cachedBytes(), (384u + 1024) * 1024);  // not kept
  for (size_t align : {128, 4096}) {
    void *p = blocks.allocate(200 * 1024, align);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << align;
    blocks.release(p);
  }
  blocks.trim();
  EXPECT_EQ(blocks.cachedBytes(), 0u);
  // Tensors' buffers take their blocks from here too (outside AddressSanitizer
  // builds, which keep malloc to check every use after free).
#if !defined(__SANITIZE_ADDRESS__)
  const void *first = nullptr;
  {
    auto t = Tensor::allocate(DType::f32, {96 * 1024}, "a test tensor");
    ASSERT_TRUE(bool(t));
    first = t->rawData();
  }
  EXPECT_GE(blocks.cachedBytes(), 384u * 1024);
  auto again = Tensor::allocate(DType::f32, {96 * 1024}, "a test tensor");
  ASSERT_TRUE(bool(again));
  EXPECT_EQ(again->rawData(), first);
#endif
}

// The blocks kept for reuse are memory the tensor limit does not count: at
// most a quarter of it waits in the lists.
TEST(HostBlocks, AMemoryLimitBoundsTheBlocksKept) {
  HostBlocks &blocks = hostBlocks();
  blocks.trim();
  uint64_t before = tensorMemoryLimit();
  setTensorMemoryLimit(4u << 20);  // a quarter: 1 MiB
  std::vector<void *> held;
  for (int i = 0; i < 8; ++i) held.push_back(blocks.allocate(256 * 1024));
  for (void *p : held) blocks.release(p);
  EXPECT_LE(blocks.cachedBytes(), 1u << 20);
  EXPECT_GT(blocks.cachedBytes(), 0u);
  setTensorMemoryLimit(before);
  blocks.trim();
}

TEST(HostBlocksDeathTest, ReleasingForeignMemoryAborts) {
  // A pointer malloc gave, released here, would corrupt the heap: abort at once.
  EXPECT_DEATH(
      {
        std::vector<char> foreign(256, 0);
        hostBlocks().release(foreign.data() + 128);
      },
      "");
}
