//===- WinogradConv.cpp - 3x3 convs in Winograd form -----------------------===//
//
// kiln-winograd-conv (TOSA, before tosa-to-linalg): a tosa.conv2d whose
// filter is `tosa.custom kiln.winograd_filter` (its stored transform
// U = G g G^T, [a, a, C, F], see lowering/cpu/Winograd.h and HoistConstants)
// becomes, for F(m x m, 3 x 3):
//
//   1. the input padded to whole tiles (the conv's own padding, plus the
//      high side up to a multiple of m), then an scf.forall over rows of
//      tiles whose vector code reads each a x a tile of a vector of
//      channels and writes V = B^T d B, [a*a, tiles, C];
//   2. linalg.batch_matmul V x U -> M [a*a, tiles, F] (kiln-cpu-strategy
//      tiles, packs and vectorizes it like any batched matmul);
//   3. an scf.forall over rows of tiles whose vector code reads the a*a
//      products of a vector of output channels and writes
//      Y = A^T M A + bias, clamped when the conv's only user is a
//      tosa.clamp (ResNet's ReLU), which it replaces.
//
// Vectors run along channels (both C and F in whole vectors of the host's
// widest f32 vector, or of the widest power of two that divides them).
// A filter read the pass cannot fold (vector-bits 0, channels not in whole
// vectors, a conv on a kernel, another user) becomes the exact inverse
// g = P U P^T (P G = I) as a linalg.generic: the direct conv then runs on
// the filter as it was, up to rounding.
//
//===----------------------------------------------------------------------===//
#include "lowering/cpu/CpuStrategy.h"
#include "lowering/cpu/Passes.h"
#include "lowering/cpu/Winograd.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

#include <map>
#include <optional>
#include <tuple>

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNWINOGRADCONV
#include "lowering/cpu/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

bool isWinogradFilter(Operation *op, int &m) {
  auto c = dyn_cast<tosa::CustomOp>(op);
  if (!c || c.getDomainName() != kWinogradDomain || c.getOperatorName() != kWinogradFilterOp) return false;
  llvm::StringRef attrs = c.getImplementationAttrs();
  if (!attrs.consume_front("m=") || attrs.getAsInteger(10, m) || !winograd::matrices(m).a) return false;
  return c.getInputList().size() == 1 && c->getNumResults() == 1;
}

/// Linear combinations of vectors with constant coefficients: zero terms
/// dropped, +-1 as adds and subtracts, others as FMAs on splats.
class Combiner {
public:
  Combiner(OpBuilder &b, Location loc, VectorType type) : b(b), loc(loc), type(type) {}

  Value splat(double c) {
    auto [it, inserted] = splats.try_emplace(c);
    if (inserted) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(anchor);
      it->second = arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, float(c)));
    }
    return it->second;
  }

  /// sum_i coeffs[i] * values[i]
  Value combine(llvm::ArrayRef<double> coeffs, llvm::ArrayRef<Value> values) {
    Value acc;
    for (size_t i = 0; i < coeffs.size(); ++i) {
      double c = coeffs[i];
      if (c == 0) continue;
      Value v = values[i];
      if (!acc) {
        acc = c == 1 ? v : c == -1 ? Value(arith::NegFOp::create(b, loc, v)) : Value(arith::MulFOp::create(b, loc, splat(c), v));
      } else if (c == 1) {
        acc = arith::AddFOp::create(b, loc, acc, v);
      } else if (c == -1) {
        acc = arith::SubFOp::create(b, loc, acc, v);
      } else {
        acc = vector::FMAOp::create(b, loc, splat(c), v, acc);
      }
    }
    return acc ? acc : splat(0);
  }

  /// mat (rows x a) times the a x a grid of vectors (row-major): rows x a.
  SmallVector<Value> leftMultiply(const double *mat, int64_t rows, int64_t a, ArrayRef<Value> grid) {
    SmallVector<Value> out(rows * a);
    for (int64_t k = 0; k < rows; ++k)
      for (int64_t j = 0; j < a; ++j) {
        SmallVector<Value> col;
        for (int64_t i = 0; i < a; ++i) col.push_back(grid[i * a + j]);
        out[k * a + j] = combine(ArrayRef<double>(mat + k * a, a), col);
      }
    return out;
  }

  Block *anchor = nullptr;  // where splat constants go

private:
  OpBuilder &b;
  Location loc;
  VectorType type;
  std::map<double, Value> splats;
};

Value index(OpBuilder &b, Location loc, int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

struct WinogradConv : impl::KilnWinogradConvBase<WinogradConv> {
  using KilnWinogradConvBase::KilnWinogradConvBase;

  void runOnOperation() override {
    SmallVector<std::pair<tosa::CustomOp, int>> reads;
    getOperation().walk([&](tosa::CustomOp op) {
      int m = 0;
      if (isWinogradFilter(op, m)) reads.push_back({op, m});
    });
    for (auto [read, m] : reads) {
      for (OpOperand &use : llvm::make_early_inc_range(read->getResult(0).getUses())) {
        auto conv = dyn_cast<tosa::Conv2DOp>(use.getOwner());
        if (conv && use.getOperandNumber() == 1) (void)rewrite(conv, read.getInputList()[0], m);
      }
      if (read->use_empty())
        read->erase();
      else if (failed(lowerInverse(read, m)))
        return signalPassFailure();
    }
  }

  /// A conv in Winograd form F(m x m, 3 x 3): tiles of a x a input pixels,
  /// m x m output pixels.
  struct Tiles {
    winograd::Matrices mx;
    int64_t m = 0, a = 0, A2 = 0, lanes = 0;
    int64_t N = 0, H = 0, W = 0, C = 0, OH = 0, OW = 0, F = 0;
    int64_t TH = 0, TW = 0, T = 0;  // rows and columns of tiles, tiles
    int64_t HP = 0, WP = 0;         // the input padded to whole tiles
    bool biasPerFilter = false;     // else one bias for every filter
  };

  /// The tiles of `conv` (filter `u` stored as U = G g G^T), or none when it
  /// cannot take the Winograd form (shapes not static f32, strides or
  /// dilations, channels not in vectors of at least 4 lanes).
  std::optional<Tiles> tilesOf(tosa::Conv2DOp conv, Value u, int m) {
    auto in = dyn_cast<RankedTensorType>(conv.getInput().getType());
    auto out = dyn_cast<RankedTensorType>(conv.getType());
    auto uType = dyn_cast<RankedTensorType>(u.getType());
    auto biasType = dyn_cast<RankedTensorType>(conv.getBias().getType());
    Tiles s;
    s.mx = winograd::matrices(m);
    s.m = m;
    const int64_t a = s.a = s.mx.a;
    if (!in || !out || !uType || !biasType || !in.hasStaticShape() || !out.hasStaticShape() ||
        !uType.hasStaticShape() || !biasType.hasStaticShape() || !in.getElementType().isF32() ||
        !out.getElementType().isF32() || biasType.getRank() != 1 || uType.getRank() != 4)
      return std::nullopt;
    if (!llvm::all_of(conv.getStride(), [](int64_t s) { return s == 1; }) ||
        !llvm::all_of(conv.getDilation(), [](int64_t d) { return d == 1; }))
      return std::nullopt;
    s.N = in.getDimSize(0), s.H = in.getDimSize(1), s.W = in.getDimSize(2), s.C = in.getDimSize(3);
    s.OH = out.getDimSize(1), s.OW = out.getDimSize(2), s.F = out.getDimSize(3);
    if (uType.getShape() != ArrayRef<int64_t>{a, a, s.C, s.F} ||
        (biasType.getDimSize(0) != s.F && biasType.getDimSize(0) != 1))
      return std::nullopt;
    s.biasPerFilter = biasType.getDimSize(0) == s.F;
    s.lanes = vectorBits / 32;
    while (s.lanes >= 4 && (s.C % s.lanes || s.F % s.lanes)) s.lanes /= 2;
    if (s.lanes < 4) return std::nullopt;
    ArrayRef<int64_t> pad = conv.getPad();  // top, bottom, left, right
    s.TH = (s.OH + m - 1) / m, s.TW = (s.OW + m - 1) / m, s.T = s.N * s.TH * s.TW, s.A2 = a * a;
    s.HP = s.TH * m + 2, s.WP = s.TW * m + 2;
    if (s.HP - s.H - pad[0] < 0 || s.WP - s.W - pad[2] < 0) return std::nullopt;
    return s;
  }

  /// A forall over rows of tiles (n, tile row): at the start of its body,
  /// the image, the row's first input/output row and its first tile.
  static std::tuple<Value, Value, Value> tileRow(OpBuilder &b, Location loc, Block *body, const Tiles &s) {
    b.setInsertionPointToStart(body);
    Value r = body->getArgument(0);
    Value n = arith::DivUIOp::create(b, loc, r, index(b, loc, s.TH));
    Value h0 = arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, r, index(b, loc, s.TH)), index(b, loc, s.m));
    Value t0 = arith::MulIOp::create(b, loc, r, index(b, loc, s.TW));
    return {n, h0, t0};
  }

  /// 1. Input tiles: padded to whole tiles, transformed (V = B^T d B), as
  /// [a*a, T, C].
  Value inputTiles(OpBuilder &b, Location loc, tosa::Conv2DOp conv, const Tiles &s, Value zero, Value c0) {
    const int64_t m = s.m, a = s.a, A2 = s.A2, N = s.N, H = s.H, W = s.W, C = s.C, TH = s.TH, TW = s.TW, T = s.T;
    const int64_t HP = s.HP, WP = s.WP, lanes = s.lanes;
    const winograd::Matrices &mx = s.mx;
    Type f32 = b.getF32Type();
    auto vec = VectorType::get({lanes}, f32);
    ArrayRef<int64_t> pad = conv.getPad();
    Value x = conv.getInput();
    if (pad[0] || pad[2] || HP - H - pad[0] || WP - W - pad[2]) {
      auto padded = RankedTensorType::get({N, HP, WP, C}, f32);
      SmallVector<OpFoldResult> low = {b.getIndexAttr(0), b.getIndexAttr(pad[0]), b.getIndexAttr(pad[2]),
                                       b.getIndexAttr(0)};
      SmallVector<OpFoldResult> high = {b.getIndexAttr(0), b.getIndexAttr(HP - H - pad[0]),
                                        b.getIndexAttr(WP - W - pad[2]), b.getIndexAttr(0)};
      x = tensor::PadOp::create(b, loc, padded, x, low, high, zero);
    }
    Value vInit = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{A2, T, C}, f32);
    auto inputForall = scf::ForallOp::create(b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(N * TH)},
                                             ValueRange{vInit}, std::nullopt);
    {
      Block *body = inputForall.getBody();
      OpBuilder::InsertionGuard guard(b);
      auto [n, h0, t0] = tileRow(b, loc, body, s);
      Value vOut = body->getArgument(1);
      SmallVector<OpFoldResult> offs = {b.getIndexAttr(0), t0, b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(A2), b.getIndexAttr(TW), b.getIndexAttr(C)};
      SmallVector<OpFoldResult> ones(3, b.getIndexAttr(1));
      Value slice = tensor::ExtractSliceOp::create(b, loc, vOut, offs, sizes, ones);
      Combiner comb(b, loc, vec);
      comb.anchor = body;
      auto rows = scf::ForOp::create(
          b, loc, c0, index(b, loc, TW), index(b, loc, 1), ValueRange{slice},
          [&](OpBuilder &b, Location loc, Value tw, ValueRange acc) {
            Value w0 = arith::MulIOp::create(b, loc, tw, index(b, loc, m));
            auto chans = scf::ForOp::create(
                b, loc, index(b, loc, 0), index(b, loc, C), index(b, loc, lanes), ValueRange{acc[0]},
                [&](OpBuilder &b, Location loc, Value c, ValueRange acc) {
                  SmallVector<Value> d(A2);
                  for (int64_t i = 0; i < a; ++i)
                    for (int64_t j = 0; j < a; ++j) {
                      Value hi = arith::AddIOp::create(b, loc, h0, index(b, loc, i));
                      Value wj = arith::AddIOp::create(b, loc, w0, index(b, loc, j));
                      d[i * a + j] = vector::TransferReadOp::create(b, loc, vec, x, ValueRange{n, hi, wj, c}, zero,
                                                                    ArrayRef<bool>{true});
                    }
                  // t = B^T d (rows), then V = t B (columns).
                  SmallVector<Value> t = comb.leftMultiply(mx.bt, a, a, d);
                  Value dest = acc[0];
                  for (int64_t k = 0; k < a; ++k)
                    for (int64_t l = 0; l < a; ++l) {
                      Value v = comb.combine(ArrayRef<double>(mx.bt + l * a, a), ArrayRef<Value>(t).slice(k * a, a));
                      dest = vector::TransferWriteOp::create(b, loc, v, dest,
                                                             ValueRange{index(b, loc, k * a + l), tw, c},
                                                             ArrayRef<bool>{true})
                                 ->getResult(0);
                    }
                  scf::YieldOp::create(b, loc, dest);
                });
            scf::YieldOp::create(b, loc, chans->getResults());
          });
      b.setInsertionPointToEnd(inputForall.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(b, loc, rows->getResult(0), vOut, offs, sizes, ones);
    }

    return inputForall.getResult(0);
  }

  /// 3. Output tiles: the products transformed back (Y = A^T M A), the bias
  /// added and `clamp` (if any) applied, as [N, TH*m, TW*m, F].
  Value outputTiles(OpBuilder &b, Location loc, tosa::Conv2DOp conv, tosa::ClampOp clamp, Value prod, const Tiles &s,
                    Value zero, Value c0) {
    const int64_t m = s.m, a = s.a, A2 = s.A2, N = s.N, F = s.F, TH = s.TH, TW = s.TW, lanes = s.lanes;
    const winograd::Matrices &mx = s.mx;
    Type f32 = b.getF32Type();
    auto vec = VectorType::get({lanes}, f32);
    auto yType = RankedTensorType::get({N, TH * m, TW * m, F}, f32);
    Value yInit = tensor::EmptyOp::create(b, loc, yType.getShape(), f32);
    auto outputForall = scf::ForallOp::create(b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(N * TH)},
                                              ValueRange{yInit}, std::nullopt);
    {
      Block *body = outputForall.getBody();
      OpBuilder::InsertionGuard guard(b);
      auto [n, h0, t0] = tileRow(b, loc, body, s);
      Value yOut = body->getArgument(1);
      SmallVector<OpFoldResult> offs = {n, h0, b.getIndexAttr(0), b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(m), b.getIndexAttr(TW * m),
                                         b.getIndexAttr(F)};
      SmallVector<OpFoldResult> ones(4, b.getIndexAttr(1));
      Value slice = tensor::ExtractSliceOp::create(b, loc, yOut, offs, sizes, ones);
      Combiner comb(b, loc, vec);
      comb.anchor = body;
      Value bias = conv.getBias();
      Value minV, maxV;
      if (clamp) {
        minV = comb.splat(cast<FloatAttr>(clamp.getMinValAttr()).getValueAsDouble());
        maxV = comb.splat(cast<FloatAttr>(clamp.getMaxValAttr()).getValueAsDouble());
      }
      bool propagateNan = !clamp || clamp.getNanMode() == tosa::NanPropagationMode::PROPAGATE;
      auto rows = scf::ForOp::create(
          b, loc, c0, index(b, loc, TW), index(b, loc, 1), ValueRange{slice},
          [&](OpBuilder &b, Location loc, Value tw, ValueRange acc) {
            Value t = arith::AddIOp::create(b, loc, t0, tw);
            Value w0 = arith::MulIOp::create(b, loc, tw, index(b, loc, m));
            auto chans = scf::ForOp::create(
                b, loc, index(b, loc, 0), index(b, loc, F), index(b, loc, lanes), ValueRange{acc[0]},
                [&](OpBuilder &b, Location loc, Value f, ValueRange acc) {
                  Value bv;
                  if (s.biasPerFilter) {
                    bv = vector::TransferReadOp::create(b, loc, vec, bias, ValueRange{f}, zero, ArrayRef<bool>{true});
                  } else {
                    Value s = tensor::ExtractOp::create(b, loc, bias, ValueRange{index(b, loc, 0)});
                    bv = vector::BroadcastOp::create(b, loc, vec, s);
                  }
                  SmallVector<Value> p(A2);
                  for (int64_t k = 0; k < A2; ++k)
                    p[k] = vector::TransferReadOp::create(b, loc, vec, prod, ValueRange{index(b, loc, k), t, f}, zero,
                                                          ArrayRef<bool>{true});
                  // s = A^T M (rows), then Y = s A (columns).
                  SmallVector<Value> s = comb.leftMultiply(mx.at, m, a, p);
                  Value dest = acc[0];
                  for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = 0; j < m; ++j) {
                      Value y = comb.combine(ArrayRef<double>(mx.at + j * a, a), ArrayRef<Value>(s).slice(i * a, a));
                      y = arith::AddFOp::create(b, loc, y, bv);
                      if (clamp) {
                        if (propagateNan) {
                          y = arith::MaximumFOp::create(b, loc, y, minV);
                          y = arith::MinimumFOp::create(b, loc, y, maxV);
                        } else {
                          y = arith::MaxNumFOp::create(b, loc, y, minV);
                          y = arith::MinNumFOp::create(b, loc, y, maxV);
                        }
                      }
                      Value wj = arith::AddIOp::create(b, loc, w0, index(b, loc, j));
                      dest = vector::TransferWriteOp::create(b, loc, y, dest,
                                                             ValueRange{index(b, loc, 0), index(b, loc, i), wj, f},
                                                             ArrayRef<bool>{true})
                                 ->getResult(0);
                    }
                  scf::YieldOp::create(b, loc, dest);
                });
            scf::YieldOp::create(b, loc, chans->getResults());
          });
      b.setInsertionPointToEnd(outputForall.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(b, loc, rows->getResult(0), yOut, offs, sizes, ones);
    }
    return outputForall.getResult(0);
  }

  /// The conv in Winograd form, or failure (it stays a conv).
  LogicalResult rewrite(tosa::Conv2DOp conv, Value u, int m) {
    std::optional<Tiles> tiles = tilesOf(conv, u, m);
    if (!tiles) return failure();
    const Tiles &s = *tiles;
    auto out = cast<RankedTensorType>(conv.getType());

    // Fold a following ReLU-like clamp.
    tosa::ClampOp clamp;
    if (conv->hasOneUse())
      if (auto c = dyn_cast<tosa::ClampOp>(*conv->getUsers().begin());
          c && c.getType() == out && isa<FloatAttr>(c.getMinValAttr()) && isa<FloatAttr>(c.getMaxValAttr()))
        clamp = c;

    OpBuilder b(conv);
    Location loc = conv.getLoc();
    Type f32 = b.getF32Type();
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    Value c0 = index(b, loc, 0);
    Value v = inputTiles(b, loc, conv, s, zero, c0);

    // 2. The a*a products: [a*a, T, C] x [a*a, C, F].
    Value u3 = tensor::CollapseShapeOp::create(b, loc, u, SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
    auto mType = RankedTensorType::get({s.A2, s.T, s.F}, f32);
    Value mInit = linalg::FillOp::create(b, loc, zero, tensor::EmptyOp::create(b, loc, mType.getShape(), f32).getResult())
                      .getResult(0);
    auto products = linalg::BatchMatmulOp::create(b, loc, TypeRange{mType}, ValueRange{v, u3}, ValueRange{mInit});
    products->setAttr(kWinogradAttr, b.getI64IntegerAttr(m));
    Value prod = products.getResult(0);

    Value y = outputTiles(b, loc, conv, clamp, prod, s, zero, c0);
    if (cast<RankedTensorType>(y.getType()) != out) {
      SmallVector<OpFoldResult> zeros(4, b.getIndexAttr(0)), ones(4, b.getIndexAttr(1));
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(s.N), b.getIndexAttr(s.OH), b.getIndexAttr(s.OW),
                                         b.getIndexAttr(s.F)};
      y = tensor::ExtractSliceOp::create(b, loc, out, y, zeros, sizes, ones);
    }
    if (clamp) {
      clamp->replaceAllUsesWith(ValueRange{y});
      clamp->erase();
    }
    conv->replaceAllUsesWith(ValueRange{y});
    conv->erase();
    return success();
  }

  /// The filter read as g = P U P^T: [F, 3, 3, C] from [a, a, C, F].
  LogicalResult lowerInverse(tosa::CustomOp read, int m) {
    auto type = dyn_cast<RankedTensorType>(read->getResult(0).getType());
    Value u = read.getInputList()[0];
    auto uType = dyn_cast<RankedTensorType>(u.getType());
    const int64_t a = winograd::matrices(m).a;
    if (!type || !uType || !type.getElementType().isF32() || type.getRank() != 4 || uType.getRank() != 4 ||
        uType.getDimSize(0) != a || uType.getDimSize(1) != a || type.getDimSize(1) != 3 || type.getDimSize(2) != 3)
      return read.emitError("kiln-winograd-conv: a winograd_filter read of ")
             << u.getType() << " as " << read->getResult(0).getType() << " is malformed";
    OpBuilder b(read);
    Location loc = read.getLoc();
    std::vector<double> p = winograd::filterInverse(m);
    auto pType = RankedTensorType::get({3, a}, b.getF32Type());
    SmallVector<float> pf(p.begin(), p.end());
    Value pc = arith::ConstantOp::create(b, loc, DenseElementsAttr::get(pType, ArrayRef<float>(pf)));
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    Value init =
        linalg::FillOp::create(b, loc, zero, tensor::EmptyOp::create(b, loc, type.getShape(), b.getF32Type()).getResult())
            .getResult(0);
    // Loops: f, kh, kw, c, x, y.
    MLIRContext *ctx = b.getContext();
    auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    SmallVector<AffineMap> maps = {AffineMap::get(6, 0, {d(4), d(5), d(3), d(0)}, ctx),
                                   AffineMap::get(6, 0, {d(1), d(4)}, ctx), AffineMap::get(6, 0, {d(2), d(5)}, ctx),
                                   AffineMap::get(6, 0, {d(0), d(1), d(2), d(3)}, ctx)};
    SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
    iters.append(2, utils::IteratorType::reduction);
    auto g = linalg::GenericOp::create(b, loc, TypeRange{type}, ValueRange{u, pc, pc}, ValueRange{init}, maps, iters,
                                       [](OpBuilder &b, Location loc, ValueRange args) {
                                         Value w = arith::MulFOp::create(b, loc, args[1], args[2]);
                                         Value v = arith::MulFOp::create(b, loc, args[0], w);
                                         linalg::YieldOp::create(b, loc, ValueRange{arith::AddFOp::create(b, loc, args[3], v)});
                                       });
    read->replaceAllUsesWith(g->getResults());
    read->erase();
    return success();
  }
};

}  // namespace
}  // namespace kiln::lowering
