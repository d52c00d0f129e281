#include "runtime/cuda/CudaDriver.h"
#include "runtime/Error.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace kiln::cuda {

std::string resultName(const Driver *driver, CUresult result) {
  const char *name = nullptr, *text = nullptr;
  if (driver && driver->cuGetErrorName) driver->cuGetErrorName(result, &name);
  if (driver && driver->cuGetErrorString) driver->cuGetErrorString(result, &text);
  std::string s = name ? name : "CUresult " + std::to_string(int(result));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

llvm::Error Driver::check(CUresult result, const char *call, llvm::StringRef what) const {
  if (result == CUDA_SUCCESS) return llvm::Error::success();
  ErrorCode code = result == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::kResourceExhausted
                   : (result == CUDA_ERROR_NO_DEVICE || result == CUDA_ERROR_INVALID_DEVICE ||
                      result == CUDA_ERROR_NO_BINARY_FOR_GPU || result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
                       ? ErrorCode::kUnavailable
                       : ErrorCode::kInternal;
  // The call's name without its arguments: "cuMemAlloc(&p, n)" -> cuMemAlloc.
  llvm::StringRef name = llvm::StringRef(call).split('(').first;
  return error(code, "%s failed: %s while %s", name.str().c_str(), resultName(this, result).c_str(),
               what.str().c_str());
}

namespace {

struct Loaded {
  Driver driver;
  std::string error;  // why there is no driver
  bool ok = false;
};

Loaded load() {
  Loaded l;
  const char *path = std::getenv("KILN_CUDA_DRIVER");  // tests: a driver that is not there
  if (!path || !*path) path = "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    l.error = std::string("no CUDA driver: cannot load ") + path + " (" + (why ? why : "unknown reason") +
              "); is an NVIDIA GPU and its driver installed?";
    return l;
  }
  using GetProc = CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  auto getProc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  auto driverVersion = reinterpret_cast<CUresult (*)(int *)>(dlsym(lib, "cuDriverGetVersion"));
  if (!getProc || !driverVersion) {
    l.error = std::string("the CUDA driver in ") + path +
              " is too old: it has no cuGetProcAddress_v2 (kiln needs a CUDA 12 or newer driver)";
    return l;
  }
  if (driverVersion(&l.driver.version) != CUDA_SUCCESS || l.driver.version < 12000) {
    l.error = "the CUDA driver's version " + std::to_string(l.driver.version / 1000) + "." +
              std::to_string(l.driver.version % 1000 / 10) + " is older than 12.0, which kiln needs";
    return l;
  }
  int apiVersion = std::min(l.driver.version, CUDA_VERSION);
  auto resolve = [&](const char *name, void **slot) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = getProc(name, slot, apiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || !*slot) {
      l.error = std::string("the CUDA driver has no ") + name + " for API version " + std::to_string(apiVersion);
      return false;
    }
    return true;
  };
#define KILN_CUDA_RESOLVE(name, type) \
  if (!resolve(#name, reinterpret_cast<void **>(&l.driver.name))) return l;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_RESOLVE)
#undef KILN_CUDA_RESOLVE
  CUresult r = l.driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    l.error = "cuInit failed: " + resultName(&l.driver, r) +
              (r == CUDA_ERROR_NO_DEVICE ? "; no CUDA-capable GPU is visible" : "");
    return l;
  }
  l.ok = true;
  return l;  // the library stays loaded for the life of the process
}

}  // namespace

llvm::Expected<const Driver &> Driver::get() {
  static Loaded loaded = load();
  if (!loaded.ok) return error(ErrorCode::kUnavailable, "%s", loaded.error.c_str());
  return loaded.driver;
}

}  // namespace kiln::cuda
