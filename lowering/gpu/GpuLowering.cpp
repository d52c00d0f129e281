// readGpuLowering: the launch plan and the device module read off a
// cluster after the GPU pipeline (see GpuLowering.h).
#include "lowering/gpu/GpuLowering.h"
#include "lowering/gpu/Passes.h"
#include "lowering/ir/IRText.h"
#include "runtime/Clock.h"
#include "runtime/Error.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace kiln::lowering {
namespace {

/// Bytes of one element in device memory (i1 takes a byte).
std::optional<uint64_t> elementBytes(Type t) {
  if (t.isIndex()) return 8;
  if (t.isIntOrFloat()) return std::max<uint64_t>(1, (t.getIntOrFloatBitWidth() + 7) / 8);
  return std::nullopt;
}

/// Bytes of a static identity-layout memref.
std::optional<uint64_t> bufferBytes(Type type) {
  auto m = dyn_cast<MemRefType>(type);
  if (!m || !m.hasStaticShape() || !m.getLayout().isIdentity()) return std::nullopt;
  auto eb = elementBytes(m.getElementType());
  if (!eb) return std::nullopt;
  uint64_t n = *eb;
  for (int64_t d : m.getShape())
    if (__builtin_mul_overflow(n, uint64_t(d), &n)) return std::nullopt;
  return n;
}

/// The contents of a constant memref.global, as device bytes.
std::optional<std::vector<char>> globalBytes(memref::GlobalOp global) {
  auto init = dyn_cast_or_null<DenseElementsAttr>(global.getInitialValueAttr());
  auto bytes = bufferBytes(global.getType());
  if (!init || !bytes) return std::nullopt;
  std::vector<char> out(*bytes);
  Type et = init.getElementType();
  uint64_t eb = *elementBytes(et);
  int64_t i = 0;
  if (et.isInteger(1)) {
    for (bool v : init.getValues<bool>()) out[size_t(i++)] = v ? 1 : 0;
  } else if (init.isSplat()) {
    llvm::ArrayRef<char> raw = init.getRawData();
    if (raw.size() < eb) return std::nullopt;
    for (uint64_t off = 0; off < *bytes; off += eb) std::memcpy(out.data() + off, raw.data(), eb);
  } else {
    llvm::ArrayRef<char> raw = init.getRawData();
    if (raw.size() != *bytes) return std::nullopt;
    std::memcpy(out.data(), raw.data(), raw.size());
  }
  return out;
}

/// A kernel scalar parameter from a constant.
std::optional<GpuKernelArg> scalarArg(Value v) {
  GpuKernelArg a;
  a.kind = GpuKernelArg::Kind::kScalar;
  APInt i;
  APFloat f(0.0f);
  if (matchPattern(v, m_ConstantInt(&i))) {
    auto eb = elementBytes(v.getType());
    if (!eb || *eb > 8) return std::nullopt;
    a.bytes = uint8_t(*eb);
    a.bits = i.sextOrTrunc(64).getZExtValue();
  } else if (matchPattern(v, m_ConstantFloat(&f))) {
    APInt bitsOf = f.bitcastToAPInt();
    a.bytes = uint8_t(bitsOf.getBitWidth() / 8);
    a.bits = bitsOf.getZExtValue();
  } else {
    return std::nullopt;
  }
  if (a.bytes < 8) a.bits &= (uint64_t(1) << (8 * a.bytes)) - 1;
  return a;
}

std::string symbolPart(llvm::StringRef name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

/// Gives the device module the definition of kiln_report_fault: the first
/// fault's site id + 1 goes into the device global GpuPlan::kFaultWord,
/// which the runtime reads after the step.
void defineFaultReporting(llvm::Module &m) {
  llvm::Function *report = m.getFunction(kFaultSymbol);
  if (!report || !report->isDeclaration()) return;
  llvm::LLVMContext &c = m.getContext();
  auto *i64 = llvm::Type::getInt64Ty(c);
  auto *word = new llvm::GlobalVariable(m, i64, false, llvm::GlobalValue::ExternalLinkage,
                                        llvm::ConstantInt::get(i64, 0), GpuPlan::kFaultWord, nullptr,
                                        llvm::GlobalValue::NotThreadLocal, /*AddressSpace=*/1);
  word->setAlignment(llvm::Align(8));
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", report));
  llvm::Value *site = b.CreateAdd(report->getArg(0), llvm::ConstantInt::get(i64, 1));
  b.CreateAtomicCmpXchg(word, llvm::ConstantInt::get(i64, 0), site, llvm::MaybeAlign(8),
                        llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic);
  b.CreateRetVoid();
  report->setLinkage(llvm::GlobalValue::InternalLinkage);
}

}  // namespace

llvm::Expected<GpuLowered> readGpuLowering(ModuleOp module, llvm::StringRef function,
                                           llvm::LLVMContext &llvmContext, const DiagnoseFn &diagnose,
                                           StageTimes &times) {
  struct {
    std::string function;
  } fn{function.str()};
  auto t0 = Clock::now();
  GpuLowered out;
  GpuPlan &plan = out.plan;
  if (auto sites = module->getAttrOfType<ArrayAttr>(kFaultSitesAttr))
    for (Attribute a : sites) plan.faultSites.push_back(cast<StringAttr>(a).str());
  auto host = module.lookupSymbol<func::FuncOp>(kSpecializedFnName);
  if (!host || host.isExternal())
    return error(ErrorCode::kInternal, "@%s: no @%s after the GPU pipeline", fn.function.c_str(),
                 kSpecializedFnName.data());
  auto fail = [&](Operation *op, const llvm::Twine &why) -> llvm::Error {
    return error(ErrorCode::kUnsupported, "@%s: the GPU target cannot %s (%s at %s)", fn.function.c_str(),
                 why.str().c_str(), op->getName().getStringRef().str().c_str(),
                 locationString(op->getLoc()).c_str());
  };

  // Kernels get names unique across clusters: kiln_<cluster>_k<i>.
  std::string prefix = "kiln_" + symbolPart(fn.function) + "_k";
  llvm::DenseMap<std::pair<StringAttr, StringAttr>, std::string> kernelNames;
  SmallVector<gpu::GPUModuleOp> gpuModules(module.getOps<gpu::GPUModuleOp>());
  for (gpu::GPUModuleOp gm : gpuModules)
    for (LLVM::LLVMFuncOp f : gm.getOps<LLVM::LLVMFuncOp>())
      if (f->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName()) || f->hasAttr("gpu.kernel"))
        kernelNames[{gm.getNameAttr(), f.getSymNameAttr()}] = prefix + std::to_string(kernelNames.size());

  // The host function, op by op, into launches over numbered buffers.
  // Constants get provisional ids -2, -3, ... until the temporaries are known.
  llvm::DenseMap<Value, int> bufferOf;
  for (BlockArgument arg : host.getArguments()) bufferOf[arg] = int(arg.getArgNumber());
  plan.numArguments = host.getNumArguments();
  for (BlockArgument arg : host.getArguments()) {
    auto bytes = bufferBytes(arg.getType());
    if (!bytes)
      return error(ErrorCode::kUnsupported, "@%s: the GPU target cannot take argument %u of type %s",
                   fn.function.c_str(), arg.getArgNumber(), typeString(arg.getType()).c_str());
    plan.argumentBytes.push_back(*bytes);
  }
  llvm::DenseMap<Attribute, int> constantOf;
  auto bufferFor = [&](Operation *op, Value v) -> llvm::Expected<int> {
    auto it = bufferOf.find(v);
    if (it == bufferOf.end()) return fail(op, "find where a buffer it uses comes from");
    return it->second;
  };
  for (Operation &opRef : host.getBody().front()) {
    Operation *op = &opRef;
    if (isa<func::ReturnOp, memref::DeallocOp>(op) || op->hasTrait<OpTrait::ConstantLike>()) continue;
    if (isa<memref::AllocOp, memref::AllocaOp>(op)) {
      auto bytes = bufferBytes(op->getResult(0).getType());
      if (!bytes) return fail(op, "allocate a buffer of dynamic size or layout");
      bufferOf[op->getResult(0)] = plan.firstTemporary() + int(plan.temporaries.size());
      plan.temporaries.push_back(*bytes);
      continue;
    }
    if (auto get = dyn_cast<memref::GetGlobalOp>(op)) {
      auto global = module.lookupSymbol<memref::GlobalOp>(get.getNameAttr());
      if (!global || !global.getConstant()) return fail(op, "read a global that is not a constant");
      auto [it, added] = constantOf.try_emplace(get.getNameAttr(), -2 - int(plan.constants.size()));
      if (added) {
        auto bytes = globalBytes(global);
        if (!bytes) return fail(op, "read the value of constant @" + global.getSymName());
        plan.constants.push_back(std::move(*bytes));
      }
      bufferOf[get.getResult()] = it->second;
      continue;
    }
    if (isa<memref::CollapseShapeOp, memref::ExpandShapeOp, memref::CastOp>(op)) {
      auto src = bufferFor(op, op->getOperand(0));
      if (!src) return src.takeError();
      if (!bufferBytes(op->getResult(0).getType())) return fail(op, "take a view with a dynamic shape or layout");
      bufferOf[op->getResult(0)] = *src;
      continue;
    }
    if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      auto src = bufferFor(op, copy.getSource()), dst = bufferFor(op, copy.getTarget());
      if (!src) return src.takeError();
      if (!dst) return dst.takeError();
      auto bytes = bufferBytes(copy.getSource().getType());
      if (!bytes || bytes != bufferBytes(copy.getTarget().getType()))
        return fail(op, "copy between buffers of dynamic or different layouts");
      GpuLaunch l;
      l.kind = GpuLaunch::Kind::kCopy;
      l.src = *src;
      l.dst = *dst;
      l.bytes = *bytes;
      plan.launches.push_back(std::move(l));
      continue;
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto library = call->getAttrOfType<StringAttr>(kGpuLibraryAttr);
      auto params = call->getAttrOfType<DenseI64ArrayAttr>(kGpuParamsAttr);
      if (!library || !params) return fail(op, "call a function on the host");
      GpuLaunch l;
      l.kind = GpuLaunch::Kind::kLibrary;
      l.kernel = library.str();
      l.params.assign(params.asArrayRef().begin(), params.asArrayRef().end());
      for (Value operand : call.getOperands()) {
        auto b = bufferFor(op, operand);
        if (!b) return b.takeError();
        GpuKernelArg a;
        a.buffer = *b;
        l.args.push_back(a);
      }
      plan.launches.push_back(std::move(l));
      continue;
    }
    if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
      if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty())
        return fail(op, "launch asynchronously");
      GpuLaunch l;
      auto name = kernelNames.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (name == kernelNames.end()) return fail(op, "find the kernel it launches");
      l.kernel = name->second;
      gpu::KernelDim3 grid = launch.getGridSizeOperandValues(), block = launch.getBlockSizeOperandValues();
      Value dims[6] = {grid.x, grid.y, grid.z, block.x, block.y, block.z};
      for (int d = 0; d < 6; ++d) {
        APInt v;
        if (!matchPattern(dims[d], m_ConstantInt(&v)) || v.getSExtValue() < 1 || v.getSExtValue() > INT32_MAX)
          return fail(op, "launch a grid of non-constant size");
        (d < 3 ? l.grid[d] : l.block[d - 3]) = uint32_t(v.getSExtValue());
      }
      if (Value smem = launch.getDynamicSharedMemorySize()) {
        APInt v;
        if (!matchPattern(smem, m_ConstantInt(&v))) return fail(op, "launch with non-constant shared memory");
        l.sharedBytes = uint32_t(v.getZExtValue());
      }
      for (Value operand : launch.getKernelOperands()) {
        if (isa<MemRefType>(operand.getType())) {
          auto b = bufferFor(op, operand);
          if (!b) return b.takeError();
          GpuKernelArg a;
          a.buffer = *b;
          l.args.push_back(a);
        } else if (auto s = scalarArg(operand)) {
          l.args.push_back(*s);
        } else {
          return fail(op, "pass a non-constant scalar to a kernel");
        }
      }
      plan.launches.push_back(std::move(l));
      continue;
    }
    return fail(op, "run this op on the host");
  }
  auto fixConstant = [&](int &id) {
    if (id <= -2) id = plan.firstConstant() + (-id - 2);
  };
  for (GpuLaunch &l : plan.launches) {
    fixConstant(l.src);
    fixConstant(l.dst);
    for (GpuKernelArg &a : l.args)
      if (a.kind == GpuKernelArg::Kind::kBuffer) fixConstant(a.buffer);
  }

  // One device module: every kernel renamed, moved into the first gpu.module.
  if (gpuModules.empty()) {
    out.device = std::make_unique<llvm::Module>("kiln." + fn.function, llvmContext);
  } else {
    gpu::GPUModuleOp into = gpuModules.front();
    SymbolTable intoSymbols(into);
    for (gpu::GPUModuleOp gm : gpuModules) {
      for (Operation &o : llvm::make_early_inc_range(gm.getBody()->getOperations())) {
        auto sym = dyn_cast<SymbolOpInterface>(&o);
        if (!sym) continue;
        auto name = kernelNames.find({gm.getNameAttr(), sym.getNameAttr()});
        if (name != kernelNames.end()) {
          if (gm == into) {
            if (failed(intoSymbols.rename(sym, StringAttr::get(module.getContext(), name->second))))
              return fail(&o, "rename the kernel");
          } else {
            sym.setName(name->second);
          }
        }
        if (gm == into) continue;
        if (Operation *existing = intoSymbols.lookup(sym.getNameAttr())) {
          auto a = dyn_cast<LLVM::LLVMFuncOp>(existing), b = dyn_cast<LLVM::LLVMFuncOp>(&o);
          if (a && b && a.isExternal() && b.isExternal() && a.getFunctionType() == b.getFunctionType()) continue;
          return fail(&o, "merge kernels that define @" + sym.getName() + " twice");
        }
        o.moveBefore(into.getBody(), into.getBody()->end());
        intoSymbols.insert(&o);
      }
    }
    if (auto err = diagnose(ErrorCode::kCompileFailed, "@" + fn.function + ": kernels' translation to LLVM IR failed",
                            [&] {
                              out.device = translateModuleToLLVMIR(into, llvmContext, "kiln." + fn.function);
                              return success(bool(out.device));
                            }))
      return std::move(err);
  }
  defineFaultReporting(*out.device);
  times.push_back({"translate", msSince(t0)});
  return std::move(out);
}

}  // namespace kiln::lowering
