// Issue 31: files written only where they belong (outputs replace links,
// hard links and FIFOs at their names, never write through them; a full
// device is an error), .npy headers parsed as NumPy parses them, booleans
// checked, tensor memory that fails with errors rather than aborting.
#include "runtime/Error.h"
#include "runtime/FileIO.h"
#include "runtime/Npy.h"
#include "runtime/Poison.h"
#include "runtime/Tensor.h"
#include "tests/TestUtil.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <random>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kiln;

namespace {

/// Each suite's directories are named after it.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("kiln-file-test") {}
};

std::string readAll(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, false, false);
  return buf ? (*buf)->getBuffer().str() : "<unreadable>";
}
void writeText(const std::string &path, const std::string &text) { std::ofstream(path, std::ios::binary) << text; }
bool isRegular(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
}

/// A .npy file with `dict` as its header (padded as NumPy pads it).
std::string npyWithHeader(std::string dict, size_t payload) {
  dict += std::string(63 - (10 + dict.size()) % 64, ' ') + "\n";
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  return out + dict + std::string(payload, '\0');
}

}  // namespace

TEST(FileIO, OutputsReplaceLinksNeverWriteThroughThem) {
  TempDir dir, outside;
  std::string target = outside.path + "/precious", out = dir.path + "/out0.npy";
  writeText(target, "user data");
  ASSERT_EQ(::symlink(target.c_str(), out.c_str()), 0);
  ASSERT_FALSE(bool(writeNpy(out, Tensor::fromVector<float>(DType::f32, {2}, std::vector<float>{1, 2}))));
  EXPECT_EQ(readAll(target), "user data");
  EXPECT_TRUE(isRegular(out));
  EXPECT_TRUE(bool(readNpy(out)));

  // A dangling link: its target is not created.
  std::string dangling = dir.path + "/out1.npy", created = outside.path + "/created";
  ASSERT_EQ(::symlink(created.c_str(), dangling.c_str()), 0);
  ASSERT_FALSE(bool(writeFileReplacing(dangling, "x")));
  EXPECT_FALSE(llvm::sys::fs::exists(created));
  EXPECT_TRUE(isRegular(dangling));

  // A hard link: the other name keeps its bytes.
  std::string hard = dir.path + "/trace.json";
  ASSERT_EQ(::link(target.c_str(), hard.c_str()), 0);
  ASSERT_FALSE(bool(writeFileReplacing(hard, "{}")));
  EXPECT_EQ(readAll(target), "user data");
  EXPECT_EQ(readAll(hard), "{}");

  // A FIFO with no reader: replaced at once, never opened.
  std::string fifo = dir.path + "/out2.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_FALSE(bool(writeFileReplacing(fifo, "bytes")));
  EXPECT_TRUE(isRegular(fifo));

  // kRefuse: any existing name is an error, and nothing is written.
  auto refused = writeFileReplacing(out, "new", Existing::kRefuse);
  EXPECT_NE(test::errorOf(std::move(refused)).find("already exists"), std::string::npos);
  EXPECT_TRUE(bool(readNpy(out)));
  // No temporary file is left behind.
  int files = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir.path, ec), end; it != end && !ec; it.increment(ec)) ++files;
  EXPECT_EQ(files, 4);
}

// A device that fills up (here: a file-size limit, EFBIG) is a kiln error
// naming the file, not LLVM's fatal "IO failure on output stream"; nothing
// is left behind. Run in a child: the limit is per process.
TEST(FileIO, AFullDeviceIsAnError) {
  TempDir dir;
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    auto err = writeFileReplacing(dir.path + "/big.npy", std::string(1 << 20, 'x'));
    std::string msg = err ? toStatus(std::move(err)).message : "";
    bool left = llvm::sys::fs::exists(dir.path + "/big.npy");
    ::_exit(msg.find("cannot write '" + dir.path + "/big.npy'") != std::string::npos && !left ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  int files = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir.path, ec), end; it != end && !ec; it.increment(ec)) ++files;
  EXPECT_EQ(files, 0);
}

// The header is the Python literal NumPy writes; anything NumPy refuses is refused.
TEST(Npy, HeadersAreParsedAsNumPyParsesThem) {
  auto err = [](const std::string &dict, size_t payload = 16) {
    return test::errorOf(parseNpy(npyWithHeader(dict, payload), "h.npy"));
  };
  // A key hidden in another key's value is not the key.
  EXPECT_NE(err("{'note': \"'descr': '<f4'\", 'descr': '<i4', 'fortran_order': False, 'shape': (4,), }")
                .find("unexpected key 'note'"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'shape': (2, 2), }").find("twice"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (3,, 37), }").find("bad header"),
            std::string::npos);
  EXPECT_NE(err(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }") + '\0').find("NUL"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }").find("not a tuple"), std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }").find("bad header"), std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } junk").find("after the header"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'shape': (4,), }").find("no 'fortran_order'"), std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,), }").find("True or False"),
            std::string::npos);
  // What NumPy writes and accepts, in its variations.
  for (const char *ok : {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                         "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 2)}",
                         "{'shape': (2,2), 'fortran_order': False, 'descr': '<f4'}",
                         "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 4 , ) , }"}) {
    auto t = parseNpy(npyWithHeader(ok, 16), "ok.npy");
    EXPECT_TRUE(bool(t)) << ok << ": " << (t ? "" : toStatus(t.takeError()).message);
  }
  auto scalar = parseNpy(npyWithHeader("{'descr': '<i4', 'fortran_order': False, 'shape': (), }", 4), "s.npy");
  ASSERT_TRUE(bool(scalar));
  EXPECT_EQ(scalar->rank(), 0);
  EXPECT_EQ(scalar->dtype(), DType::i32);
}

// A grammar fuzzer over headers: whatever the header, a tensor or an error,
// and a tensor only when the header is one NumPy would read the same way.
TEST(Npy, FuzzedHeadersAreTensorsOrErrors) {
  std::mt19937 rng(31);
  const std::vector<std::string> keys = {"'descr'", "'fortran_order'", "'shape'", "'note'", "\"descr\"", "'descr '"};
  const std::vector<std::string> values = {"'<f4'", "'<i4'", "'|b1'", "'>f4'", "False", "True", "(4,)", "(2, 2)",
                                           "()", "(4)", "(,)", "(2,,2)", "((2,),)", "'", "\"'descr': '<f4'\"", "1", "None"};
  const std::vector<std::string> seps = {", ", ",", " , ", "", ",,", ": "};
  int tensors = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string dict = "{";
    int n = int(rng() % 5);
    for (int k = 0; k < n; ++k)
      dict += keys[rng() % keys.size()] + ": " + values[rng() % values.size()] + seps[rng() % seps.size()];
    dict += rng() % 8 ? "}" : "";
    auto t = parseNpy(npyWithHeader(dict, 16), "f.npy");
    if (t) {
      ++tensors;
      EXPECT_EQ(t->byteSize(), 16u) << dict;
    } else {
      llvm::consumeError(t.takeError());
    }
  }
  // (Tensors come only from the three right keys with right values.)
  RecordProperty("tensors", tensors);
}

TEST(Booleans, BytesOtherThanZeroAndOneAreErrors) {
  Tensor b = Tensor::fromVector<uint8_t>(DType::i1, {3}, std::vector<uint8_t>{0, 1, 2});
  EXPECT_NE(test::errorOf(checkBooleans(b, "input 0")).find("holds 2 at element 2"), std::string::npos);
  b.data<uint8_t>()[2] = 1;
  EXPECT_FALSE(bool(checkBooleans(b, "input 0")));
}

TEST(TensorMemory, AllocationFailuresAreErrorsNamingSizeAndPurpose) {
  auto neg = Tensor::allocate(DType::f32, {2, -3}, "input 0");
  EXPECT_NE(test::errorOf(neg.takeError()).find("dimension 1 of shape [2, -3] is -3"), std::string::npos);
  auto huge = Tensor::allocate(DType::f32, {int64_t(1) << 40, 1024}, "input 1");
  Status s = toStatus(huge.takeError());
  EXPECT_EQ(s.code, ErrorCode::kResourceExhausted);
  EXPECT_NE(s.message.find("input 1"), std::string::npos) << s.message;

  // The tensor memory limit bounds what is held; freeing makes room again.
  uint64_t before = tensorMemoryInUse();
  setTensorMemoryLimit(before + (8 << 20));
  auto a = Tensor::allocate(DType::f32, {1 << 20}, "a");  // 4 MiB
  ASSERT_TRUE(bool(a));
  EXPECT_GE(tensorMemoryInUse(), before + (4 << 20));
  auto b = Tensor::allocate(DType::f32, {3 << 20}, "the second tensor");  // 12 MiB: past the limit
  Status sb = toStatus(b.takeError());
  EXPECT_EQ(sb.code, ErrorCode::kResourceExhausted);
  EXPECT_NE(sb.message.find("the second tensor (tensor<3145728xf32>) needs 12582912 bytes"), std::string::npos)
      << sb.message;
  EXPECT_NE(sb.message.find("tensor memory limit"), std::string::npos) << sb.message;
  auto arena = allocateTensorMemory(6 << 20, "an arena");
  EXPECT_FALSE(bool(arena));
  llvm::consumeError(arena.takeError());
  *a = Tensor();
  EXPECT_LT(tensorMemoryInUse(), before + (1 << 20));
  auto c = allocateTensorMemory(6 << 20, "an arena");
  ASSERT_TRUE(bool(c));
  releaseTensorMemory(*c, 6 << 20);
  setTensorMemoryLimit(0);
}

// Under an address-space limit (ulimit -v) a tensor too big for it is an
// error, not LLVM's "out of memory" abort. In a child: the limit is per process.
TEST(TensorMemory, AddressSpaceLimitIsAnError) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve terabytes of address space: RLIMIT_AS cannot be tested under them";
#endif
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit rl = {size_t(2) << 30, size_t(2) << 30};  // 2 GiB of address space
    ::setrlimit(RLIMIT_AS, &rl);
    auto t = Tensor::allocate(DType::f32, {int64_t(1) << 30}, "input 0");  // 4 GiB
    if (t) ::_exit(2);
    Status s = toStatus(t.takeError());
    bool named = s.code == ErrorCode::kResourceExhausted && s.message.find("input 0") != std::string::npos &&
                 s.message.find("4294967296 bytes") != std::string::npos;
    // Smaller requests still succeed afterwards.
    auto small = Tensor::allocate(DType::f32, {1024}, "small");
    ::_exit(named && bool(small) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST(TensorMemory, EmptyWithABadShapeThrowsInsteadOfAborting) {
  try {
    (void)Tensor::empty(DType::f32, {4, -1});
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("dimension 1 of shape [4, -1] is dynamic (-1)"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)Tensor::empty(DType::f32, {int64_t(1) << 40, 1 << 20}), std::bad_alloc);
}

TEST(TensorMemory, PoisonFillsNewMemory) {
  setTensorMemoryPoison(0xab);
  Tensor t = Tensor::empty(DType::u8, {100});
  setTensorMemoryPoison(-1);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(t.data<uint8_t>()[i], 0xab);
}
