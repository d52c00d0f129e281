// A mutation fuzzer that keeps kiln from crashing on any model or input
// (issue 14). Seeds: every op-coverage case (tests/fuzz/corpus), the
// end-to-end inputs and the built-in mlp and cnn. Each case mutates one seed
// (byte flips, deleted or repeated spans, swapped lines, truncation, extreme
// integers, floats and dimensions) and runs it in a forked child: the child
// loads the model and calls every public function with deterministic random
// inputs (indices straying out of range, a 2 s deadline per call, no disk
// cache). Any kiln error is fine; a signal, an abort or a hang is a failure,
// written with its mutation to $KILN_FUZZ_OUT (default ./fuzz-failures).
//
// Also: mutated .npy files, damaged disk-cache entries (detected and
// recompiled: the same result) and random eager-API programs.
//
// Budget: $KILN_FUZZ_CASES cases (default 240) or $KILN_FUZZ_SECONDS
// (default 90), whichever ends first; $KILN_FUZZ_SEED picks the mutations
// (default 1: CI runs the same cases every time). Two children at a time.
#include "api/Eager.h"
#include "api/Kiln.h"
#include "cache/DiskCache.h"
#include "jit/CompileService.h"
#include "kernels/KernelRegistry.h"
#include "runtime/Npy.h"
#include "tests/TestUtil.h"
#include "lowering/models/BuiltinModels.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <csignal>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>

using namespace kiln;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

namespace {

int64_t envInt(const char *name, int64_t fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

struct Seed {
  std::string name, text;
};

std::vector<Seed> loadSeeds() {
  std::vector<Seed> seeds;
  auto addDir = [&](const std::string &dir) {
    std::error_code ec;
    std::vector<std::string> files;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
      if (llvm::StringRef(it->path()).ends_with(".mlir")) files.push_back(it->path());
    std::sort(files.begin(), files.end());  // the same order everywhere
    for (const std::string &f : files)
      if (auto buf = llvm::MemoryBuffer::getFile(f))
        seeds.push_back({llvm::sys::path::filename(f).str(), (*buf)->getBuffer().str()});
  };
  addDir(KILN_FUZZ_CORPUS);
  addDir(KILN_TEST_INPUTS);
  for (const char *m : {"mlp", "cnn"})
    if (const auto *model = models::findBuiltinModel(m)) seeds.push_back({m, model->mlir});
  return seeds;
}

/// One mutation of `text`, described in `what`.
std::string mutate(const std::string &text, std::mt19937_64 &rng, std::string &what) {
  std::string s = text;
  auto pick = [&](size_t n) { return n ? size_t(rng() % n) : 0; };
  static const char *kInts[] = {"0", "-1", "1", "2", "3", "7", "255", "256", "65535", "2147483647",
                                "-2147483648", "4294967296", "9223372036854775807", "-9223372036854775808"};
  static const char *kFloats[] = {"0x7FC00000", "0x7F800000", "0xFF800000", "-0.0", "1.0e+38", "1.0e-45", "0.0"};
  static const char *kDims[] = {"0", "1", "2", "3", "17", "100000", "4294967296", "?"};
  // Mostly changes that keep the text parseable (numbers, dimensions,
  // floats), so that most cases reach the compiler and the kernels.
  static const int kKinds[16] = {0, 1, 2, 3, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 8, 8};
  int kind = kKinds[rng() % 16];
  switch (kind) {
  case 0: {  // a byte becomes another printable one
    size_t at = pick(s.size());
    char c = char(32 + rng() % 95);
    what = "byte " + std::to_string(at) + " -> '" + std::string(1, c) + "'";
    if (!s.empty()) s[at] = c;
    break;
  }
  case 1: {  // a span goes
    size_t at = pick(s.size()), len = 1 + pick(24);
    what = "delete " + std::to_string(len) + " bytes at " + std::to_string(at);
    s.erase(at, len);
    break;
  }
  case 2: {  // a span repeats
    size_t at = pick(s.size()), len = 1 + pick(40);
    what = "repeat " + std::to_string(len) + " bytes at " + std::to_string(at);
    s.insert(at, s.substr(at, len));
    break;
  }
  case 3: {  // truncation
    size_t at = pick(s.size());
    what = "truncate at " + std::to_string(at);
    s.resize(at);
    break;
  }
  case 4: case 5: {  // an integer literal becomes an extreme one
    // Literals only: not the digits of %a0, f32 or 1.5.
    std::vector<std::pair<size_t, size_t>> ints;
    std::regex re("(?:^|[^A-Za-z0-9_%#.x])(-?[0-9]+)(?![0-9.A-Za-z_])");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
      ints.push_back({size_t(it->position(1)), size_t(it->length(1))});
    if (ints.empty()) break;
    auto [at, len] = ints[pick(ints.size())];
    const char *v = kInts[pick(std::size(kInts))];
    what = "integer '" + s.substr(at, len) + "' at " + std::to_string(at) + " -> " + v;
    s.replace(at, len, v);
    break;
  }
  case 6: {  // a dimension of a tensor type
    std::vector<std::pair<size_t, size_t>> dims;
    std::regex re("(?:<|x)([0-9?]+)(?=x)");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
      dims.push_back({size_t(it->position(1)), size_t(it->length(1))});
    if (dims.empty()) break;
    auto [at, len] = dims[pick(dims.size())];
    const char *v = kDims[pick(std::size(kDims))];
    what = "dimension at " + std::to_string(at) + " -> " + v;
    s.replace(at, len, v);
    break;
  }
  case 7: {  // a float literal becomes NaN, infinity, denormal, ...
    std::vector<std::pair<size_t, size_t>> floats;
    std::regex re("-?[0-9]+\\.[0-9]+(e[-+]?[0-9]+)?");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
      floats.push_back({size_t(it->position()), size_t(it->length())});
    if (floats.empty()) break;
    auto [at, len] = floats[pick(floats.size())];
    const char *v = kFloats[pick(std::size(kFloats))];
    what = "float at " + std::to_string(at) + " -> " + v;
    s.replace(at, len, v);
    break;
  }
  default: {  // two lines swap
    std::vector<size_t> starts = {0};
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n') starts.push_back(i + 1);
    if (starts.size() < 3) break;
    size_t a = pick(starts.size() - 1), b = pick(starts.size() - 1);
    if (a > b) std::swap(a, b);
    if (a == b) break;
    std::string la = s.substr(starts[a], starts[a + 1] - starts[a]);
    std::string lb = s.substr(starts[b], starts[b + 1] - starts[b]);
    what = "swap lines " + std::to_string(a + 1) + " and " + std::to_string(b + 1);
    s = s.substr(0, starts[a]) + lb + s.substr(starts[a + 1], starts[b] - starts[a + 1]) + la +
        s.substr(starts[b + 1]);
    break;
  }
  }
  if (what.empty()) what = "unchanged";
  return s;
}

Tensor randomInput(const TensorType &type, std::mt19937_64 &rng) {
  Tensor t = Tensor::empty(type.dtype, type.shape);
  std::uniform_real_distribution<float> f(-4, 4);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = f(rng);
    int64_t iv = int64_t(rng() % 12) - 2;  // indices stray out of range
    switch (type.dtype) {
    case DType::f32: t.data<float>()[i] = v; break;
    case DType::f64: t.data<double>()[i] = v; break;
    case DType::f16: t.data<uint16_t>()[i] = floatToHalf(v); break;
    case DType::bf16: t.data<uint16_t>()[i] = floatToBf16(v); break;
    case DType::i64: t.data<int64_t>()[i] = iv; break;
    case DType::i32: t.data<int32_t>()[i] = int32_t(iv); break;
    case DType::i16: t.data<int16_t>()[i] = int16_t(iv); break;
    case DType::i8: t.data<int8_t>()[i] = int8_t(iv); break;
    case DType::u8: t.data<uint8_t>()[i] = uint8_t(iv); break;
    case DType::i1: t.data<uint8_t>()[i] = uint8_t(iv & 1); break;
    }
  }
  return t;
}

/// Child exit statuses: what happened to a case that did not crash.
constexpr int kCalled = 0;    // loaded, every function called (results or errors)
constexpr int kRejected = 3;  // refused at load (parse, verify, unsupported) with an error

/// A forked child's runtime: its address space capped (a runaway
/// allocation fails instead of taking the machine), no disk cache (or the
/// read-write cache `cacheDir`), one thread, a 2 s deadline per call,
/// warnings dropped.
llvm::Expected<std::unique_ptr<Runtime>> childRuntime(const std::string &cacheDir = "", bool measure = true) {
  if (!kSanitized) {
    struct rlimit lim = {size_t(8) << 30, size_t(8) << 30};
    setrlimit(RLIMIT_AS, &lim);
  }
  RuntimeOptions options;
  options.cacheMode = cacheDir.empty() ? CacheMode::kOff : CacheMode::kReadWrite;
  options.cacheDir = cacheDir;
  options.threads = 1;
  options.compileThreads = 1;
  options.callTimeoutSeconds = 2;
  options.memoryLimitBytes = uint64_t(1) << 30;  // tensors past it are errors (issue 31)
  if (!measure) options.placement.measure = false;
  options.warnings = [](const std::string &) {};
  return Runtime::create(options);
}

/// The child: load and call everything. Returns unless kiln crashes.
int runCase(const std::string &text, uint64_t seed) {
  auto rt = childRuntime();
  if (!rt) return 4;
  auto m = (*rt)->loadModule(text, "fuzz.mlir");
  if (!m) {
    llvm::consumeError(m.takeError());
    return kRejected;
  }
  std::mt19937_64 rng(seed);
  for (const FunctionSignature &fn : (*m)->functions()) {
    if (!fn.unsupported.empty()) continue;
    std::vector<Tensor> inputs;
    uint64_t bytes = 0;
    bool ok = true;
    for (const ArgumentInfo &a : fn.args) {
      TensorType t = a.type;
      for (int64_t &d : t.shape)
        if (d == kDynamic) d = 1 + int64_t(rng() % 3);
      bytes += t.byteSize();
      if (t.byteSize() > (64u << 20) || bytes > (128u << 20)) ok = false;
      if (ok) inputs.push_back(randomInput(t, rng));
    }
    if (!ok) continue;
    auto out = (*m)->call(fn.name, inputs);
    if (!out) llvm::consumeError(out.takeError());
  }
  return kCalled;
}

}  // namespace

TEST(Fuzz, MutatedModelsNeverCrashOrHang) {
  std::vector<Seed> seeds = loadSeeds();
  ASSERT_GT(seeds.size(), 100u) << "seed corpus missing: " << KILN_FUZZ_CORPUS;
  const int64_t cases = envInt("KILN_FUZZ_CASES", kSanitized ? 60 : 240);
  const int64_t seconds = envInt("KILN_FUZZ_SECONDS", 90);
  const uint64_t seed = uint64_t(envInt("KILN_FUZZ_SEED", 1));
  const int hangSeconds = kSanitized ? 120 : 40;
  std::string outDir = std::getenv("KILN_FUZZ_OUT") ? std::getenv("KILN_FUZZ_OUT") : "fuzz-failures";
  std::mt19937_64 rng(seed);
  auto start = std::chrono::steady_clock::now();

  struct Running {
    pid_t pid;
    int64_t index;
    std::string text, what, seedName;
  };
  std::vector<Running> running;
  int failures = 0, done = 0, called = 0, rejected = 0;
  auto reap = [&](bool block) {
    for (size_t i = 0; i < running.size();) {
      int status = 0;
      pid_t r = waitpid(running[i].pid, &status, block && i == 0 ? 0 : WNOHANG);
      if (r == 0) {
        ++i;
        continue;
      }
      ++done;
      bool exited = r > 0 && WIFEXITED(status);
      called += exited && WEXITSTATUS(status) == kCalled;
      rejected += exited && WEXITSTATUS(status) == kRejected;
      bool crashed = !exited || (WEXITSTATUS(status) != kCalled && WEXITSTATUS(status) != kRejected);
      if (crashed) {
        ++failures;
        std::string why = r < 0                  ? "lost"
                          : WIFSIGNALED(status) ? std::string("signal ") + strsignal(WTERMSIG(status))
                                                : "exit " + std::to_string(WEXITSTATUS(status));
        llvm::sys::fs::create_directories(outDir);
        std::string file = outDir + "/case-" + std::to_string(running[i].index) + ".mlir";
        std::ofstream(file) << "// seed " << running[i].seedName << ", " << running[i].what << ", " << why
                            << "\n" << running[i].text;
        ADD_FAILURE() << "case " << running[i].index << " (" << running[i].seedName << ", " << running[i].what
                      << "): " << why << "; saved as " << file;
      }
      running.erase(running.begin() + long(i));
      block = false;
    }
  };
  int64_t index = 0;
  for (; index < cases; ++index) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(seconds)) break;
    const Seed &s = seeds[size_t(rng() % seeds.size())];
    std::string what;
    std::string text = mutate(s.text, rng, what);
    uint64_t inputSeed = rng();
    while (running.size() >= 2) reap(true);
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork: " << strerror(errno);
    if (pid == 0) {
      alarm(unsigned(hangSeconds));  // a hang dies of SIGALRM
      _exit(runCase(text, inputSeed));  // no atexit handlers or static destructors of the parent's state
    }
    running.push_back({pid, index, std::move(text), std::move(what), s.name});
  }
  while (!running.empty()) reap(true);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz: %d cases from %zu seeds in %.1f s (seed %llu): %d loaded and called, %d refused at load, "
              "%d failures\n",
              done, seeds.size(), secs, (unsigned long long)seed, called, rejected, failures);
  EXPECT_GT(called, done / 5) << "most mutants never reached a call: the fuzzer tests little";
}

// The .npy reader on mutated files: header fields set to extreme values,
// flipped bytes, cut or grown payloads. Every outcome is a tensor whose size
// matches its bytes, or an error; never a crash or an allocation the size of
// a lie. In process: each case is cheap.
TEST(Fuzz, MutatedNpyFilesAreTensorsOrErrors) {
  const uint64_t seed = uint64_t(envInt("KILN_FUZZ_SEED", 1));
  const int64_t cases = envInt("KILN_FUZZ_CASES", 240) * 10;
  std::mt19937_64 rng(seed);
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("kiln-fuzz", "npy", path));
  std::vector<std::string> seeds;
  for (auto [dtype, shape] : std::vector<std::pair<DType, std::vector<int64_t>>>{
           {DType::f32, {2, 3}}, {DType::i8, {5}}, {DType::i1, {4, 1}}, {DType::f16, {3, 2, 1}}, {DType::i64, {}}}) {
    Tensor t = Tensor::empty(dtype, shape);
    std::memset(t.rawData(), 1, t.byteSize());
    ASSERT_FALSE(bool(writeNpy(path, t)));
    auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
    ASSERT_TRUE(bool(buf));
    seeds.push_back((*buf)->getBuffer().str());
  }
  llvm::sys::fs::remove(path);
  static const char *kNumbers[] = {"0", "-1", "18446744073709551615", "288230376151711744", "4294967296", "1,", ""};
  int ok = 0, errors = 0;
  for (int64_t i = 0; i < cases; ++i) {
    std::string s = seeds[size_t(rng() % seeds.size())];
    std::string what;
    switch (rng() % 4) {
    case 0: {  // a number in the header
      std::regex re("[0-9]+");
      std::vector<std::pair<size_t, size_t>> nums;
      std::string header = s.substr(0, std::min<size_t>(s.size(), 128));
      for (auto it = std::sregex_iterator(header.begin(), header.end(), re); it != std::sregex_iterator(); ++it)
        nums.push_back({size_t(it->position()), size_t(it->length())});
      if (!nums.empty()) {
        auto [at, len] = nums[size_t(rng() % nums.size())];
        s.replace(at, len, kNumbers[rng() % std::size(kNumbers)]);
      }
      break;
    }
    case 1:
      s[size_t(rng() % s.size())] = char(rng());
      break;
    case 2:
      s.resize(size_t(rng() % (s.size() + 1)));
      break;
    default:
      s.append(size_t(rng() % 16), char(rng()));
      break;
    }
    auto t = parseNpy(s, "fuzz.npy");
    if (t) {
      ++ok;
      EXPECT_LE(t->byteSize(), s.size()) << "a tensor larger than its file";
    } else {
      ++errors;
      llvm::consumeError(t.takeError());
    }
  }
  std::printf("fuzz npy: %lld cases: %d tensors, %d errors\n", (long long)cases, ok, errors);
}

namespace {

/// The cache-entry fuzzer's child: a runtime on `cacheDir` (read-write)
/// loads `text`, calls @main on `inputs` and writes the result to `outPath`.
/// Exit 0: called (result written); 3: a kiln error. Placement by
/// measurement is off: a recompile that timed JIT and kernel again could
/// place a near tie the other way and round differently, and the fuzzer
/// compares results bit for bit.
int runCached(const std::string &text, const std::string &cacheDir, const std::vector<Tensor> &inputs,
              const std::string &outPath) {
  auto rt = childRuntime(cacheDir, /*measure=*/false);
  if (!rt) return 4;
  auto m = (*rt)->loadModule(text, "mlp.mlir");
  if (!m) {
    llvm::consumeError(m.takeError());
    return kRejected;
  }
  auto out = (*m)->call("main", inputs);
  if (!out) {
    llvm::consumeError(out.takeError());
    return kRejected;
  }
  if (out->size() != 1 || writeNpy(outPath, (*out)[0])) return 5;
  return kCalled;
}

/// The built-in mlp's input for the cache fuzzers: [1, 64] deterministic
/// values, built in the parent (which never starts a runtime, so that forked
/// children start from a clean process).
std::vector<Tensor> mlpInputs() {
  Tensor x = Tensor::empty(DType::f32, {1, 64});
  std::vector<float> v = models::deterministicValues(64, 7, 1.0f);
  std::memcpy(x.rawData(), v.data(), v.size() * sizeof(float));
  return {x};
}

/// Forks `fn`, waits (a hang dies of SIGALRM); returns the exit status, or
/// 128 + signal.
template <typename F> int inChild(F &&fn) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    alarm(60);
    _exit(fn());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

// Cache entries decoded after corruption: a model compiled into a disk
// cache, then each case damages one entry (a flipped byte, a cut, extra
// bytes, an overwritten span) and a fresh process loads the model from that
// cache and calls it. The entry must be detected and recompiled: the result
// equals the one computed from the intact cache, never a crash or a wrong
// value. Children are forked (each a fresh runtime, as another process
// would be).
TEST(Fuzz, CorruptCacheEntriesAreRecompiled) {
  const models::BuiltinModel *mlp = models::findBuiltinModel("mlp");
  ASSERT_TRUE(mlp && !mlp->mlir.empty());
  const uint64_t seed = uint64_t(envInt("KILN_FUZZ_SEED", 1));
  const int64_t cases = std::max<int64_t>(8, envInt("KILN_FUZZ_CASES", kSanitized ? 60 : 240) / 8);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kiln-fuzz-cache", dir));
  std::string cacheDir = (dir + "/cache").str(), refPath = (dir + "/ref.npy").str(),
              outPath = (dir + "/out.npy").str();
  // The model's input, built here; the parent never starts a runtime, so
  // that forked children start from a clean process.
  std::vector<Tensor> inputs = mlpInputs();
  int first = inChild([&] { return runCached(mlp->mlir, cacheDir, inputs, refPath); });
  ASSERT_EQ(first, kCalled) << "the intact model did not run";
  auto ref = readNpy(refPath);
  ASSERT_TRUE(bool(ref)) << llvm::toString(ref.takeError());
  std::vector<std::string> entries;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(cacheDir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).ends_with(".kiln")) entries.push_back(it->path());
  ASSERT_FALSE(entries.empty()) << "no cache entry written under " << cacheDir;

  std::mt19937_64 rng(seed);
  int failures = 0, repaired = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const std::string &entry = entries[size_t(rng() % entries.size())];
    auto buf = llvm::MemoryBuffer::getFile(entry, /*IsText=*/false);
    ASSERT_TRUE(bool(buf));
    std::string original = (*buf)->getBuffer().str(), s = original;
    std::string what;
    size_t at = size_t(rng() % s.size());
    switch (rng() % 5) {
    case 0:
      s[at] = char(s[at] ^ char(1 + rng() % 255));
      what = "byte " + std::to_string(at) + " flipped";
      break;
    case 1:
      s.resize(at);
      what = "cut at " + std::to_string(at);
      break;
    case 2:
      s.append(size_t(1 + rng() % 64), char(rng()));
      what = "bytes appended";
      break;
    case 3: {  // a span of the header (sizes, offsets) overwritten
      at = size_t(rng() % std::min<size_t>(s.size(), 256));
      size_t n = std::min<size_t>(s.size() - at, 1 + rng() % 8);
      for (size_t k = 0; k < n; ++k) s[at + k] = char(rng() % 2 ? 0xFF : rng());
      what = std::to_string(n) + " header bytes at " + std::to_string(at) + " overwritten";
      break;
    }
    default:
      s.clear();
      what = "emptied";
      break;
    }
    { std::ofstream(entry, std::ios::binary | std::ios::trunc) << s; }
    llvm::sys::fs::remove(outPath);
    int status = inChild([&] { return runCached(mlp->mlir, cacheDir, inputs, outPath); });
    bool same = false;
    if (status == kCalled) {
      auto out = readNpy(outPath);
      same = out && out->byteSize() == ref->byteSize() &&
             std::memcmp(out->rawData(), ref->rawData(), ref->byteSize()) == 0;
      if (!out) llvm::consumeError(out.takeError());
    }
    // Detected: the damaged entry was replaced (or removed), which shows
    // that the case reached the decoder.
    if (auto now = llvm::MemoryBuffer::getFile(entry, /*IsText=*/false); !now || (*now)->getBuffer() != s) ++repaired;
    if (!same) {
      ++failures;
      ADD_FAILURE() << "case " << i << " (" << llvm::sys::path::filename(entry).str() << ": " << what
                    << "): " << (status == kCalled ? "a different result" : "exit status " + std::to_string(status));
    }
    { std::ofstream(entry, std::ios::binary | std::ios::trunc) << original; }
  }
  std::printf("fuzz cache: %lld corrupted entries, %d replaced by a recompile, %d failures\n", (long long)cases,
              repaired, failures);
  EXPECT_GT(repaired, cases / 2) << "most damaged entries were never read: the fuzzer tests little";
  llvm::sys::fs::remove_directories(dir);
}

namespace {

/// A file outside the trees under test, and what it must still be.
struct Sentinel {
  std::string path, bytes;
  int64_t mtime = 0;
};
Sentinel makeSentinel(const std::string &path, const std::string &bytes) {
  { std::ofstream(path, std::ios::binary) << bytes; }
  struct timespec old[2] = {{0, UTIME_OMIT}, {std::time(nullptr) - 86400, 0}};
  ::utimensat(AT_FDCWD, path.c_str(), old, 0);
  struct stat st;
  ::stat(path.c_str(), &st);
  return {path, bytes, int64_t(st.st_mtim.tv_sec)};
}
std::string checkSentinel(const Sentinel &s) {
  struct stat st;
  if (::lstat(s.path.c_str(), &st) != 0) return s.path + " was deleted";
  auto buf = llvm::MemoryBuffer::getFile(s.path, false, false);
  if (!buf || (*buf)->getBuffer() != s.bytes) return s.path + " was rewritten";
  if (int64_t(st.st_mtim.tv_sec) != s.mtime) return s.path + " had its mtime changed";
  return "";
}

}  // namespace

// Hostile trees (issue 31): a disk cache with symlinked levels, entries that
// are hard links or symlinks to files outside, foreign temporary files and
// forged entries (types edited, checksum recomputed), and an output folder
// whose names are links, hard links and FIFOs. A forked child runs the model
// through that cache, writes its outputs and clears the cache; files outside
// (sentinels) must be untouched, the result must equal the intact run's, and
// nothing may hang or crash.
TEST(Fuzz, HostileCacheAndOutputTreesTouchNothingOutside) {
  const models::BuiltinModel *mlp = models::findBuiltinModel("mlp");
  ASSERT_TRUE(mlp && !mlp->mlir.empty());
  const uint64_t seed = uint64_t(envInt("KILN_FUZZ_SEED", 1));
  const int64_t cases = std::max<int64_t>(8, envInt("KILN_FUZZ_CASES", kSanitized ? 60 : 240) / 10);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kiln-fuzz-hostile", dir));
  std::string root = dir.str().str();
  std::vector<Tensor> inputs = mlpInputs();
  // The intact run: its result and its entry, to forge from.
  std::string goodCache = root + "/good", refPath = root + "/ref.npy";
  ASSERT_EQ(inChild([&] { return runCached(mlp->mlir, goodCache, inputs, refPath); }), kCalled);
  auto ref = readNpy(refPath);
  ASSERT_TRUE(bool(ref));
  std::string entryRel, entryBytes;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(goodCache, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).ends_with(".kiln")) {
      entryRel = it->path().substr(goodCache.size());
      entryBytes = (*llvm::MemoryBuffer::getFile(it->path()))->getBuffer().str();
    }
  ASSERT_FALSE(entryRel.empty());
  auto good = cache::DiskCache::decode(entryBytes);
  ASSERT_TRUE(bool(good));
  std::string shardRel = llvm::sys::path::parent_path(entryRel).str();  // "/v1/xx"

  std::mt19937_64 rng(seed * 7919);
  int failures = 0;
  for (int64_t i = 0; i < cases; ++i) {
    std::string c = root + "/case" + std::to_string(i), cacheDir = c + "/cache", outDir = c + "/out",
                outside = c + "/outside";
    llvm::sys::fs::create_directories(outside);
    llvm::sys::fs::create_directories(outDir);
    std::vector<Sentinel> sentinels;
    std::string what;
    // The cache: one hostile feature.
    switch (rng() % 7) {
    case 0: {  // v1 is a link to another cache holding the entry
      std::string other = outside + "/other-cache";
      llvm::sys::fs::create_directories(other + shardRel);
      sentinels.push_back(makeSentinel(other + entryRel, entryBytes));
      llvm::sys::fs::create_directories(cacheDir);
      ::symlink((other + "/v1").c_str(), (cacheDir + "/v1").c_str());
      what = "v1 links to another cache";
      break;
    }
    case 1: {  // the entry's shard is a link to a folder outside
      llvm::sys::fs::create_directories(cacheDir + "/v1");
      sentinels.push_back(makeSentinel(outside + "/" + llvm::sys::path::filename(entryRel).str(), entryBytes));
      ::symlink(outside.c_str(), (cacheDir + shardRel).c_str());
      what = "the shard links outside";
      break;
    }
    case 2: {  // the entry is a hard link to a file outside
      llvm::sys::fs::create_directories(cacheDir + shardRel);
      sentinels.push_back(makeSentinel(outside + "/hard", entryBytes));
      ::link((outside + "/hard").c_str(), (cacheDir + entryRel).c_str());
      what = "the entry is a hard link";
      break;
    }
    case 3: {  // the entry is a symlink to a file outside
      llvm::sys::fs::create_directories(cacheDir + shardRel);
      sentinels.push_back(makeSentinel(outside + "/soft", entryBytes));
      ::symlink((outside + "/soft").c_str(), (cacheDir + entryRel).c_str());
      what = "the entry is a symlink";
      break;
    }
    case 4: {  // foreign and hard-linked temporary files, old
      llvm::sys::fs::create_directories(cacheDir + shardRel);
      for (const char *name : {"/.tmp.notes", "/.tmp.1.2.deadbeef", "/.tmp.3.4.cafebabe"}) {
        std::string p = cacheDir + shardRel + name;
        { std::ofstream(p) << (name[6] == 'n' ? entryBytes.substr(0, 40) : std::string("user data")); }
        struct timespec old[2] = {{0, UTIME_OMIT}, {std::time(nullptr) - 7200, 0}};
        ::utimensat(AT_FDCWD, p.c_str(), old, 0);
      }
      sentinels.push_back(makeSentinel(outside + "/tmp-target", entryBytes.substr(0, 40)));
      ::unlink((cacheDir + shardRel + "/.tmp.3.4.cafebabe").c_str());
      ::link((outside + "/tmp-target").c_str(), (cacheDir + shardRel + "/.tmp.3.4.cafebabe").c_str());
      what = "foreign temporary files";
      break;
    }
    default: {  // a forged entry: types edited, checksum recomputed
      cache::CachedFunction forged = *good;
      std::string in = "\"" + inputs[0].type().str() + "\"", out = "\"" + ref->type().str() + "\"";
      if (rng() % 2 && forged.plan.find(in) != std::string::npos) {
        forged.plan.replace(forged.plan.find(in), in.size(), "\"1x65xf32\"");
        what = "forged: the plan's input type";
      } else {
        forged.results[0].shape.back() += 1 + int64_t(rng() % 1000);
        if (size_t at = forged.plan.rfind(out); at != std::string::npos)
          forged.plan.replace(at, out.size(), "\"" + forged.results[0].str() + "\"");
        what = "forged: the result types";
      }
      llvm::sys::fs::create_directories(cacheDir + shardRel);
      std::ofstream(cacheDir + entryRel, std::ios::binary) << cache::DiskCache::encode(forged);
      break;
    }
    }
    // The output name: a link, a dangling link, a hard link or a FIFO.
    std::string out0 = outDir + "/out0.npy";
    switch (rng() % 4) {
    case 0:
      sentinels.push_back(makeSentinel(outside + "/out-target", "precious"));
      ::symlink((outside + "/out-target").c_str(), out0.c_str());
      what += ", out0.npy a symlink";
      break;
    case 1:
      ::symlink((outside + "/created-by-kiln").c_str(), out0.c_str());
      what += ", out0.npy a dangling symlink";
      break;
    case 2:
      sentinels.push_back(makeSentinel(outside + "/out-hard", "precious"));
      ::link((outside + "/out-hard").c_str(), out0.c_str());
      what += ", out0.npy a hard link";
      break;
    default:
      ::mkfifo(out0.c_str(), 0644);
      what += ", out0.npy a FIFO";
      break;
    }
    int status = inChild([&] {
      int rc = runCached(mlp->mlir, cacheDir, inputs, out0);
      auto rt = childRuntime(cacheDir, false);  // and a clear of that cache
      if (rt) llvm::consumeError((*rt)->compileService().disk().clear().takeError());
      return rc;
    });
    std::string problem;
    if (status != kCalled) problem = "exit status " + std::to_string(status);
    for (const Sentinel &s : sentinels)
      if (problem.empty()) problem = checkSentinel(s);
    if (problem.empty() && llvm::sys::fs::exists(outside + "/created-by-kiln")) problem = "a dangling link's target was created";
    if (problem.empty()) {
      auto got = readNpy(out0);
      if (!got || got->byteSize() != ref->byteSize() || std::memcmp(got->rawData(), ref->rawData(), ref->byteSize()))
        problem = "a different result";
      if (!got) llvm::consumeError(got.takeError());
    }
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << "case " << i << " (" << what << "): " << problem;
    }
  }
  std::printf("fuzz hostile trees: %lld cases, %d failures\n", (long long)cases, failures);
  llvm::sys::fs::remove_directories(root);
}

namespace {

/// One eager fuzz sequence: random tensors (dtypes, ranks, empty and odd
/// shapes) through random typed ops with random attributes (zero, negative
/// and huge strides, pads, kernels, axes, permutations and shapes), each
/// result fed to later ops; every value awaited. Returns the number of ops
/// that produced a tensor.
int eagerSequence(eager::Context &ctx, std::mt19937_64 &rng) {
  auto pick = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };
  static const int64_t kOdd[] = {0, 1, 2, 3, -1, -2, 7, 65536, int64_t(1) << 40, INT64_MAX, INT64_MIN};
  auto odd = [&] { return pick(4) ? pick(4) : kOdd[pick(std::size(kOdd))]; };
  static const DType kTypes[] = {DType::f32, DType::f32, DType::f32, DType::i32, DType::i8, DType::i1,
                                 DType::f16, DType::bf16, DType::f64, DType::i64, DType::i16, DType::u8};
  std::vector<eager::EagerTensor> pool;
  for (int i = 0; i < 3; ++i) {
    std::vector<int64_t> shape(size_t(pick(5)));
    for (int64_t &d : shape) d = pick(5);
    DType t = kTypes[pick(std::size(kTypes))];
    Tensor x = Tensor::empty(t, shape);
    for (int64_t b = 0; b < int64_t(x.byteSize()); ++b)
      static_cast<uint8_t *>(x.rawData())[b] = t == DType::i1 ? uint8_t(rng() % 2) : uint8_t(rng());
    pool.emplace_back(std::move(x));
  }
  int values = 0;
  for (int step = 0; step < 12; ++step) {
    const eager::EagerTensor &a = pool[size_t(pick(int64_t(pool.size())))];
    const eager::EagerTensor &b = pool[size_t(pick(int64_t(pool.size())))];
    const eager::EagerTensor &c = pool[size_t(pick(int64_t(pool.size())))];
    std::vector<int64_t> list(size_t(pick(5)));
    for (int64_t &v : list) v = odd();
    eager::EagerTensor r;
    // Any op with a kernel, on one to three operands, with random values
    // for the attributes kernels read (issue 31: random attributes and
    // dtypes, under the child's memory limit).
    if (pick(3) == 0) {
      static const std::vector<std::string> kOps = kernels::registry().ops();
      ops::AttrMap attrs;
      auto randomList = [&] {
        std::vector<int64_t> l(size_t(pick(9)));
        for (int64_t &v : l) v = pick(3) ? pick(4) : odd();
        return l;
      };
      for (const char *name : {"padding", "multiples", "perms", "new_shape", "shape", "kernel", "stride", "pad",
                               "dilation", "start", "size"})
        if (pick(2)) attrs.set(name, randomList());
      for (const char *name : {"axis", "shift"})
        if (pick(2)) attrs.set(name, odd());
      for (const char *name : {"pad_const", "min_val", "max_val"})
        if (pick(2)) attrs.set(name, double(odd()));
      std::vector<eager::EagerTensor> operands = {a};
      for (int64_t k = pick(3); k > 0; --k) operands.push_back(k == 1 ? b : c);
      r = ctx.execute(kOps[size_t(pick(int64_t(kOps.size())))], operands, attrs);
      auto v = r.value();
      if (v) {
        ++values;
        if (v->byteSize() < (1u << 20)) pool.push_back(r);
      } else {
        llvm::consumeError(v.takeError());
      }
      continue;
    }
    switch (pick(16)) {
    case 0: r = ctx.add(a, b); break;
    case 1: r = ctx.mul(a, b); break;
    case 2: r = ctx.matmul(a, b); break;
    case 3: r = ctx.conv2d(a, b, c, {odd(), odd(), odd(), odd()}, {odd(), odd()}, {odd(), odd()}); break;
    case 4: r = ctx.maxPool2d(a, {odd(), odd()}, {odd(), odd()}, {odd(), odd(), odd(), odd()}); break;
    case 5: r = ctx.reduceSum(a, odd()); break;
    case 6: r = ctx.reduceMax(a, odd()); break;
    case 7: r = ctx.softmax(a, odd()); break;
    case 8: r = ctx.transpose(a, list); break;
    case 9: r = ctx.reshape(a, list); break;
    case 10: r = ctx.clamp(a, double(odd()), double(odd())); break;
    case 11: r = ctx.intdiv(a, b); break;
    case 12: r = ctx.exp(a); break;
    case 13: r = ctx.pow(a, b); break;
    case 14: r = ctx.logicalNot(a); break;
    default: r = ctx.relu(a); break;
    }
    auto v = r.value();
    if (v) {
      ++values;
      if (v->byteSize() < (1u << 20)) pool.push_back(r);
    } else {
      llvm::consumeError(v.takeError());
    }
  }
  return values;
}

}  // namespace

// The eager API on random programs: every op either returns a tensor or an
// error (never a crash, an abort or a hang), whatever the operands' dtypes
// and shapes and the attributes. Batches of sequences run in forked
// children (each a fresh runtime); a failing batch names its seed, which
// $KILN_FUZZ_EAGER_BATCH replays in process.
TEST(Fuzz, EagerOpsOnRandomOperandsAreValuesOrErrors) {
  const uint64_t seed = uint64_t(envInt("KILN_FUZZ_SEED", 1));
  const int64_t batches = std::max<int64_t>(4, envInt("KILN_FUZZ_CASES", kSanitized ? 60 : 240) / 20);
  int failures = 0;
  // $KILN_FUZZ_EAGER_BATCH=<seed>: that batch alone, in this process (to
  // debug a failure).
  const int64_t only = envInt("KILN_FUZZ_EAGER_BATCH", -1);
  for (int64_t batch = 0; batch < (only >= 0 ? 1 : batches); ++batch) {
    uint64_t batchSeed = only >= 0 ? uint64_t(only) : seed * 1000003 + uint64_t(batch);
    auto run = [&] {
      auto rt = childRuntime();
      if (!rt) return 4;
      eager::Context ctx(**rt);
      std::mt19937_64 rng(batchSeed);
      int values = 0;
      for (int i = 0; i < 20; ++i) values += eagerSequence(ctx, rng);
      return values > 0 ? 0 : 6;  // 6: nothing ever produced a value
    };
    int status = only >= 0 ? run() : inChild(run);
    if (status != 0) {
      ++failures;
      ADD_FAILURE() << "eager batch with seed " << batchSeed << ": exit status " << status
                    << (status > 128 ? " (signal " + std::to_string(status - 128) + ")" : "");
    }
  }
  std::printf("fuzz eager: %lld batches of 20 sequences, %d failures\n", (long long)batches, failures);
}
