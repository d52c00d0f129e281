#include "runtime/Kiln.h"

#include "jit/Compiler.h"

#include "llvm/ADT/ScopeExit.h"

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
  rt->executor_ = std::make_shared<HostExecutor>(options.threads, options.blockingThreads);
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
  return std::unique_ptr<Module>(new Module(compiler_, executor_, std::move(*program)));
}

llvm::Expected<std::unique_ptr<Module>> Runtime::loadModule(llvm::StringRef source,
                                                            llvm::StringRef name) {
  auto program = lowering::Program::parse(source, name);
  if (!program) return program.takeError();
  return std::unique_ptr<Module>(new Module(compiler_, executor_, std::move(*program)));
}

Module::Module(std::shared_ptr<jit::Compiler> compiler, std::shared_ptr<HostExecutor> executor,
               std::unique_ptr<lowering::Program> program)
    : compiler_(std::move(compiler)), executor_(std::move(executor)), program_(std::move(program)) {}

Module::~Module() {
  {  // first calls compiling on the blocking pool use this Module
    std::unique_lock<std::mutex> lock(mu_);
    compiled_.wait(lock, [&] { return firstCallsInFlight_ == 0; });
  }
  // Executions still running hold their code and weights themselves.
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

namespace {
std::vector<AsyncValueRef<Tensor>> errorValues(size_t n, std::string message) {
  std::vector<AsyncValueRef<Tensor>> v;
  for (size_t i = 0; i < std::max<size_t>(n, 1); ++i) v.push_back(makeError<Tensor>(message));
  return v;
}
}  // namespace

std::vector<AsyncValueRef<Tensor>> Module::start(llvm::StringRef function,
                                                 llvm::ArrayRef<Tensor> inputs,
                                                 bool inlineFirstStep) {
  const FunctionSignature *sig = program_->lookup(function);
  size_t numResults = sig ? sig->results.size() : 1;
  llvm::SmallVector<TensorType, 8> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].valid())
      return errorValues(numResults, "@" + function.str() + ": input " + std::to_string(i) +
                                         " is an empty (default-constructed) tensor");
    types.push_back(inputs[i].type());
  }
  if (sig)  // cheap checks before any compile; an unknown function errors in compile()
    if (auto err = lowering::checkInputs(*sig, types))
      return errorValues(numResults, llvm::toString(std::move(err)));

  ExecuteOptions opts;
  opts.runFirstStepInline = inlineFirstStep;
  {
    // Fast path: already compiled.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(signatureKey(function, types));
    if (it != entries_.end() && it->second->fn)
      return it->second->fn->executable->execute(inputs, *executor_, opts);
  }
  // First call for this signature: compile on the blocking pool, then run.
  std::vector<AsyncValueRef<Tensor>> results;
  for (size_t i = 0; i < numResults; ++i) results.push_back(makeUnavailable<Tensor>());
  std::vector<Tensor> args(inputs.begin(), inputs.end());
  std::vector<TensorType> argTypes(types.begin(), types.end());
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++firstCallsInFlight_;
  }
  executor_->spawnBlocking([this, fn = function.str(), args = std::move(args),
                            argTypes = std::move(argTypes), results]() mutable {
    auto done = llvm::make_scope_exit([this] {
      std::lock_guard<std::mutex> lock(mu_);
      --firstCallsInFlight_;
      compiled_.notify_all();
    });
    auto compiled = compile(fn, argTypes);
    if (!compiled) {
      std::string msg = llvm::toString(compiled.takeError());
      for (auto &r : results) r->setError(msg);
      return;
    }
    auto outs = (*compiled)->executable->execute(args, *executor_);
    for (size_t i = 0; i < results.size(); ++i) {
      if (i >= outs.size()) {
        results[i]->setError("@" + fn + " produced fewer results than its signature declares");
        continue;
      }
      AsyncValueRef<Tensor> from = outs[i], to = results[i];
      from->andThen([from, to] {
        if (from->isError()) to->setError(from->error());
        else to->emplace(from->get());
      });
    }
  });
  return results;
}

std::vector<AsyncValueRef<Tensor>> Module::callAsync(llvm::StringRef function,
                                                     llvm::ArrayRef<Tensor> inputs) {
  return start(function, inputs, /*inlineFirstStep=*/false);
}

llvm::Expected<std::vector<Tensor>> Module::call(llvm::StringRef function,
                                                 llvm::ArrayRef<Tensor> inputs) {
  auto futures = start(function, inputs, /*inlineFirstStep=*/true);
  std::vector<Tensor> out;
  out.reserve(futures.size());
  for (auto &f : futures) {
    auto v = f.awaitValue();
    if (!v) return v.takeError();
    out.push_back(std::move(*v));
  }
  return out;
}

}  // namespace kiln
