// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32})" | FileCheck %s --check-prefixes=CHECK,AVX512
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16})" | FileCheck %s --check-prefixes=CHECK,AVX2

// BERT-base's FFN matmul, 128x768 times a 768x3072 weight that streams from
// memory, stored in panels of 64 columns ([48, 768, 64]: AVX-512's 4x64
// register tiles; WeightLayouts::panelMatmulWeights) and read back by the
// graph as [1, 768, 3072] through a transpose and a reshape. Each register
// tile reads its rows of B from its own panel, a contiguous run, and the
// transpose (a copy of the weight per call) is gone.
// CHECK-LABEL: func.func @panels64(
// CHECK-SAME: %[[A:[^:]*]]: tensor<1x128x768xf32>, %[[W:[^:]*]]: tensor<48x768x64xf32>
// AVX512-NOT: linalg.transpose
// AVX512: scf.forall
// AVX512: tensor.extract_slice %[[W]][%{{.*}}, %{{.*}}, 0] [1, 1, 64] [1, 1, 1] : tensor<48x768x64xf32> to tensor<1x1x64xf32>
// AVX512: vector.transfer_read {{.*}} : tensor<1x1x64xf32>, vector<64xf32>
// The 16-wide tiles of AVX2 do not take 64-wide panels: read through the
// transpose (correct, slow).
// AVX2: linalg.transpose ins(%[[W]]
// CHECK: return
func.func @panels64(%a: tensor<1x128x768xf32>, %w: tensor<48x768x64xf32>) -> tensor<1x128x3072xf32> {
  %t = tosa.transpose %w {perms = array<i32: 1, 0, 2>} : (tensor<48x768x64xf32>) -> tensor<768x48x64xf32>
  %s = tosa.const_shape {values = dense<[1, 768, 3072]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %b = tosa.reshape %t, %s : (tensor<768x48x64xf32>, !tosa.shape<3>) -> tensor<1x768x3072xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x128x768xf32>, tensor<1x768x3072xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x128x3072xf32>
  return %y : tensor<1x128x3072xf32>
}

// The same weight in AVX2's 16-wide panels ([192, 768, 16]).
// CHECK-LABEL: func.func @panels16(
// CHECK-SAME: %[[A:[^:]*]]: tensor<1x128x768xf32>, %[[W:[^:]*]]: tensor<192x768x16xf32>
// AVX2-NOT: linalg.transpose
// AVX2: scf.forall
// AVX2: tensor.extract_slice %[[W]][%{{.*}}, %{{.*}}, 0] [1, 1, 16] [1, 1, 1] : tensor<192x768x16xf32> to tensor<1x1x16xf32>
// AVX512: linalg.transpose ins(%[[W]]
// CHECK: return
func.func @panels16(%a: tensor<1x128x768xf32>, %w: tensor<192x768x16xf32>) -> tensor<1x128x3072xf32> {
  %t = tosa.transpose %w {perms = array<i32: 1, 0, 2>} : (tensor<192x768x16xf32>) -> tensor<768x192x16xf32>
  %s = tosa.const_shape {values = dense<[1, 768, 3072]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %b = tosa.reshape %t, %s : (tensor<768x192x16xf32>, !tosa.shape<3>) -> tensor<1x768x3072xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x128x768xf32>, tensor<1x768x3072xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x128x3072xf32>
  return %y : tensor<1x128x3072xf32>
}
