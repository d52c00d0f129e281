// RUN: %kiln-opt %s --kiln-tosa-to-linalg | FileCheck %s --check-prefix=DEFAULT
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(func.func(tosa-to-linalg),func.func(kiln-fuse-elementwise{max-body-ops=4}))" | FileCheck %s --check-prefix=BOUNDED

// A chain of elementwise ops fuses into one loop body, but only up to the
// bound: with max-body-ops=4 the six ops stay in three generics.
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = tosa.add %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = tosa.exp %0 : (tensor<8xf32>) -> tensor<8xf32>
  %2 = tosa.add %1, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = tosa.tanh %2 : (tensor<8xf32>) -> tensor<8xf32>
  %4 = tosa.add %3, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = tosa.exp %4 : (tensor<8xf32>) -> tensor<8xf32>
  return %5 : tensor<8xf32>
}

// DEFAULT-COUNT-1: linalg.generic
// DEFAULT-NOT: linalg.generic

// BOUNDED-COUNT-3: linalg.generic
// BOUNDED-NOT: linalg.generic
