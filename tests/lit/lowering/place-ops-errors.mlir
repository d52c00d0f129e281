// RUN: not %kiln-opt %s --kiln-place-ops 2>&1 | FileCheck %s

// An op with neither a lowering nor a kernel is an error at its location.
func.func @kiln_fn(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: place-ops-errors.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'tosa.custom:acme.swish' has no lowering and no kernel (no kernel)
  %y = tosa.custom %x {operator_name = "swish", domain_name = "acme", implementation_attrs = ""} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
