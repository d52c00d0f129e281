// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32},kiln-bufferize,kiln-lower-to-llvm)" | FileCheck %s
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32},kiln-bufferize)" | FileCheck %s --check-prefix=BUF

// A cluster whose result is padded for the next op's window (a depthwise
// conv's padding, split off by kiln-split-conv-padding): the conv and its
// activation write straight into the padded result's interior (no
// temporary, no copy of the whole tensor), only the border is filled, and
// the conv's tiles still run in parallel.
// BUF-LABEL: func.func @kiln_fn(
// BUF-SAME: %[[OUT:[a-z0-9]+]]: memref<1x58x58x64xf32>)
// BUF-NOT: memref.copy
// BUF: memref.subview %[[OUT]][0, 1, 1, 0] [1, 56, 56, 64]
// BUF: scf.forall
// BUF-NOT: memref.copy
// CHECK: llvm.call @kiln_parallel_for
func.func @kiln_fn(%x: tensor<1x56x56x64xf32>, %w: tensor<64x1x1x64xf32>, %b: tensor<64xf32>) -> tensor<1x58x58x64xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %w, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x56x56x64xf32>, tensor<64x1x1x64xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x56x56x64xf32>
  %r = tosa.clamp %c {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %s = tosa.const_shape {values = dense<[0, 0, 1, 1, 1, 1, 0, 0]> : tensor<8xindex>} : () -> !tosa.shape<8>
  %p = tosa.pad %r, %s, %zp : (tensor<1x56x56x64xf32>, !tosa.shape<8>, tensor<1xf32>) -> tensor<1x58x58x64xf32>
  return %p : tensor<1x58x58x64xf32>
}
