// The model zoo (bench/models/export.py): every exported model, from every
// route (torch-mlir TOSA, torch-mlir linalg-on-tensors, ONNX through `kiln
// import`), run through kiln all-JIT, all-kernel and mixed (TOSA routes; the
// linalg route has no kernels), must give the framework's output: relative
// L2 error <= 1e-4 and max abs error <= 1e-3. The zoo lives in a cache
// folder ($KILN_ZOO_DIR, else $XDG_CACHE_HOME/kiln/zoo, else
// ~/.cache/kiln/zoo); without one every case is skipped, saying how to make it.
#include "api/Kiln.h"
#include "jit/CompileService.h"
#include "runtime/Npy.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kiln;

namespace {

std::string zooDir() {
  if (const char *d = std::getenv("KILN_ZOO_DIR"); d && *d) return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln/zoo";
  if (const char *h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln/zoo";
  return "";
}

struct ZooCase {
  std::string model, file, modes;
  std::string name() const {
    std::string n = model + "_" + llvm::sys::path::stem(file).str() + "_" + modes;
    for (char &c : n)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
  }
};

std::vector<ZooCase> zooCases() {
  std::vector<ZooCase> cases;
  std::string dir = zooDir();
  std::error_code ec;
  std::vector<std::string> models;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (llvm::sys::fs::is_directory(it->path())) models.push_back(it->path());
  std::sort(models.begin(), models.end());
  for (const std::string &m : models) {
    if (!llvm::sys::fs::exists(m + "/x.npy") || !llvm::sys::fs::exists(m + "/y.npy")) continue;
    std::string name = llvm::sys::path::filename(m).str();
    for (const char *file : {"tosa.mlir", "onnx.mlir", "linalg.mlir"}) {
      if (!llvm::sys::fs::exists(m + "/" + file)) continue;
      bool tosa = std::string(file) != "linalg.mlir";
      for (const char *modes : {"*=jit", "*=kernel", "tosa.conv2d=kernel,tosa.matmul=kernel,*=jit"})
        if (tosa || std::string(modes) == "*=jit") cases.push_back({name, m + "/" + file, modes});
    }
  }
  if (cases.empty()) cases.push_back({"none", "", ""});
  return cases;
}

class Zoo : public ::testing::TestWithParam<ZooCase> {};

TEST_P(Zoo, MatchesTheFramework) {
  const ZooCase &c = GetParam();
  if (c.file.empty())
    GTEST_SKIP() << "no model zoo in '" << zooDir()
                 << "': bench/models/setup.sh && ~/.cache/kiln/peers-venv/bin/python bench/models/export.py";
  std::string folder = llvm::sys::path::parent_path(c.file).str();
  auto x = readNpy(folder + "/x.npy");
  ASSERT_TRUE(bool(x)) << llvm::toString(x.takeError());
  auto y = readNpy(folder + "/y.npy");
  ASSERT_TRUE(bool(y)) << llvm::toString(y.takeError());
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.placement = llvm::cantFail(ops::parseOpModes(c.modes));
  auto rt = Runtime::create(o);
  ASSERT_TRUE(bool(rt)) << llvm::toString(rt.takeError());
  auto m = (*rt)->loadModuleFromFile(c.file);
  if (!m) {
    std::string err = llvm::toString(m.takeError());
    // Newer torch-mlir versions export some ops (cumsum: BERT's position
    // ids) to their own TMTensor dialect in linalg-on-tensors output: not an
    // input kiln takes (its TOSA export of the same model is tested).
    if (err.find("Dialect `tm_tensor' not found") != std::string::npos)
      GTEST_SKIP() << c.file << " uses torch-mlir's tm_tensor dialect, which kiln does not take";
    FAIL() << err;
  }
  ASSERT_FALSE((*m)->functions().empty());
  std::string fn = (*m)->functions().front().name;  // main (torch-mlir) or main_graph (ONNX)
  auto out = (*m)->call(fn, {*x});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  ASSERT_EQ(out->size(), 1u);
  const Tensor &got = (*out)[0];
  ASSERT_EQ(got.numElements(), y->numElements()) << got.type().str() << " vs " << y->type().str();
  double diff = 0, norm = 0, maxAbs = 0;
  for (int64_t i = 0; i < got.numElements(); ++i) {
    double a = got.elementAsDouble(i), b = y->elementAsDouble(i);
    diff += (a - b) * (a - b);
    norm += b * b;
    maxAbs = std::max(maxAbs, std::abs(a - b));
  }
  double relL2 = std::sqrt(diff / std::max(norm, 1e-30));
  EXPECT_LE(relL2, 1e-4) << c.file << " (" << c.modes << ")";
  EXPECT_LE(maxAbs, 1e-3) << c.file << " (" << c.modes << ")";
  RecordProperty("rel_l2", std::to_string(relL2));
  // A JIT cluster that fails to compile falls back to kernels and the call
  // still answers right: here that is a failure (ConvNeXt's invalid
  // generic of 75994a9 passed this test that way). Its warning, naming the
  // cluster and the error, is on stderr.
  EXPECT_EQ((*rt)->compileService().stats().jitFallbacks, 0u) << c.file << " (" << c.modes << ")";
}

INSTANTIATE_TEST_SUITE_P(Models, Zoo, ::testing::ValuesIn(zooCases()),
                         [](const ::testing::TestParamInfo<ZooCase> &info) { return info.param.name(); });

}  // namespace
