// Convolutions and matrix products on plain FP32 buffers become calls of
// private declarations that carry the library operation and its sizes (the
// plan's cuDNN / cuBLAS launches); other shapes of them stay linalg, and
// with the libraries off nothing changes. The GPU map stage runs it first.
// RUN: %kiln-opt %s --kiln-gpu-library-calls | FileCheck %s
// RUN: %kiln-opt %s --kiln-gpu-library-calls="conv=false matmul=false" | FileCheck %s --check-prefix=OFF
// RUN: %kiln-opt %s --kiln-gpu-map | FileCheck %s --check-prefix=MAP

// CHECK-LABEL: func.func @kiln_fn(
// CHECK: call @[[CONV:kiln_gpu_lib_[0-9]+]](%arg0, %arg1, %arg2) {kiln.gpu_library = "conv2d_nhwc_fhwc", kiln.gpu_params = array<i64: 1, 11, 11, 5, 7, 3, 3, 5, 5, 2, 2, 1, 1, 0>}
// CHECK: call @[[BMM:kiln_gpu_lib_[0-9]+]](%arg3, %arg4, %arg5) {kiln.gpu_library = "matmul", kiln.gpu_params = array<i64: 2, 8, 16, 4, 0>}
// CHECK: call @[[MM:kiln_gpu_lib_[0-9]+]](%arg6, %arg7, %arg8) {kiln.gpu_library = "matmul", kiln.gpu_params = array<i64: 1, 8, 16, 4, 0>}
// A strided conv on the top-left corner of a buffer whose last row and column
// it never reads takes the whole buffer; where the corner cuts windows
// (a 3x3 over 6x6 of 8x8, stride 1) it stays linalg.
// CHECK-NOT: memref.subview %arg12
// CHECK: call @kiln_gpu_lib_{{[0-9]+}}(%arg12, %arg13, %arg14) {kiln.gpu_library = "conv2d_nhwc_fhwc", kiln.gpu_params = array<i64: 1, 8, 8, 6, 4, 1, 1, 4, 4, 2, 2, 1, 1, 0>}
// CHECK: linalg.conv_2d_nhwc_fhwc {{.*}} ins(%{{.*}}, %arg16 : memref<1x6x6x6xf32, strided<[384, 48, 6, 1]>>
// FP16 buffers: element type 1; f16 inputs into an f32 accumulator stay linalg.
// CHECK: call @kiln_gpu_lib_{{[0-9]+}}(%arg18, %arg19, %arg20) {kiln.gpu_library = "matmul", kiln.gpu_params = array<i64: 1, 8, 16, 4, 1>}
// CHECK: linalg.batch_matmul ins(%arg18, %arg19 : memref<1x8x4xf16>, memref<1x4x16xf16>) outs(%arg21 : memref<1x8x16xf32>)
// An integer matmul and a matmul on a strided view stay linalg.
// CHECK: linalg.matmul ins(%arg9, %arg10 : memref<8x4xi32>, memref<4x16xi32>)
// CHECK: linalg.matmul ins(%{{.*}}, %arg7 : memref<8x4xf32, strided<[8, 1]>>, memref<4x16xf32>)
// CHECK-DAG: func.func private @[[CONV]](memref<1x11x11x5xf32>, memref<7x3x3x5xf32>, memref<1x5x5x7xf32>)
// CHECK-DAG: func.func private @[[BMM]](memref<2x8x4xf32>, memref<2x4x16xf32>, memref<2x8x16xf32>)

// OFF-NOT: call
// OFF: linalg.conv_2d_nhwc_fhwc
// OFF: linalg.batch_matmul

// MAP-LABEL: func.func @kiln_fn(
// MAP: call @kiln_gpu_lib_{{[0-9]+}}(%arg0, %arg1, %arg2)
// MAP: gpu.launch_func
func.func @kiln_fn(%x: memref<1x11x11x5xf32>, %w: memref<7x3x3x5xf32>, %y: memref<1x5x5x7xf32>,
                   %a: memref<2x8x4xf32>, %b: memref<2x4x16xf32>, %c: memref<2x8x16xf32>,
                   %a2: memref<8x4xf32>, %b2: memref<4x16xf32>, %c2: memref<8x16xf32>,
                   %ia: memref<8x4xi32>, %ib: memref<4x16xi32>, %ic: memref<8x16xi32>,
                   %big: memref<1x8x8x6xf32>, %pw: memref<4x1x1x6xf32>, %py: memref<1x4x4x4xf32>,
                   %wide: memref<8x8xf32>, %w3: memref<4x3x3x6xf32>, %y3: memref<1x4x4x4xf32>,
                   %ha: memref<1x8x4xf16>, %hb: memref<1x4x16xf16>, %hc: memref<1x8x16xf16>, %fc: memref<1x8x16xf32>) {
  linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%x, %w : memref<1x11x11x5xf32>, memref<7x3x3x5xf32>) outs(%y : memref<1x5x5x7xf32>)
  linalg.batch_matmul ins(%a, %b : memref<2x8x4xf32>, memref<2x4x16xf32>) outs(%c : memref<2x8x16xf32>)
  linalg.matmul ins(%a2, %b2 : memref<8x4xf32>, memref<4x16xf32>) outs(%c2 : memref<8x16xf32>)
  %corner = memref.subview %big[0, 0, 0, 0] [1, 7, 7, 6] [1, 1, 1, 1] : memref<1x8x8x6xf32> to memref<1x7x7x6xf32, strided<[384, 48, 6, 1]>>
  linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%corner, %pw : memref<1x7x7x6xf32, strided<[384, 48, 6, 1]>>, memref<4x1x1x6xf32>) outs(%py : memref<1x4x4x4xf32>)
  %cut = memref.subview %big[0, 0, 0, 0] [1, 6, 6, 6] [1, 1, 1, 1] : memref<1x8x8x6xf32> to memref<1x6x6x6xf32, strided<[384, 48, 6, 1]>>
  linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%cut, %w3 : memref<1x6x6x6xf32, strided<[384, 48, 6, 1]>>, memref<4x3x3x6xf32>) outs(%y3 : memref<1x4x4x4xf32>)
  linalg.batch_matmul ins(%ha, %hb : memref<1x8x4xf16>, memref<1x4x16xf16>) outs(%hc : memref<1x8x16xf16>)
  linalg.batch_matmul ins(%ha, %hb : memref<1x8x4xf16>, memref<1x4x16xf16>) outs(%fc : memref<1x8x16xf32>)
  linalg.matmul ins(%ia, %ib : memref<8x4xi32>, memref<4x16xi32>) outs(%ic : memref<8x16xi32>)
  %v = memref.subview %wide[0, 0] [8, 4] [1, 1] : memref<8x8xf32> to memref<8x4xf32, strided<[8, 1]>>
  linalg.matmul ins(%v, %b2 : memref<8x4xf32, strided<[8, 1]>>, memref<4x16xf32>) outs(%c2 : memref<8x16xf32>)
  return
}
