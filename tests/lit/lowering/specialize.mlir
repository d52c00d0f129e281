// RUN: %kiln-opt %s --kiln-specialize-shapes="function=main shapes=4x8xf32,8xf32" | FileCheck %s
// RUN: not %kiln-opt %s --kiln-specialize-shapes="function=nope shapes=4x8xf32" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not %kiln-opt %s --kiln-specialize-shapes="function=main shapes=4x9xf32,8xf32" 2>&1 | FileCheck %s --check-prefix=MISMATCH

// The function is renamed kiln_fn, gets static argument and result types, and
// the shapes flow through TOSA and linalg/tensor users.
// CHECK-LABEL: func.func @kiln_fn(
// CHECK-SAME: %{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
// CHECK: tosa.exp {{.*}} -> tensor<4x8xf32>
// CHECK-NOT: tensor<?
// CHECK-NOT: @unused
// MISSING: no function @nope in the module
// MISMATCH: argument 0 of @main has type 'tensor<?x8xf32>', which 'tensor<4x9xf32>' does not specialize
func.func @main(%x: tensor<?x8xf32>, %b: tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?xf32>) {
  %e = tosa.exp %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %init = tensor.empty(%n) : tensor<?xf32>
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.reduce ins(%x : tensor<?x8xf32>) outs(%fill : tensor<?xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %e, %sum : tensor<?x8xf32>, tensor<?xf32>
}
func.func @unused(%x: tensor<1xf32>) -> tensor<1xf32> {
  return %x : tensor<1xf32>
}

// A linalg matmul whose rows were dynamic at load (not raised then: the
// raise is static-only) is raised to TOSA once the call's shape is known.
// RUN: %kiln-opt %s --kiln-specialize-shapes="function=rows shapes=3x8xf32" | FileCheck %s --check-prefix=RAISED
// RAISED-LABEL: func.func @kiln_fn(
// RAISED-NOT: linalg.
// RAISED: tosa.matmul {{.*}} -> tensor<1x3x4xf32>
func.func @rows(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %w = arith.constant dense<0.5> : tensor<8x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %m = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %m : tensor<?x4xf32>
}
