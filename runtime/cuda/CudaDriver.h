// CudaDriver: the CUDA driver API, loaded at run time from libcuda.so.1.
//
// kiln never links the driver: the same binary runs on machines without a
// GPU or driver, where Driver::get() returns an "unavailable" error that
// says what is missing. Function pointers come from cuGetProcAddress for the
// API version of the headers kiln was built with (or the driver's, if
// older), so the prototypes below are the ones those pointers have.
//
// Every CUresult other than CUDA_SUCCESS becomes a kiln error naming the
// call, the driver's name and description of the code, and what kiln was
// doing (check()).
//
// Thread-safety: get() is thread-safe; the table is immutable after it.
#pragma once

#include <cuda.h>

#include "llvm/Support/Error.h"

#include <string>

namespace kiln::cuda {

struct Driver {
  /// The loaded driver, or why there is none (kUnavailable). Calls cuInit
  /// once.
  static llvm::Expected<const Driver &> get();

  int version = 0;  // cuDriverGetVersion, e.g. 12080

#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit, CUresult (*)(unsigned))                                                                    \
  X(cuDriverGetVersion, CUresult (*)(int *))                                                            \
  X(cuGetErrorName, CUresult (*)(CUresult, const char **))                                              \
  X(cuGetErrorString, CUresult (*)(CUresult, const char **))                                            \
  X(cuDeviceGetCount, CUresult (*)(int *))                                                              \
  X(cuDeviceGet, CUresult (*)(CUdevice *, int))                                                         \
  X(cuDeviceGetName, CUresult (*)(char *, int, CUdevice))                                               \
  X(cuDeviceGetAttribute, CUresult (*)(int *, CUdevice_attribute, CUdevice))                            \
  X(cuDeviceTotalMem, CUresult (*)(size_t *, CUdevice))                                                 \
  X(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext *, CUdevice))                                      \
  X(cuDevicePrimaryCtxRelease, CUresult (*)(CUdevice))                                                  \
  X(cuCtxSetCurrent, CUresult (*)(CUcontext))                                                           \
  X(cuCtxGetCurrent, CUresult (*)(CUcontext *))                                                         \
  X(cuMemGetInfo, CUresult (*)(size_t *, size_t *))                                                     \
  X(cuMemAlloc, CUresult (*)(CUdeviceptr *, size_t))                                                    \
  X(cuMemFree, CUresult (*)(CUdeviceptr))                                                               \
  X(cuMemAllocHost, CUresult (*)(void **, size_t))                                                      \
  X(cuMemFreeHost, CUresult (*)(void *))                                                                \
  X(cuMemcpyHtoDAsync, CUresult (*)(CUdeviceptr, const void *, size_t, CUstream))                      \
  X(cuMemcpyDtoHAsync, CUresult (*)(void *, CUdeviceptr, size_t, CUstream))                            \
  X(cuMemcpyDtoDAsync, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))                       \
  X(cuMemsetD8Async, CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream))                       \
  X(cuStreamCreate, CUresult (*)(CUstream *, unsigned))                                                 \
  X(cuStreamDestroy, CUresult (*)(CUstream))                                                            \
  X(cuStreamSynchronize, CUresult (*)(CUstream))                                                        \
  X(cuStreamWaitEvent, CUresult (*)(CUstream, CUevent, unsigned))                                       \
  X(cuLaunchHostFunc, CUresult (*)(CUstream, CUhostFn, void *))                                         \
  X(cuEventCreate, CUresult (*)(CUevent *, unsigned))                                                   \
  X(cuEventDestroy, CUresult (*)(CUevent))                                                              \
  X(cuEventRecord, CUresult (*)(CUevent, CUstream))                                                     \
  X(cuEventSynchronize, CUresult (*)(CUevent))                                                          \
  X(cuEventElapsedTime, CUresult (*)(float *, CUevent, CUevent))                                        \
  X(cuModuleLoadDataEx, CUresult (*)(CUmodule *, const void *, unsigned, CUjit_option *, void **))     \
  X(cuModuleUnload, CUresult (*)(CUmodule))                                                             \
  X(cuModuleGetFunction, CUresult (*)(CUfunction *, CUmodule, const char *))                            \
  X(cuModuleGetGlobal, CUresult (*)(CUdeviceptr *, size_t *, CUmodule, const char *))                   \
  X(cuFuncSetAttribute, CUresult (*)(CUfunction, CUfunction_attribute, int))                            \
  X(cuLaunchKernel, CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
                                 unsigned, CUstream, void **, void **))                                 \
  X(cuStreamBeginCapture, CUresult (*)(CUstream, CUstreamCaptureMode))                                  \
  X(cuStreamEndCapture, CUresult (*)(CUstream, CUgraph *))                                              \
  X(cuGraphInstantiateWithFlags, CUresult (*)(CUgraphExec *, CUgraph, unsigned long long))              \
  X(cuGraphLaunch, CUresult (*)(CUgraphExec, CUstream))                                                 \
  X(cuGraphDestroy, CUresult (*)(CUgraph))                                                              \
  X(cuGraphExecDestroy, CUresult (*)(CUgraphExec))

  template <typename T> using Fn = T;
#define KILN_CUDA_DECLARE(name, type) Fn<type> name = nullptr;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_DECLARE)
#undef KILN_CUDA_DECLARE

  /// Success, or an error "`call` failed: CUDA_ERROR_X (description) while
  /// `what`".
  llvm::Error check(CUresult result, const char *call, llvm::StringRef what) const;
};

/// Checks a driver call: KILN_CU(d, cuMemAlloc(&p, n), "allocating 4 MiB").
/// `what` is evaluated only when the call fails (it is built on every
/// launch of a plan otherwise).
#define KILN_CU(driver, call, what)                                   \
  [&]() -> llvm::Error {                                              \
    CUresult kilnResult_ = (driver).call;                             \
    if (kilnResult_ == CUDA_SUCCESS) return llvm::Error::success();   \
    return (driver).check(kilnResult_, #call, what);                  \
  }()

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for `result`, with or without
/// a driver to ask.
std::string resultName(const Driver *driver, CUresult result);

}  // namespace kiln::cuda
