#include "runtime/Kiln.h"

#include "jit/Compiler.h"

namespace kiln {

std::string signatureKey(llvm::StringRef function, llvm::ArrayRef<TensorType> types) {
  std::string key = function.str() + ":";
  for (size_t i = 0; i < types.size(); ++i) key += (i ? "," : "") + types[i].str();
  return key;
}

llvm::Expected<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options) {
  if (options.threads < 0)
    return llvm::createStringError("RuntimeOptions.threads must be >= 0, got %d",
                                   options.threads);
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->options_ = options;
  codegen::CodegenOptions cg;
  cg.optLevel = options.optLevel;
  auto compiler = jit::Compiler::create(cg);
  if (!compiler) return compiler.takeError();
  rt->compiler_ = std::move(*compiler);
  return std::move(rt);
}

Runtime::~Runtime() = default;

std::string Runtime::targetDescription() const {
  return compiler_->target().triple + " " + compiler_->target().cpu;
}

llvm::Expected<std::unique_ptr<Module>> Runtime::loadModuleFromFile(llvm::StringRef path) {
  auto program = lowering::Program::parseFile(path);
  if (!program) return program.takeError();
  return std::unique_ptr<Module>(new Module(compiler_, std::move(*program)));
}

llvm::Expected<std::unique_ptr<Module>> Runtime::loadModule(llvm::StringRef source,
                                                            llvm::StringRef name) {
  auto program = lowering::Program::parse(source, name);
  if (!program) return program.takeError();
  return std::unique_ptr<Module>(new Module(compiler_, std::move(*program)));
}

Module::Module(std::shared_ptr<jit::Compiler> compiler, std::unique_ptr<lowering::Program> program)
    : compiler_(std::move(compiler)), program_(std::move(program)) {}

Module::~Module() {
  // Compiled code holds weights that may point into the program's MLIR context.
  entries_.clear();
  program_.reset();
}

const std::vector<FunctionSignature> &Module::functions() const { return program_->functions(); }

const FunctionSignature *Module::signature(llvm::StringRef function) const {
  return program_->lookup(function);
}

size_t Module::numCompiled() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto &e : entries_) n += e.second->fn != nullptr;
  return n;
}

llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
Module::compile(llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes) {
  std::string key = signatureKey(function, inputTypes);
  std::shared_ptr<Entry> entry;
  bool owner = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto &slot = entries_[key];
    if (!slot) {
      slot = std::make_shared<Entry>();
      owner = true;
    }
    entry = slot;
    if (!owner) {
      compiled_.wait(lock, [&] { return entry->done; });
      if (entry->fn) return entry->fn;
      return llvm::createStringError("%s", entry->error.c_str());
    }
  }
  // Single flight: this thread compiles; others with the same key wait above.
  auto result = compiler_->compile(*program_, function, inputTypes);
  std::lock_guard<std::mutex> lock(mu_);
  entry->done = true;
  if (!result) {
    entry->error = llvm::toString(result.takeError());
    entries_.erase(key);  // a later call may retry (e.g. after fixing inputs)
    compiled_.notify_all();
    return llvm::createStringError("%s", entry->error.c_str());
  }
  entry->fn = std::move(*result);
  compiled_.notify_all();
  return entry->fn;
}

llvm::Expected<std::vector<Tensor>> Module::call(llvm::StringRef function,
                                                 llvm::ArrayRef<Tensor> inputs) {
  const FunctionSignature *sig = program_->lookup(function);
  llvm::SmallVector<TensorType, 8> types;
  for (const Tensor &t : inputs) {
    if (!t.valid())
      return llvm::createStringError("@%s: input %zu is an empty (default-constructed) tensor",
                                     function.str().c_str(), size_t(&t - inputs.data()));
    types.push_back(t.type());
  }
  if (sig)  // cheap checks before any compile; an unknown function errors in compile()
    if (auto err = lowering::checkInputs(*sig, types)) return std::move(err);
  auto fn = compile(function, types);
  if (!fn) return fn.takeError();
  return (*fn)->call(inputs);
}

}  // namespace kiln
