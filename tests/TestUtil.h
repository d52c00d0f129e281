// Helpers shared by kiln's gtest suites.
#pragma once

#include "runtime/Tensor.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace kiln::test {

/// A fresh directory under the system's temporary directory, removed with
/// everything in it when the object goes.
struct TempDir {
  std::string path;
  explicit TempDir(const char *prefix = "kiln-test") {
    llvm::SmallString<128> p;
    llvm::sys::fs::createUniqueDirectory(prefix, p);
    path = p.str().str();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
};

/// Unwraps an llvm::Expected or fails the test with its message.
template <typename T> T takeOrFail(llvm::Expected<T> value, const char *what = "") {
  if (!value) {
    ADD_FAILURE() << what << ": " << llvm::toString(value.takeError());
    return T();
  }
  return std::move(*value);
}
#define KILN_TAKE(expr) ::kiln::test::takeOrFail((expr), #expr)

/// The error message of a failed Expected/Error ("" and a test failure if it succeeded).
template <typename T> std::string errorOf(llvm::Expected<T> value) {
  if (value) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(value.takeError());
}
inline std::string errorOf(llvm::Error err) {
  if (!err) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(std::move(err));
}

/// |got - want| <= atol + rtol * |want| elementwise, reporting the first mismatches.
inline ::testing::AssertionResult allClose(const std::vector<double> &got,
                                           const std::vector<double> &want, double rtol = 1e-5,
                                           double atol = 1e-6) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  int bad = 0;
  std::string msg;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok = std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]) ||
              (std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i];
    if (!ok && bad++ < 5)
      msg += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " +
             std::to_string(want[i]) + ";";
  }
  if (bad) return ::testing::AssertionFailure() << bad << " mismatches:" << msg;
  return ::testing::AssertionSuccess();
}

/// f32 tensor of `shape` with values uniform in [lo, hi) from `seed`.
inline Tensor randomTensor(std::vector<int64_t> shape, unsigned seed, float lo = -1, float hi = 1) {
  Tensor t = Tensor::empty(DType::f32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numElements(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

inline std::vector<double> asDoubles(const Tensor &t) {
  std::vector<double> v(static_cast<size_t>(t.numElements()));
  for (int64_t i = 0; i < t.numElements(); ++i) v[i] = t.elementAsDouble(i);
  return v;
}
template <typename T> std::vector<double> asDoubles(const std::vector<T> &x) {
  return std::vector<double>(x.begin(), x.end());
}

}  // namespace kiln::test
