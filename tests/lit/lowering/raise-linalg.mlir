// RUN: %kiln-opt %s --split-input-file --kiln-raise-linalg | FileCheck %s
// RUN: env KILN_RAISE_LINALG=0 %kiln-opt %s --split-input-file --kiln-raise-linalg | FileCheck %s --check-prefix=OFF

// torch-mlir's linalg export of conv(bias) -> batch norm -> relu6 in NCHW:
// the zero pad becomes the conv's padding, the broadcast init its bias,
// the body's compare + select pairs one clamp, the per-channel constants
// (read through (d1, 0, 0)) reshapes to 1xCx1x1.
// CHECK-LABEL: func.func @conv_bn_relu6
// CHECK-NOT: linalg.
// CHECK-NOT: tensor.
// CHECK: %[[X:.*]] = tosa.transpose %arg0 {perms = array<i32: 0, 2, 3, 1>}
// CHECK: %[[W:.*]] = tosa.transpose %{{.*}} {perms = array<i32: 0, 2, 3, 1>} : (tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf32>
// CHECK: %[[C:.*]] = tosa.conv2d %[[X]], %[[W]], %[[BIAS:[^,]*]], {{.*}}pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>
// CHECK: %[[Y:.*]] = tosa.transpose %[[C]] {perms = array<i32: 0, 3, 1, 2>} : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
// CHECK: tosa.rsqrt
// CHECK: tosa.sub %[[Y]]
// CHECK: tosa.mul
// CHECK: %[[R:.*]] = tosa.clamp %{{.*}} {max_val = 6.000000e+00 : f32, min_val = 0.000000e+00 : f32}
// CHECK: return %[[R]]
// OFF-LABEL: func.func @conv_bn_relu6
// OFF: linalg.conv_2d_nchw_fchw
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#ch = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
#v = affine_map<(d0) -> (d0)>
func.func @conv_bn_relu6(%x: tensor<1x3x16x16xf32>) -> tensor<1x8x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %eps = arith.constant 1.0e-5 : f64
  %w = arith.constant dense<0.5> : tensor<8x3x3x3xf32>
  %b = arith.constant dense<0.25> : tensor<8xf32>
  %var = arith.constant dense<4.0> : tensor<8xf32>
  %mean = arith.constant dense<1.0> : tensor<8xf32>
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x3x16x16xf32> to tensor<1x3x18x18xf32>
  %e = tensor.empty() : tensor<1x8x8x8xf32>
  %bb = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<1x8x8x8xf32>) dimensions = [0, 2, 3]
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
         ins(%p, %w : tensor<1x3x18x18xf32>, tensor<8x3x3x3xf32>) outs(%bb : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]} ins(%var : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %eps : f64 to f32
    %a = arith.addf %in, %t : f32
    %s = math.rsqrt %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %r3 = tensor.expand_shape %r [[0, 1, 2]] output_shape [8, 1, 1] : tensor<8xf32> into tensor<8x1x1xf32>
  %m3 = tensor.expand_shape %mean [[0, 1, 2]] output_shape [8, 1, 1] : tensor<8xf32> into tensor<8x1x1xf32>
  %y = linalg.generic {indexing_maps = [#id4, #ch, #ch, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
         ins(%c, %m3, %r3 : tensor<1x8x8x8xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>) outs(%e : tensor<1x8x8x8xf32>) {
  ^bb0(%in: f32, %m: f32, %s: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    %n = arith.mulf %d, %s : f32
    %lt = arith.cmpf ult, %n, %zero : f32
    %lo = arith.select %lt, %zero, %n : f32
    %gt = arith.cmpf ugt, %lo, %six : f32
    %hi = arith.select %gt, %six, %lo : f32
    linalg.yield %hi : f32
  } -> tensor<1x8x8x8xf32>
  return %y : tensor<1x8x8x8xf32>
}

// -----

// A max pool padded with -inf (ceil mode: the last window's row is not
// there) and a global average pool as a sum over H, W with keepdims (a
// reduction generic whose output map has constant 0s), then / 16.
// CHECK-LABEL: func.func @pools
// CHECK-NOT: linalg.
// CHECK: tosa.max_pool2d %{{.*}} {kernel = array<i64: 3, 3>, pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>}
// CHECK: %[[S:.*]] = tosa.reduce_sum %{{.*}} {axis = 2 : i32}
// CHECK: tosa.reduce_sum %[[S]] {axis = 3 : i32}
// CHECK: tosa.reciprocal
// CHECK: tosa.mul
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#keep = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>
func.func @pools(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x1x1xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 1.6e+01 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %ninf : f32
  } : tensor<1x4x8x8xf32> to tensor<1x4x10x10xf32>
  %e = tensor.empty() : tensor<1x4x4x4xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %win = tensor.empty() : tensor<3x3xf32>
  %m = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
         ins(%p, %win : tensor<1x4x10x10xf32>, tensor<3x3xf32>) outs(%f : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %e1 = tensor.empty() : tensor<1x4x1x1xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x4x1x1xf32>) -> tensor<1x4x1x1xf32>
  %s = linalg.generic {indexing_maps = [#id4, #keep], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
         ins(%m : tensor<1x4x4x4xf32>) outs(%f1 : tensor<1x4x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<1x4x1x1xf32>
  %d = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
         ins(%s : tensor<1x4x1x1xf32>) outs(%e1 : tensor<1x4x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %q = arith.divf %in, %n : f32
    linalg.yield %q : f32
  } -> tensor<1x4x1x1xf32>
  return %d : tensor<1x4x1x1xf32>
}

// -----

// Softmax as torch-mlir writes it: max with an argmax nobody reads (the
// max is raised; the argmax's index arithmetic would not be), exp of the
// difference, sum, divide; and a linear layer (transpose of the weight,
// matmul into a zero fill, bias add).
// CHECK-LABEL: func.func @linear_softmax
// CHECK-NOT: linalg.
// CHECK: tosa.transpose %{{.*}} {perms = array<i32: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
// CHECK: tosa.matmul {{.*}} -> tensor<1x2x6xf32>
// CHECK: tosa.add
// CHECK: tosa.reduce_max %{{.*}} {axis = 1 : i32}
// CHECK: tosa.exp
// CHECK: tosa.reduce_sum %{{.*}} {axis = 1 : i32}
#mk = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @linear_softmax(%x: tensor<2x4xf32>) -> tensor<2x6xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %w = arith.constant dense<0.5> : tensor<6x4xf32>
  %b = arith.constant dense<0.25> : tensor<6xf32>
  %et = tensor.empty() : tensor<4x6xf32>
  %wt = linalg.transpose ins(%w : tensor<6x4xf32>) outs(%et : tensor<4x6xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<2x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x6xf32>) -> tensor<2x6xf32>
  %mm = linalg.matmul ins(%x, %wt : tensor<2x4xf32>, tensor<4x6xf32>) outs(%f : tensor<2x6xf32>) -> tensor<2x6xf32>
  %y = linalg.generic {indexing_maps = [#mk, #col, #mk], iterator_types = ["parallel", "parallel"]}
         ins(%mm, %b : tensor<2x6xf32>, tensor<6xf32>) outs(%e : tensor<2x6xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %a = arith.addf %in, %bias : f32
    linalg.yield %a : f32
  } -> tensor<2x6xf32>
  %em = tensor.empty() : tensor<2xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<2xf32>) -> tensor<2xf32>
  %ei = tensor.empty() : tensor<2xi64>
  %c0 = arith.constant 0 : i64
  %fi = linalg.fill ins(%c0 : i64) outs(%ei : tensor<2xi64>) -> tensor<2xi64>
  %mx:2 = linalg.generic {indexing_maps = [#mk, #row, #row], iterator_types = ["parallel", "reduction"]}
            ins(%y : tensor<2x6xf32>) outs(%fm, %fi : tensor<2xf32>, tensor<2xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %gt, %ii, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2xf32>, tensor<2xi64>)
  %ex = linalg.generic {indexing_maps = [#mk, #row, #mk], iterator_types = ["parallel", "parallel"]}
          ins(%y, %mx#0 : tensor<2x6xf32>, tensor<2xf32>) outs(%e : tensor<2x6xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    %x2 = math.exp %d : f32
    linalg.yield %x2 : f32
  } -> tensor<2x6xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%em : tensor<2xf32>) -> tensor<2xf32>
  %sum = linalg.generic {indexing_maps = [#mk, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ex : tensor<2x6xf32>) outs(%fs : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<2xf32>
  %sm = linalg.generic {indexing_maps = [#mk, #row, #mk], iterator_types = ["parallel", "parallel"]}
          ins(%ex, %sum : tensor<2x6xf32>, tensor<2xf32>) outs(%e : tensor<2x6xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %q = arith.divf %in, %s : f32
    linalg.yield %q : f32
  } -> tensor<2x6xf32>
  return %sm : tensor<2x6xf32>
}

// -----

// What TOSA cannot say stays linalg, in place: a generic that reads the
// loop index; its neighbours are raised around it.
// CHECK-LABEL: func.func @mixed
// CHECK: tosa.exp
// CHECK: linalg.generic
// CHECK: linalg.index
// CHECK: tosa.add
#m1 = affine_map<(d0) -> (d0)>
func.func @mixed(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %a = linalg.generic {indexing_maps = [#m1, #m1], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<8xf32>
  %i = linalg.generic {indexing_maps = [#m1, #m1], iterator_types = ["parallel"]} ins(%a : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %k = linalg.index 0 : index
    %ki = arith.index_cast %k : index to i64
    %kf = arith.sitofp %ki : i64 to f32
    %y = arith.addf %in, %kf : f32
    linalg.yield %y : f32
  } -> tensor<8xf32>
  %s = linalg.generic {indexing_maps = [#m1, #m1, #m1], iterator_types = ["parallel"]} ins(%i, %a : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %y = arith.addf %in, %in2 : f32
    linalg.yield %y : f32
  } -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

// torch-mlir computes LayerNorm's mean in f64 (so does its TOSA export):
// the casts become tosa.cast and the f64 ops stay f64. A masked softmax's
// "is the whole row -inf" check reduces booleans: tosa.reduce_all.
// CHECK-LABEL: func.func @f64_mean_and_masks
// CHECK-NOT: linalg.
// CHECK: tosa.cast %arg0 : (tensor<2x8xf32>) -> tensor<2x8xf64>
// CHECK: tosa.reduce_sum %{{.*}} {axis = 1 : i32} : (tensor<2x8xf64>) -> tensor<2x1xf64>
// CHECK: tosa.cast %{{.*}} : (tensor<2x1xf64>) -> tensor<2x1xf32>
// CHECK: tosa.equal
// CHECK: tosa.reduce_all %{{.*}} {axis = 1 : i32} : (tensor<2x8xi1>) -> tensor<2x1xi1>
#mk = affine_map<(d0, d1) -> (d0, d1)>
#r1 = affine_map<(d0, d1) -> (d0, 0)>
func.func @f64_mean_and_masks(%x: tensor<2x8xf32>) -> (tensor<2x1xf32>, tensor<2x1xi1>) {
  %z = arith.constant 0.0 : f64
  %n = arith.constant 8.0 : f64
  %ninf = arith.constant 0xFFF0000000000000 : f64
  %true = arith.constant true
  %e64 = tensor.empty() : tensor<2x8xf64>
  %x64 = linalg.generic {indexing_maps = [#mk, #mk], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x8xf32>) outs(%e64 : tensor<2x8xf64>) {
  ^bb0(%in: f32, %out: f64):
    %w = arith.extf %in : f32 to f64
    linalg.yield %w : f64
  } -> tensor<2x8xf64>
  %es = tensor.empty() : tensor<2x1xf64>
  %fs = linalg.fill ins(%z : f64) outs(%es : tensor<2x1xf64>) -> tensor<2x1xf64>
  %s = linalg.generic {indexing_maps = [#mk, #r1], iterator_types = ["parallel", "reduction"]} ins(%x64 : tensor<2x8xf64>) outs(%fs : tensor<2x1xf64>) {
  ^bb0(%in: f64, %out: f64):
    %a = arith.addf %in, %out : f64
    linalg.yield %a : f64
  } -> tensor<2x1xf64>
  %e32 = tensor.empty() : tensor<2x1xf32>
  %m = linalg.generic {indexing_maps = [#mk, #mk], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<2x1xf64>) outs(%e32 : tensor<2x1xf32>) {
  ^bb0(%in: f64, %out: f32):
    %d = arith.divf %in, %n : f64
    %t = arith.truncf %d : f64 to f32
    linalg.yield %t : f32
  } -> tensor<2x1xf32>
  %eb = tensor.empty() : tensor<2x8xi1>
  %isinf = linalg.generic {indexing_maps = [#mk, #mk], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x8xf32>) outs(%eb : tensor<2x8xi1>) {
  ^bb0(%in: f32, %out: i1):
    %w = arith.extf %in : f32 to f64
    %c = arith.cmpf oeq, %w, %ninf : f64
    linalg.yield %c : i1
  } -> tensor<2x8xi1>
  %er = tensor.empty() : tensor<2x1xi1>
  %fr = linalg.fill ins(%true : i1) outs(%er : tensor<2x1xi1>) -> tensor<2x1xi1>
  %all = linalg.generic {indexing_maps = [#mk, #r1], iterator_types = ["parallel", "reduction"]} ins(%isinf : tensor<2x8xi1>) outs(%fr : tensor<2x1xi1>) {
  ^bb0(%in: i1, %out: i1):
    %a = arith.andi %in, %out : i1
    linalg.yield %a : i1
  } -> tensor<2x1xi1>
  return %m, %all : tensor<2x1xf32>, tensor<2x1xi1>
}

// -----

// A grouped conv (TOSA has none) becomes kiln's NHWC grouped conv op
// (tosa.custom kiln.grouped_conv2d) between the layout transposes, its
// filter GFHWC, its zero pad a tosa.pad.
// CHECK-LABEL: func.func @grouped
// CHECK: %[[X:.*]] = tosa.transpose %arg0 {perms = array<i32: 0, 2, 3, 1>}
// CHECK: %[[P:.*]] = tosa.pad %[[X]]
// CHECK: %[[X5:.*]] = tosa.reshape %[[P]], %{{.*}} -> tensor<1x10x10x2x4xf32>
// CHECK: %[[W:.*]] = tosa.transpose %{{.*}} {perms = array<i32: 0, 1, 3, 4, 2>} : (tensor<2x4x4x3x3xf32>) -> tensor<2x4x3x3x4xf32>
// CHECK: tosa.custom %[[X5]], %[[W]] {dilation = array<i64: 1, 1>, domain_name = "kiln", implementation_attrs = "", operator_name = "grouped_conv2d", stride = array<i64: 1, 1>} : (tensor<1x10x10x2x4xf32>, tensor<2x4x3x3x4xf32>) -> tensor<1x8x8x2x4xf32>
// CHECK: tosa.transpose %{{.*}} {perms = array<i32: 0, 3, 1, 2>}
// CHECK-NOT: linalg.conv_2d_ngchw_gfchw
func.func @grouped(%x: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<8x4x3x3xf32>
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x8x8x8xf32> to tensor<1x8x10x10xf32>
  %x5 = tensor.expand_shape %p [[0], [1, 2], [3], [4]] output_shape [1, 2, 4, 10, 10] : tensor<1x8x10x10xf32> into tensor<1x2x4x10x10xf32>
  %w5 = tensor.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [2, 4, 4, 3, 3] : tensor<8x4x3x3xf32> into tensor<2x4x4x3x3xf32>
  %e = tensor.empty() : tensor<1x2x4x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x4x8x8xf32>) -> tensor<1x2x4x8x8xf32>
  %y = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
         ins(%x5, %w5 : tensor<1x2x4x10x10xf32>, tensor<2x4x4x3x3xf32>) outs(%f : tensor<1x2x4x8x8xf32>) -> tensor<1x2x4x8x8xf32>
  %c = tensor.collapse_shape %y [[0], [1, 2], [3], [4]] : tensor<1x2x4x8x8xf32> into tensor<1x8x8x8xf32>
  return %c : tensor<1x8x8x8xf32>
}

// -----

// What torch-mlir's linalg export of a model with a dynamic sequence length
// leaves once kiln-specialize-shapes made every shape static: a reshape to
// a constant shape between casts to and from dynamic types, and a
// broadcast written as a generic that extracts from a captured tensor.
// CHECK-LABEL: func.func @dynamic_export_leftovers
// CHECK-NOT: linalg.
// CHECK-NOT: tensor.
// CHECK: %[[R:.*]] = tosa.reshape %arg0, %{{.*}} : (tensor<1x5x8xf32>, !tosa.shape<4>) -> tensor<1x5x2x4xf32>
// CHECK: %[[T:.*]] = tosa.tile %arg1, %{{.*}} : (tensor<1x5x1xf32>, !tosa.shape<3>) -> tensor<1x5x8xf32>
// CHECK: return %[[R]], %[[T]]
// A loop index out of order (a transpose) or a gather of columns (the
// data's index in the second place) stays as it was.
// CHECK-LABEL: func.func @extracts_that_stay
// CHECK-COUNT-2: tensor.extract
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @dynamic_export_leftovers(%x: tensor<1x5x8xf32>, %s: tensor<1x5x1xf32>) -> (tensor<1x5x2x4xf32>, tensor<1x5x8xf32>) {
  %shape = arith.constant dense<[1, 5, 2, 4]> : tensor<4xi64>
  %c = tensor.cast %x : tensor<1x5x8xf32> to tensor<1x?x8xf32>
  %r = tensor.reshape %c(%shape) : (tensor<1x?x8xf32>, tensor<4xi64>) -> tensor<1x?x?x4xf32>
  %rc = tensor.cast %r : tensor<1x?x?x4xf32> to tensor<1x5x2x4xf32>
  %c0 = arith.constant 0 : index
  %e = tensor.empty() : tensor<1x5x8xf32>
  %b = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]} outs(%e : tensor<1x5x8xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 1 : index
    %v = tensor.extract %s[%c0, %i, %c0] : tensor<1x5x1xf32>
    linalg.yield %v : f32
  } -> tensor<1x5x8xf32>
  return %rc, %b : tensor<1x5x2x4xf32>, tensor<1x5x8xf32>
}
func.func @extracts_that_stay(%s: tensor<4x4xf32>, %ids: tensor<4xi64>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x4xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = tensor.extract %s[%j, %i] : tensor<4x4xf32>
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<4xi64>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%id: i64, %out: f32):
    %k = arith.index_cast %id : i64 to index
    %j = linalg.index 1 : index
    %v = tensor.extract %s[%j, %k] : tensor<4x4xf32>
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  return %t, %g : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// The index arithmetic of a transformer's embeddings as torch-mlir's linalg
// export writes it (ONNX Gather: a negative id counts from the end): the
// ids' i64 compare/add/select, positions from the loop index, the rows of
// the embedding table gathered, a mask's 0-d fill read by a generic.
// CHECK-LABEL: func.func @embedding
// CHECK-NOT: linalg.
// CHECK-NOT: tensor.
// CHECK: %[[NEG:.*]] = tosa.greater %{{.*}}, %arg0 : (tensor<1x1xi64>, tensor<1x5xi64>) -> tensor<1x5xi1>
// CHECK: %[[WRAP:.*]] = tosa.add %arg0, %{{.*}} : (tensor<1x5xi64>, tensor<1x1xi64>) -> tensor<1x5xi64>
// CHECK: tosa.select %[[NEG]], %[[WRAP]], %arg0
// CHECK: tosa.cast %{{.*}} : (tensor<5xi64>) -> tensor<5xi32>
// CHECK: %[[ROWS:.*]] = tosa.gather %{{.*}}, %{{.*}} : (tensor<1x10x4xf32>, tensor<1x5xi32>) -> tensor<1x5x4xf32>
// CHECK: %[[EMB:.*]] = tosa.reshape %[[ROWS]]
// CHECK: %[[POS:.*]] = "tosa.const"() <{values = dense<{{\[\[}}0, 1, 2, 3, 4]]> : tensor<1x5xi64>}>
// CHECK: tosa.equal %arg2
// CHECK: %[[M:.*]] = tosa.logical_not
// CHECK: return %[[EMB]], %[[POS]], %[[M]]
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#map2 = affine_map<(d0, d1) -> (d0)>
#map0 = affine_map<(d0, d1) -> ()>
func.func @embedding(%ids: tensor<1x5xi64>, %table: tensor<10x4xf32>, %mask: tensor<1x5xi64>) -> (tensor<5x4xf32>, tensor<1x5xi64>, tensor<1x5xi1>) {
  %c0 = arith.constant 0 : i64
  %c10 = arith.constant 10 : i64
  %c7 = arith.constant 7 : i64
  %e = tensor.empty() : tensor<1x5xi64>
  %eb = tensor.empty() : tensor<1x5xi1>
  %neg = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<1x5xi64>) outs(%eb : tensor<1x5xi1>) {
  ^bb0(%in: i64, %out: i1):
    %r = arith.cmpi slt, %in, %c0 : i64
    linalg.yield %r : i1
  } -> tensor<1x5xi1>
  %wrap = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<1x5xi64>) outs(%e : tensor<1x5xi64>) {
  ^bb0(%in: i64, %out: i64):
    %r = arith.addi %in, %c10 : i64
    linalg.yield %r : i64
  } -> tensor<1x5xi64>
  %id = linalg.generic {indexing_maps = [#map1, #map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%neg, %wrap, %ids : tensor<1x5xi1>, tensor<1x5xi64>, tensor<1x5xi64>) outs(%e : tensor<1x5xi64>) {
  ^bb0(%n: i1, %w: i64, %i: i64, %out: i64):
    %r = arith.select %n, %w, %i : i64
    linalg.yield %r : i64
  } -> tensor<1x5xi64>
  %flat = tensor.collapse_shape %id [[0, 1]] : tensor<1x5xi64> into tensor<5xi64>
  %rows = tensor.empty() : tensor<5x4xf32>
  %emb = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%flat : tensor<5xi64>) outs(%rows : tensor<5x4xf32>) {
  ^bb0(%in: i64, %out: f32):
    %k = arith.index_cast %in : i64 to index
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%k, %j] : tensor<10x4xf32>
    linalg.yield %v : f32
  } -> tensor<5x4xf32>
  %pos = linalg.generic {indexing_maps = [#map1], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<1x5xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 1 : index
    %v = arith.index_cast %i : index to i64
    linalg.yield %v : i64
  } -> tensor<1x5xi64>
  %s = tensor.empty() : tensor<i64>
  %seven = linalg.fill ins(%c7 : i64) outs(%s : tensor<i64>) -> tensor<i64>
  %m = linalg.generic {indexing_maps = [#map1, #map0, #map1], iterator_types = ["parallel", "parallel"]} ins(%mask, %seven : tensor<1x5xi64>, tensor<i64>) outs(%eb : tensor<1x5xi1>) {
  ^bb0(%in: i64, %k: i64, %out: i1):
    %r = arith.cmpi ne, %in, %k : i64
    linalg.yield %r : i1
  } -> tensor<1x5xi1>
  return %emb, %pos, %m : tensor<5x4xf32>, tensor<1x5xi64>, tensor<1x5xi1>
}
