// RUN: %kiln-opt %s --kiln-place-ops | FileCheck %s --check-prefix=AUTO
// RUN: %kiln-opt %s --kiln-place-ops="modes=tosa.matmul=kernel kernels=tosa.matmul,tosa.exp" | FileCheck %s --check-prefix=MODES
// RUN: %kiln-opt %s --kiln-place-ops="modes=*=kernel kernels=tosa.exp" | FileCheck %s --check-prefix=NOTE
// RUN: %kiln-opt %s --kiln-place-ops="force-kernel=tosa.exp kernels=tosa.exp" | FileCheck %s --check-prefix=FORCED
// RUN: not %kiln-opt %s --kiln-place-ops="modes=tosa.exp=fast" 2>&1 | FileCheck %s --check-prefix=BADMODE
// RUN: %kiln-opt %s --kiln-place-ops="kernels=tosa.matmul,tosa.exp" | FileCheck %s --check-prefix=MEASURE
// RUN: %kiln-opt %s --kiln-place-ops="modes=measure=off kernels=tosa.matmul,tosa.exp" | FileCheck %s --check-prefix=NOMEASURE

// Each op of kiln_fn but constants gets kiln.placement; kernel-placed ops
// also name their kernel and why.
func.func @kiln_fn(%a: tensor<1x2x3xf32>, %b: tensor<1x3x4xf32>) -> tensor<1x2x4xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %m = tosa.matmul %a, %b, %zp, %zp : (tensor<1x2x3xf32>, tensor<1x3x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x2x4xf32>
  %e = tosa.exp %m : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return %e : tensor<1x2x4xf32>
}

// AUTO-NOT: kiln.placement{{.*}}tosa.const
// AUTO: tosa.matmul {{.*}}{kiln.placement = "jit"}
// AUTO: tosa.exp {{.*}}{kiln.placement = "jit"}

// MODES: tosa.matmul {{.*}}{kiln.kernel = "tosa_matmul_kernel", kiln.placement = "kernel", kiln.reason = "mode=kernel"}
// MODES: tosa.exp {{.*}}{kiln.placement = "jit"}

// NOTE: tosa.matmul {{.*}}{kiln.note = "tosa.matmul: mode=kernel, kept on JIT (no kernel)", kiln.placement = "jit"}
// NOTE: tosa.exp {{.*}}{kiln.kernel = "tosa_exp_kernel", kiln.placement = "kernel", kiln.reason = "mode=kernel"}

// FORCED: tosa.exp {{.*}}kiln.reason = "JIT compile failed"

// BADMODE: kiln-place-ops: op mode 'tosa.exp=fast': mode 'fast' is not jit, kernel or auto

// Placement by measurement: the auto matmul (an anchor) that a kernel takes
// stays on JIT marked with its alternative; the elementwise exp is not
// measured (fused with its neighbours, generated code wins).
// MEASURE: tosa.matmul {{.*}}{kiln.alternative = "tosa_matmul_kernel", kiln.placement = "jit"}
// MEASURE: tosa.exp {{.*}}{kiln.placement = "jit"}
// NOMEASURE-NOT: kiln.alternative
