// The compile cache: signature keys, disk entries (atomic, checksummed,
// fuzzed), warm starts without MLIR, weight-independent keys, single flight,
// LRU bounds, degraded directories, and two processes sharing a directory.
#include "cache/CacheKey.h"
#include "jit/CompileService.h"
#include "cache/DiskCache.h"
#include "jit/Compiler.h"
#include "tests/TestRuntime.h"
#include "lowering/models/BuiltinModels.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fstream>
#include <set>
#include <random>
#include <thread>

using namespace kiln;
using namespace kiln::cache;

namespace {

/// Each suite's directories are named after it.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("kiln-cache-test") {}
};

std::unique_ptr<Runtime> runtimeAt(const std::string &dir, uint64_t maxBytes = 1ull << 30,
                                   size_t memoryEntries = 512) {
  RuntimeOptions o;
  o.cacheDir = dir;
  o.cacheMode = kiln::CacheMode::kReadWrite;
  o.cacheMaxBytes = maxBytes;
  o.memoryCacheEntries = memoryEntries;
  // No placement by measurement: a recompile that timed a near tie again
  // could place it the other way and round differently, and these tests
  // compare results across compiles bit for bit (as sharedRuntime does).
  o.placement.measure = false;
  auto rt = Runtime::create(o);
  EXPECT_TRUE(bool(rt));
  return std::move(*rt);
}


std::vector<std::string> entryFiles(const std::string &dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).ends_with(".kiln")) out.push_back(it->path());
  return out;
}

/// Calls `mlir`'s @main on `x` through a runtime caching in `dir` (empty);
/// the results, and in `entry` the one entry file the call wrote.
std::vector<Tensor> callIntoCache(const std::string &dir, const std::string &mlir, const Tensor &x,
                                  std::string &entry) {
  std::vector<Tensor> out;
  {
    auto rt = runtimeAt(dir);
    auto m = KILN_TAKE(rt->loadModule(mlir, "mlp"));
    out = KILN_TAKE(m->call("main", {x}));
  }
  auto files = entryFiles(dir);
  EXPECT_EQ(files.size(), 1u);
  entry = files.empty() ? "" : files[0];
  return out;
}

/// A disk cache's options at `dir` whose warnings go to `warnings`.
DiskCacheOptions collectingWarnings(const std::string &dir, std::vector<std::string> &warnings) {
  DiskCacheOptions o;
  o.dir = dir;
  o.warn = [&warnings](const std::string &w) { warnings.push_back(w); };
  return o;
}

CachedFunction sampleEntry() {
  CachedFunction e;
  e.key.graph = "g";
  e.key.function = "main";
  e.key.signature = "1x4xf32";
  e.key.target = "t";
  e.key.pipeline = "p";
  e.key.kilnVersion = "v";
  e.key.llvmVersion = "22";
  e.plan = "{\"steps\": []}";
  e.inputs = {TensorType{DType::f32, {1, 4}}};
  e.weights = {TensorType{DType::f32, {4, 4}}};
  e.results = {TensorType{DType::i32, {1}}};
  e.objects = {std::string(300, '\x42'), std::string(17, '\x01')};
  return e;
}

}  // namespace

TEST(ShapeSignature, HashAndEquality) {
  auto a = ShapeSignature::of({TensorType{DType::f32, {1, 224, 224, 3}}, TensorType{DType::i64, {7}}});
  auto b = ShapeSignature::of({Tensor::empty(DType::f32, {1, 224, 224, 3}), Tensor::empty(DType::i64, {7})});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.str(), "1x224x224x3xf32,7xi64");
  auto c = ShapeSignature::of({TensorType{DType::f32, {1, 224, 224, 3}}, TensorType{DType::i32, {7}}});
  auto d = ShapeSignature::of({TensorType{DType::f32, {1, 224, 224}}, TensorType{DType::i64, {3, 7}}});
  EXPECT_FALSE(a == c);
  EXPECT_FALSE(a == d);  // same dims in sequence, different ranks
  EXPECT_NE(a.hash(), d.hash());
}

TEST(DiskCache, EncodeDecodeRoundTrip) {
  CachedFunction e = sampleEntry();
  auto d = DiskCache::decode(DiskCache::encode(e));
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  EXPECT_TRUE(d->key.firstDifference(e.key).empty());
  EXPECT_EQ(d->inputs, e.inputs);
  EXPECT_EQ(d->weights, e.weights);
  EXPECT_EQ(d->results, e.results);
  EXPECT_EQ(d->objects, e.objects);
  EXPECT_EQ(d->plan, e.plan);
}

TEST(DiskCache, FuzzedEntriesAreRejected) {
  std::string good = DiskCache::encode(sampleEntry());
  // Every truncation.
  for (size_t n = 0; n < good.size(); n += 7)
    EXPECT_FALSE(bool(DiskCache::decode(good.substr(0, n)))) << "truncated to " << n;
  // Bit flips anywhere.
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::string bad = good;
    size_t pos = rng() % bad.size();
    bad[pos] ^= char(1u << (rng() % 8));
    auto d = DiskCache::decode(bad);
    EXPECT_FALSE(bool(d)) << "bit flip at " << pos;
    if (!d) llvm::consumeError(d.takeError());
  }
  // Another format version.
  std::string v2 = good;
  v2[7] = '9';
  auto d = DiskCache::decode(v2);
  ASSERT_FALSE(bool(d));
  EXPECT_NE(llvm::toString(d.takeError()).find("format version"), std::string::npos);
}

TEST(DiskCache, BadFilesOnDiskAreReportedOnceRemovedAndMissed) {
  TempDir tmp;
  std::vector<std::string> warnings;
  DiskCacheOptions o = collectingWarnings(tmp.path, warnings);
  auto cache = DiskCache::open(o);
  CachedFunction e = sampleEntry();
  cache->store(e);
  ASSERT_TRUE(cache->load(e.key).has_value());
  auto files = entryFiles(tmp.path);
  ASSERT_EQ(files.size(), 1u);

  // Wrong key: the same file name holding another key (e.g. a foreign kiln version).
  CachedFunction foreign = e;
  foreign.key.kilnVersion = "other";
  {
    std::ofstream f(files[0], std::ios::binary | std::ios::trunc);
    f << DiskCache::encode(foreign);
  }
  EXPECT_FALSE(cache->load(e.key).has_value());
  EXPECT_FALSE(llvm::sys::fs::exists(files[0]));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("key part 'kiln_version' differs"), std::string::npos) << warnings[0];

  // Truncated file.
  cache->store(e);
  {
    std::string bytes = DiskCache::encode(e);
    std::ofstream f(files[0], std::ios::binary | std::ios::trunc);
    f << bytes.substr(0, bytes.size() / 2);
  }
  EXPECT_FALSE(cache->load(e.key).has_value());
  EXPECT_EQ(cache->stats().rejected, 2u);
  EXPECT_EQ(warnings.size(), 1u);  // the same path is reported once per process
  EXPECT_EQ(cache->stats().hits, 1u);
}

namespace {
void writeFile(const std::string &path, const std::string &bytes) {
  llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path));
  std::ofstream(path, std::ios::binary) << bytes;
}
/// The entry path for digest `d` under cache dir `dir`.
std::string entryPath(const std::string &dir, const std::string &d) { return dir + "/v1/" + d.substr(0, 2) + "/" + d + ".kiln"; }
}  // namespace

// Issue 14 (data loss): the cache only deletes files it wrote, never follows
// a symlink, and odd sizes and mtimes do not make it evict everything.
TEST(DiskCache, ClearAndEvictionTouchOnlyTheCachesOwnEntries) {
  TempDir cache, outside;
  // User files outside the cache, reachable through symlinks planted in the tree.
  writeFile(outside.path + "/precious.kiln", "user data");
  writeFile(outside.path + "/ab/0123456789abcdef0123456789abcdef.kiln", "user data");
  DiskCacheOptions o;
  o.dir = cache.path;
  auto c = DiskCache::open(o);
  CachedFunction e = sampleEntry();
  c->store(e);
  std::string ours = entryPath(cache.path, e.key.digest());
  ASSERT_TRUE(llvm::sys::fs::exists(ours));
  ASSERT_EQ(::symlink(outside.path.c_str(), (cache.path + "/v1/zz").c_str()), 0);
  ASSERT_EQ(::symlink((outside.path + "/ab").c_str(), (cache.path + "/v1/ab").c_str()), 0);
  // A user file with an entry-like name but no kiln header, and one named *.kiln.
  std::string foreign = entryPath(cache.path, "cd" + std::string(30, '0'));
  writeFile(foreign, "not a cache entry");
  writeFile(cache.path + "/v1/cd/notes.kiln", "user notes");

  EXPECT_EQ(c->list().size(), 2u);  // ours and the foreign file with an entry's name; no symlinked files
  auto removed = c->clear();
  ASSERT_TRUE(bool(removed));
  EXPECT_EQ(*removed, 1u);
  EXPECT_FALSE(llvm::sys::fs::exists(ours));
  for (const std::string &kept : {outside.path + "/precious.kiln", outside.path + "/ab/0123456789abcdef0123456789abcdef.kiln",
                                  foreign, cache.path + "/v1/cd/notes.kiln"})
    EXPECT_TRUE(llvm::sys::fs::exists(kept)) << kept;

  // A huge sparse foreign file with a future mtime does not make eviction
  // delete every entry (nor the entry just written).
  DiskCacheOptions small = o;
  small.maxBytes = 4096;
  auto c2 = DiskCache::open(small);
  std::string sparse = entryPath(cache.path, "ef" + std::string(30, '1'));
  writeFile(sparse, "");
  ASSERT_EQ(::truncate(sparse.c_str(), 1ll << 40), 0);
  struct timespec future[2] = {{0, UTIME_OMIT}, {std::time(nullptr) + 86400 * 365, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, sparse.c_str(), future, 0), 0);
  CachedFunction e2 = sampleEntry();
  e2.key.signature = "2x4xf32";
  c2->store(e);
  c2->store(e2);
  EXPECT_TRUE(c2->load(e2.key).has_value());  // the entry just written survives
  EXPECT_TRUE(c2->load(e.key).has_value());   // and the other fits under the cap
  EXPECT_TRUE(llvm::sys::fs::exists(sparse));  // not ours: never deleted
  EXPECT_EQ(c2->stats().evictions, 0u);
}

// Issue 14 (liveness, memory): an entry path that is a symlink to a device,
// a FIFO or a directory is skipped with a warning, never read, never hangs.
TEST(DiskCache, EntriesThatAreNotRegularFilesAreSkipped) {
  TempDir tmp;
  std::vector<std::string> warnings;
  DiskCacheOptions o = collectingWarnings(tmp.path, warnings);
  auto c = DiskCache::open(o);
  CachedFunction e = sampleEntry();
  std::string path = entryPath(tmp.path, e.key.digest());
  llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path));
  ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
  EXPECT_FALSE(c->load(e.key).has_value());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("is not a regular file"), std::string::npos) << warnings[0];
  c->store(e);  // the write replaces the link itself
  EXPECT_TRUE(c->load(e.key).has_value());
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));

  CachedFunction e2 = sampleEntry();
  e2.key.signature = "3x4xf32";
  std::string fifo = entryPath(tmp.path, e2.key.digest());
  llvm::sys::fs::create_directories(llvm::sys::path::parent_path(fifo));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_FALSE(c->load(e2.key).has_value());  // returns at once
  EXPECT_EQ(c->list().size(), 1u);            // ls skips it too

  // Temporary files of a killed writer are removed once stale, and counted.
  std::string orphan = llvm::sys::path::parent_path(path).str() + "/.tmp.99999.0.deadbeef";
  writeFile(orphan, DiskCache::encode(sampleEntry()).substr(0, 100));  // half an entry
  struct timespec old[2] = {{0, UTIME_OMIT}, {std::time(nullptr) - 7200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, orphan.c_str(), old, 0), 0);
  CachedFunction e3 = sampleEntry();
  e3.key.signature = "4x4xf32";
  c->store(e3);
  EXPECT_FALSE(llvm::sys::fs::exists(orphan));
  EXPECT_EQ(c->stats().orphansRemoved, 1u);
}

namespace {
/// mtime in seconds, or -1.
long long mtimeOf(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? (long long)st.st_mtim.tv_sec : -1;
}
void makeOld(const std::string &path, long long secondsAgo) {
  struct timespec t[2] = {{0, UTIME_OMIT}, {std::time(nullptr) - secondsAgo, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << path;
}
}  // namespace

// Issue 31 (1): <dir>/v1 that is a link to another cache's v1/ is never
// entered: `clear` removes nothing there and nothing is written there.
TEST(DiskCache, LinkedLayoutDirectoryIsNeverEntered) {
  TempDir mine, other;
  DiskCacheOptions o;
  o.dir = other.path;
  CachedFunction e = sampleEntry();
  DiskCache::open(o)->store(e);
  std::string theirs = entryPath(other.path, e.key.digest());
  ASSERT_TRUE(llvm::sys::fs::exists(theirs));
  ASSERT_EQ(::symlink((other.path + "/v1").c_str(), (mine.path + "/v1").c_str()), 0);
  std::vector<std::string> warnings;
  auto c = DiskCache::open(collectingWarnings(mine.path, warnings));
  EXPECT_EQ(c->mode(), cache::CacheMode::kOff);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not a directory of its own"), std::string::npos) << warnings[0];
  EXPECT_FALSE(bool(c->clear()));
  EXPECT_TRUE(c->list().empty());
  EXPECT_FALSE(c->load(e.key).has_value());
  CachedFunction e2 = sampleEntry();
  e2.key.signature = "9x4xf32";
  c->store(e2);
  EXPECT_TRUE(llvm::sys::fs::exists(theirs));
  EXPECT_EQ(entryFiles(other.path).size(), 1u);  // nothing new in the link's target
}

// Issue 31 (2): a shard directory that is a link is never followed by load
// or store: no temporary file or entry appears in its target, and an entry
// planted there is not loaded.
TEST(DiskCache, LinkedShardIsNeverFollowed) {
  TempDir cache, outside;
  CachedFunction e = sampleEntry();
  std::string digest = e.key.digest();
  llvm::sys::fs::create_directories(cache.path + "/v1");
  ASSERT_EQ(::symlink(outside.path.c_str(), (cache.path + "/v1/" + digest.substr(0, 2)).c_str()), 0);
  std::vector<std::string> warnings;
  auto c = DiskCache::open(collectingWarnings(cache.path, warnings));
  ASSERT_EQ(c->mode(), cache::CacheMode::kReadWrite);
  c->store(e);
  std::error_code ec;
  int inOutside = 0;
  for (llvm::sys::fs::directory_iterator it(outside.path, ec), end; it != end && !ec; it.increment(ec)) ++inOutside;
  EXPECT_EQ(inOutside, 0) << "the store wrote through the linked shard";
  EXPECT_EQ(c->stats().writeErrors, 1u);
  // An entry planted in the link's target is not loaded from there.
  writeFile(outside.path + "/" + digest + ".kiln", DiskCache::encode(e));
  auto c2 = DiskCache::open(collectingWarnings(cache.path, warnings));
  EXPECT_FALSE(c2->load(e.key).has_value());
  EXPECT_EQ(c2->stats().hits, 0u);
}

// Issue 31 (3): an entry that is a hard link to a file outside the cache is
// skipped: that file's mtime is never rewritten, and it is never deleted.
TEST(DiskCache, HardLinkedEntryIsNotTouched) {
  TempDir cache, outside;
  CachedFunction e = sampleEntry();
  std::string precious = outside.path + "/precious";
  writeFile(precious, DiskCache::encode(e));
  makeOld(precious, 86400);
  long long before = mtimeOf(precious);
  std::string path = entryPath(cache.path, e.key.digest());
  llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path));
  ASSERT_EQ(::link(precious.c_str(), path.c_str()), 0);
  std::vector<std::string> warnings;
  auto c = DiskCache::open(collectingWarnings(cache.path, warnings));
  EXPECT_FALSE(c->load(e.key).has_value());
  EXPECT_EQ(mtimeOf(precious), before);
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.back().find("hard links"), std::string::npos) << warnings.back();
  EXPECT_EQ(*c->clear(), 0u);
  EXPECT_TRUE(llvm::sys::fs::exists(precious));
  c->store(e);  // the write replaces the name, not the file behind it
  EXPECT_TRUE(c->load(e.key).has_value());
  EXPECT_EQ(mtimeOf(precious), before);
}

// Issue 31 (4): clear and eviction delete only temporary files kiln wrote:
// its name pattern, owned by this user, holding a prefix of an entry.
TEST(DiskCache, ForeignTemporaryFilesAreKept) {
  TempDir cache;
  DiskCacheOptions o;
  o.dir = cache.path;
  auto c = DiskCache::open(o);
  CachedFunction e = sampleEntry();
  c->store(e);
  std::string shard = llvm::sys::path::parent_path(entryPath(cache.path, e.key.digest())).str();
  std::string prefix = DiskCache::encode(e).substr(0, 64);
  std::vector<std::string> kept = {shard + "/.tmp.notes", shard + "/.tmp.1.2.deadbeef.txt",
                                   shard + "/.tmp.99999.0.deadbeef"};  // the last: kiln's name, not its bytes
  writeFile(kept[0], prefix);
  writeFile(kept[1], prefix);
  writeFile(kept[2], "user data");
  std::string ours = shard + "/.tmp.99999.1.deadbeef", empty = shard + "/.tmp.99999.2.deadbeef";
  writeFile(ours, prefix);
  writeFile(empty, "");
  for (const std::string &f : kept) makeOld(f, 7200);
  makeOld(ours, 7200);
  makeOld(empty, 7200);
  ASSERT_TRUE(bool(c->clear()));
  for (const std::string &f : kept) EXPECT_TRUE(llvm::sys::fs::exists(f)) << f;
  EXPECT_FALSE(llvm::sys::fs::exists(ours));
  EXPECT_FALSE(llvm::sys::fs::exists(empty));
}

// Issue 31 (12): the directory is private to its user: created 0700, and
// one that others can write is refused (its entries are code kiln runs).
TEST(DiskCache, DirectoryIsPrivateAndOneWritableByOthersIsRefused) {
  TempDir tmp;
  std::string dir = tmp.path + "/new/cache";
  DiskCacheOptions o;
  o.dir = dir;
  auto c = DiskCache::open(o);
  ASSERT_EQ(c->mode(), cache::CacheMode::kReadWrite);
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  std::vector<std::string> warnings;
  auto shared = DiskCache::open(collectingWarnings(dir, warnings));
  EXPECT_EQ(shared->mode(), cache::CacheMode::kOff);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("can be written by other users (mode 0777"), std::string::npos) << warnings[0];
  shared->store(sampleEntry());
  EXPECT_TRUE(entryFiles(dir).empty());
}

TEST(DiskCache, UnwritableDirectoryDegradesToMemory) {
  TempDir tmp;
  std::string file = tmp.path + "/not-a-dir";
  std::ofstream(file) << "x";
  std::vector<std::string> warnings;
  // Its parent is a file: the directory cannot be created.
  DiskCacheOptions o = collectingWarnings(file + "/cache", warnings);
  auto cache = DiskCache::open(o);
  EXPECT_EQ(cache->mode(), cache::CacheMode::kOff);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cannot be created"), std::string::npos);

  // Writes that fail later (here: every shard directory is a file) degrade too.
  TempDir tmp2;
  llvm::sys::fs::create_directories(tmp2.path + "/v1");
  for (int i = 0; i < 256; ++i) {
    char name[3];
    std::snprintf(name, sizeof(name), "%02x", i);
    std::ofstream(tmp2.path + "/v1/" + name) << "x";
  }
  warnings.clear();
  o.dir = tmp2.path;
  auto c2 = DiskCache::open(o);
  EXPECT_EQ(c2->mode(), cache::CacheMode::kReadWrite);
  c2->store(sampleEntry());
  EXPECT_EQ(c2->mode(), cache::CacheMode::kReadOnly);
  EXPECT_EQ(c2->stats().writeErrors, 1u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("memory only"), std::string::npos);

  // A runtime on such a directory still runs models.
  RuntimeOptions ro;
  ro.cacheDir = tmp2.path;
  ro.cacheMode = kiln::CacheMode::kReadWrite;
  auto rt = Runtime::create(ro);
  ASSERT_TRUE(bool(rt));
  auto m = KILN_TAKE((*rt)->loadModule(models::findBuiltinModel("mlp")->mlir, "mlp"));
  ASSERT_TRUE(m);
  auto out = m->call("main", {test::randomTensor({2, 64}, 1)});
  EXPECT_TRUE(bool(out));
  if (!out) llvm::consumeError(out.takeError());
}

TEST(CompileCache, WarmStartRunsNoMlirAndGivesIdenticalResults) {
  TempDir tmp;
  const std::string cnn = models::findBuiltinModel("cnn")->mlir;
  Tensor x = test::randomTensor({1, 16, 16, 3}, 3);
  std::vector<Tensor> cold;
  {
    auto rt = runtimeAt(tmp.path);
    auto m = KILN_TAKE(rt->loadModule(cnn, "cnn"));
    ASSERT_TRUE(m);
    cold = KILN_TAKE(m->call("main", {x}));
    EXPECT_GT(m->pipelineRuns(), 0u);
    EXPECT_EQ(rt->compileService().stats().compiles, 1u);
    EXPECT_EQ(rt->compileService().stats().disk.writes, 1u);
  }
  // A new runtime (as in a new process) over the same directory.
  auto rt = runtimeAt(tmp.path);
  auto m = KILN_TAKE(rt->loadModule(cnn, "cnn"));
  ASSERT_TRUE(m);
  auto fn = KILN_TAKE(m->compile("main", {x.type()}));
  ASSERT_TRUE(fn);
  EXPECT_TRUE(fn->stats.fromObject);
  auto warm = KILN_TAKE(m->call("main", {x}));
  EXPECT_EQ(m->pipelineRuns(), 0u);  // no specialization, no lowering, no LLVM codegen
  auto stats = rt->compileService().stats();
  EXPECT_EQ(stats.compiles, 0u);
  EXPECT_EQ(stats.diskHits, 1u);
  ASSERT_EQ(warm.size(), cold.size());
  EXPECT_EQ(0, std::memcmp(warm[0].rawData(), cold[0].rawData(), cold[0].byteSize()));
}

TEST(CompileCache, RetrainedWeightsReuseCodeOtherGraphsDoNot) {
  TempDir tmp;
  const std::string mlp = models::findBuiltinModel("mlp")->mlir;
  // Same graph, other weights: change bytes inside w1's hex blob (the
  // model's first large constant).
  std::string retrained = mlp;
  size_t hex = retrained.find("dense<\"0x");
  ASSERT_NE(hex, std::string::npos);
  hex += 10;
  for (size_t i = 0; i < 64; ++i) retrained[hex + i] = retrained[hex + i] == '0' ? '1' : '0';
  // Another graph: a different clamp bound (compiled into the code).
  std::string other = mlp;
  const std::string bound = "max_val = 3.40282347E+38 : f32";
  size_t clamp = other.find(bound);
  ASSERT_NE(clamp, std::string::npos);
  other.replace(clamp, bound.size(), "max_val = 1.0 : f32");
  Tensor x = test::randomTensor({2, 64}, 9);

  auto rt = runtimeAt(tmp.path);
  auto base = KILN_TAKE(rt->loadModule(mlp, "mlp"));
  auto y0 = KILN_TAKE(base->call("main", {x}));
  auto rm = KILN_TAKE(rt->loadModule(retrained, "retrained"));
  auto y1 = KILN_TAKE(rm->call("main", {x}));
  EXPECT_EQ(rm->pipelineRuns(), 0u);  // reused base's code
  EXPECT_EQ(rt->compileService().stats().compiles, 1u);
  ASSERT_EQ(y1.size(), 1u);
  EXPECT_NE(0, std::memcmp(y0[0].rawData(), y1[0].rawData(), y0[0].byteSize()));
  // ...and it computes with its own weights: same answer as a cache-less runtime.
  auto fresh = KILN_TAKE(test::sharedRuntime().loadModule(retrained, "retrained"));
  auto y1ref = KILN_TAKE(fresh->call("main", {x}));
  EXPECT_EQ(0, std::memcmp(y1[0].rawData(), y1ref[0].rawData(), y1ref[0].byteSize()));

  auto om = KILN_TAKE(rt->loadModule(other, "other"));
  auto y2 = KILN_TAKE(om->call("main", {x}));
  EXPECT_GT(om->pipelineRuns(), 0u);
  EXPECT_EQ(rt->compileService().stats().compiles, 2u);
  auto k0 = KILN_TAKE(base->cacheKey("main", {x.type()}));
  auto k2 = KILN_TAKE(om->cacheKey("main", {x.type()}));
  EXPECT_EQ(k0.firstDifference(k2), "graph");
}

TEST(CompileCache, CorruptEntryIsRecompiledAndReplaced) {
  TempDir tmp;
  const std::string mlp = models::findBuiltinModel("mlp")->mlir;
  Tensor x = test::randomTensor({3, 64}, 4);
  std::string entry;
  std::vector<Tensor> want = callIntoCache(tmp.path, mlp, x, entry);
  ASSERT_FALSE(entry.empty());
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\xff');
  }
  auto rt = runtimeAt(tmp.path);
  auto m = KILN_TAKE(rt->loadModule(mlp, "mlp"));
  auto got = KILN_TAKE(m->call("main", {x}));
  auto st = rt->compileService().stats();
  EXPECT_EQ(st.disk.rejected, 1u);
  EXPECT_EQ(st.compiles, 1u);
  EXPECT_EQ(st.disk.writes, 1u);
  EXPECT_EQ(0, std::memcmp(got[0].rawData(), want[0].rawData(), want[0].byteSize()));
  auto rt2 = runtimeAt(tmp.path);  // the rewritten entry is good
  auto m2 = KILN_TAKE(rt2->loadModule(mlp, "mlp"));
  ASSERT_TRUE(bool(m2->call("main", {x})));
  EXPECT_EQ(rt2->compileService().stats().diskHits, 1u);
}

// Issue 31 (12): an entry whose checksum is valid but whose plan disagrees
// with the module it is stored for (edited and re-summed) is dropped and
// recompiled with a warning, not run and not kept.
TEST(CompileCache, ForgedEntryThatCannotServeItsKeyIsRecompiled) {
  TempDir tmp;
  const std::string mlp = models::findBuiltinModel("mlp")->mlir;
  Tensor x = test::randomTensor({1, 64}, 4);  // batch 1: the code stored is this signature's own
  std::string entry;
  std::vector<Tensor> want = callIntoCache(tmp.path, mlp, x, entry);
  ASSERT_FALSE(entry.empty());
  auto original = KILN_TAKE(DiskCache::decode((*llvm::MemoryBuffer::getFile(entry))->getBuffer()));
  std::string resultType = want[0].type().str();
  ASSERT_NE(original.plan.find("\"" + resultType + "\""), std::string::npos) << original.plan;
  for (int forgery = 0; forgery < 2; ++forgery) {
    SCOPED_TRACE(forgery ? "the plan's input type" : "the plan's and the entry's result types");
    CachedFunction forged = original;
    if (forgery == 0) {
      std::string wrong = "1000x1000xf32";
      size_t at = forged.plan.rfind("\"" + resultType + "\"");
      forged.plan.replace(at + 1, resultType.size(), wrong);
      forged.results[0] = TensorType{DType::f32, {1000, 1000}};
    } else {
      size_t at = forged.plan.find("\"1x64xf32\"");
      ASSERT_NE(at, std::string::npos) << forged.plan;
      forged.plan.replace(at + 1, 8, "1x65xf32");
    }
    writeFile(entry, DiskCache::encode(forged));
    std::vector<std::string> warnings;
    RuntimeOptions o;
    o.cacheDir = tmp.path;
    o.cacheMode = kiln::CacheMode::kReadWrite;
    o.placement.measure = false;
    o.warnings = [&warnings](const std::string &w) { warnings.push_back(w); };
    auto rt = KILN_TAKE(Runtime::create(o));
    auto m = KILN_TAKE(rt->loadModule(mlp, "mlp"));
    auto got = KILN_TAKE(m->call("main", {x}));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(0, std::memcmp(got[0].rawData(), want[0].rawData(), want[0].byteSize()));
    EXPECT_EQ(rt->compileService().stats().compiles, 1u);
    bool warned = false;
    for (const std::string &w : warnings) warned |= w.find("cannot serve @main") != std::string::npos;
    EXPECT_TRUE(warned) << (warnings.empty() ? "no warning" : warnings[0]);
    auto rewritten = KILN_TAKE(DiskCache::decode((*llvm::MemoryBuffer::getFile(entry))->getBuffer()));
    EXPECT_EQ(rewritten.plan, original.plan);  // replaced by the recompiled entry
  }
}

TEST(CompileCache, RacingThreadsCompileOnce) {
  TempDir tmp;
  auto rt = runtimeAt(tmp.path);
  auto m = KILN_TAKE(rt->loadModule(models::findBuiltinModel("cnn")->mlir, "cnn"));
  ASSERT_TRUE(m);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i)
    threads.emplace_back([&, i] {
      auto r = m->call("main", {test::randomTensor({1, 16, 16, 3}, unsigned(i))});
      if (r) ++ok;
      else llvm::consumeError(r.takeError());
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(ok.load(), 6);
  auto st = rt->compileService().stats();
  EXPECT_EQ(st.compiles, 1u);
  EXPECT_EQ(st.disk.writes, 1u);
}

TEST(CompileCache, BoundedInMemoryAndOnDisk) {
  // The entries' sizes depend on the code generated for this machine:
  // measure them first, then cap the cache at what holds the last two.
  uint64_t sizes[3];
  {
    TempDir scratch;
    auto rt = runtimeAt(scratch.path);
    auto m = KILN_TAKE(rt->loadModule(models::findBuiltinModel("mlp")->mlir, "mlp"));
    uint64_t before = 0;
    for (int64_t b : {1, 2, 3}) {
      ASSERT_TRUE(bool(m->compile("main", {TensorType{DType::f32, {b, 64}}})));
      uint64_t now = rt->compileService().disk().totalBytes();
      sizes[b - 1] = now - before;
      before = now;
    }
  }
  const uint64_t cap = sizes[1] + sizes[2];
  TempDir tmp;
  auto rt = runtimeAt(tmp.path, /*maxBytes=*/cap, /*memoryEntries=*/2);
  auto m = KILN_TAKE(rt->loadModule(models::findBuiltinModel("mlp")->mlir, "mlp"));
  for (int64_t b : {1, 2, 3}) {
    ASSERT_TRUE(bool(m->compile("main", {TensorType{DType::f32, {b, 64}}})));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinct mtimes
  }
  auto st = rt->compileService().stats();
  EXPECT_EQ(rt->compileService().size(), 2u);
  EXPECT_EQ(st.evictions, 1u);
  EXPECT_GE(st.disk.evictions, 1u);
  EXPECT_LE(rt->compileService().disk().totalBytes(), cap);
  // The newest entry survived.
  auto key = KILN_TAKE(m->cacheKey("main", {TensorType{DType::f32, {3, 64}}}));
  EXPECT_EQ(rt->compileService().disk().explain(key).rfind("hit", 0), 0u);
}

TEST(CompileCache, ExplainNamesTheDifferingPart) {
  TempDir tmp;
  auto rt = runtimeAt(tmp.path);
  auto m = KILN_TAKE(rt->loadModule(models::findBuiltinModel("mlp")->mlir, "mlp"));
  ASSERT_TRUE(bool(m->compile("main", {TensorType{DType::f32, {4, 64}}})));
  auto key = KILN_TAKE(m->cacheKey("main", {TensorType{DType::f32, {8, 64}}}));
  std::string why = rt->compileService().disk().explain(key);
  EXPECT_NE(why.find("miss"), std::string::npos) << why;
  EXPECT_NE(why.find("signature: entry has '4x64xf32', request has '8x64xf32'"), std::string::npos) << why;
  EXPECT_EQ(why.find("graph:"), std::string::npos) << why;
}

TEST(CompileCache, TwoProcessesPopulateOneDirectory) {
  TempDir tmp;
  std::string kiln = std::string(KILN_BIN_DIR) + "/kiln";
  std::string cmd = "(" + kiln + " prewarm cnn --cache-dir " + tmp.path + " > " + tmp.path +
                    "/a.log 2>&1; echo $? > " + tmp.path + "/a.rc) & (" + kiln +
                    " prewarm cnn --cache-dir " + tmp.path + " > " + tmp.path + "/b.log 2>&1; echo $? > " +
                    tmp.path + "/b.rc) & (" + kiln + " prewarm mlp --shape x=5x64 --cache-dir " + tmp.path +
                    " > " + tmp.path + "/c.log 2>&1; echo $? > " + tmp.path + "/c.rc) & wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (const char *p : {"a", "b", "c"}) {
    std::ifstream rc(tmp.path + "/" + p + ".rc");
    int code = -1;
    rc >> code;
    EXPECT_EQ(code, 0) << p;
  }
  // cnn's and mlp's code, and the placement decisions all three made.
  auto files = entryFiles(tmp.path);
  EXPECT_EQ(files.size(), 3u);
  std::multiset<std::string> functions;
  for (const auto &f : files) {
    auto buf = llvm::MemoryBuffer::getFile(f);
    ASSERT_TRUE(bool(buf));
    auto d = DiskCache::decode((*buf)->getBuffer());
    EXPECT_TRUE(bool(d)) << f;
    if (d) functions.insert(d->key.function);
    else llvm::consumeError(d.takeError());
  }
  EXPECT_EQ(functions, (std::multiset<std::string>{"kiln.placement", "main", "main"}));
  // No temporary files are left behind.
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(tmp.path, ec), end; it != end && !ec; it.increment(ec))
    EXPECT_EQ(llvm::StringRef(it->path()).find("/.tmp."), llvm::StringRef::npos) << it->path();
}

// Issue 14 item 1: a constant left in the code (here a blob in a private
// callee) is part of the cache key: two models differing only there never
// share an entry.
TEST(CompileCache, BlobsInCalleesArePartOfTheKey) {
  auto model = [](const char *hex) {
    return std::string(R"mlir(
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = "tosa.const"() <{values = dense_resource<blob> : tensor<4xf32>}> : () -> tensor<4xf32>
  %y = tosa.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
{-#
  dialect_resources: { builtin: { blob: "0x04000000)mlir") + hex + R"mlir(" } }
#-}
)mlir";
  };
  // [1, 2, 3, 4] and [10, 20, 30, 40] as little-endian f32.
  std::string a = model("0000803F000000400000404000008040"), b = model("000020410000A0410000F04100002042");
  TempDir tmp;
  auto rt = runtimeAt(tmp.path);
  auto ma = KILN_TAKE(rt->loadModule(a, "a"));
  auto mb = KILN_TAKE(rt->loadModule(b, "b"));
  Tensor x = Tensor::fromVector<float>(DType::f32, {4}, {0, 0, 0, 0});
  auto ya = KILN_TAKE(ma->call("main", {x}));
  auto yb = KILN_TAKE(mb->call("main", {x}));
  ASSERT_EQ(ya.size(), 1u);
  ASSERT_EQ(yb.size(), 1u);
  EXPECT_FLOAT_EQ(ya[0].data<float>()[3], 4.0f);
  EXPECT_FLOAT_EQ(yb[0].data<float>()[3], 40.0f);
  auto ka = KILN_TAKE(ma->cacheKey("main", {x.type()}));
  auto kb = KILN_TAKE(mb->cacheKey("main", {x.type()}));
  EXPECT_EQ(ka.firstDifference(kb), "graph");
}
