// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32})" | FileCheck %s --check-prefix=AVX512
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16})" | FileCheck %s --check-prefix=AVX2

// Register tiles of convs that compute in them (kiln-cpu-strategy's
// inRegisters).

// 24 filters (MobileNetV2's 1x1 144 -> 24 with its residual add): register
// tiles of 8 filters would fill half of each 16-lane vector, so a conv that
// computes in its register tiles takes whole vectors of 16 filters and one
// tile of the remaining 8 (two static loop nests, each writing its columns
// once). With 8-lane vectors the 8-filter tiles are already whole.
// AVX512-LABEL: func.func @conv24
// AVX512: scf.forall
// AVX512: scf.for {{.*}} -> (vector<8x16xf32>)
// AVX512: vector.fma {{.*}} : vector<16xf32>
// AVX512: vector.transfer_write {{.*}}, %c0] {{.*}} : vector<8x16xf32>
// AVX512: scf.for {{.*}} -> (vector<8x8xf32>)
// AVX512: vector.fma {{.*}} : vector<8xf32>
// AVX512: vector.transfer_write {{.*}}, %c16] {{.*}} : vector<8x8xf32>
// AVX512: scf.forall.in_parallel
// AVX2-LABEL: func.func @conv24
// AVX2: scf.forall
// AVX2-NOT: vector<8x16xf32>
// AVX2: vector.fma {{.*}} : vector<8xf32>
// AVX2: scf.forall.in_parallel
func.func @conv24(%x: tensor<1x56x56x144xf32>, %w: tensor<1x1x144x24xf32>, %bias: tensor<24xf32>, %res: tensor<1x56x56x24xf32>) -> tensor<1x56x56x24xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %wt = tosa.transpose %w {perms = array<i32: 3, 0, 1, 2>} : (tensor<1x1x144x24xf32>) -> tensor<24x1x1x144xf32>
  %y = tosa.conv2d %x, %wt, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x56x56x144xf32>, tensor<24x1x1x144xf32>, tensor<24xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x56x56x24xf32>
  %s = tosa.add %y, %res : (tensor<1x56x56x24xf32>, tensor<1x56x56x24xf32>) -> tensor<1x56x56x24xf32>
  return %s : tensor<1x56x56x24xf32>
}

// 512 input channels: a 4 x 64 tile's filter columns (512 x 64 floats,
// 128 KiB) would not fit, so AVX-512 takes 7 x 32 tiles (64 KiB, 1.56 FMAs
// per load) and still computes the bias and ReLU in them (one store);
// AVX2's 4 x 16 tiles fit as they are.
// AVX512-LABEL: func.func @conv512
// AVX512: scf.forall
// AVX512-NOT: vector.transfer_write
// AVX512: scf.for {{.*}} -> (vector<7x32xf32>)
// AVX512: vector.transfer_write {{.*}} : vector<7x32xf32>
// AVX512-NOT: vector.transfer_write
// AVX512: scf.forall.in_parallel
// AVX2-LABEL: func.func @conv512
// AVX2: scf.forall
// AVX2-NOT: vector.transfer_write
// AVX2: scf.for {{.*}} -> (vector<4x16xf32>)
// AVX2: vector.transfer_write {{.*}} : vector<4x16xf32>
// AVX2-NOT: vector.transfer_write
// AVX2: scf.forall.in_parallel
func.func @conv512(%x: tensor<1x28x28x512xf32>, %w: tensor<1x1x512x128xf32>, %bias: tensor<128xf32>) -> tensor<1x28x28x128xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %wt = tosa.transpose %w {perms = array<i32: 3, 0, 1, 2>} : (tensor<1x1x512x128xf32>) -> tensor<128x1x1x512xf32>
  %y = tosa.conv2d %x, %wt, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x28x28x512xf32>, tensor<128x1x1x512xf32>, tensor<128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x28x28x128xf32>
  %r = tosa.clamp %y {max_val = 3.40282347E+38 : f32, min_val = 0.0 : f32} : (tensor<1x28x28x128xf32>) -> tensor<1x28x28x128xf32>
  return %r : tensor<1x28x28x128xf32>
}
