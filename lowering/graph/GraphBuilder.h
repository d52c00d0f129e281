// GraphBuilder: builds a TOSA graph (one public function) with MLIR's
// builders and hands it over as a Program, with no MLIR text in between.
// Eager single-op graphs, eager trace capture, the built-in models and the
// kernel benchmarks use it.
//
//   GraphBuilder g("main", "eager:tosa.add");
//   auto x = g.argument(type), y = g.argument(type);
//   auto z = g.op("tosa.add", {x, y}, {}, {type});      // ops by op-table name
//   auto program = g.finish({(*z)[0]});                  // verified; a lowering::Program
//
// Ops are written from the op table (ops/Ops.def): operands marked folded
// (shift, zero points, shapes, padding) are materialized as constants from
// the attribute map, and each attribute gets the MLIR type the table gives.
// "tosa.custom:domain.name" writes tosa.custom with those names.
//
// Thread-safety: a GraphBuilder is used by one thread at a time.
#pragma once

#include "lowering/graph/Program.h"
#include "ops/Attrs.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::lowering {

class GraphBuilder {
public:
  /// `function`: the public function's name; `source`: names the graph in
  /// MLIR locations and errors ("eager:tosa.add", "trace").
  explicit GraphBuilder(llvm::StringRef function = "main", llvm::StringRef source = "graph");
  ~GraphBuilder();
  GraphBuilder(const GraphBuilder &) = delete;
  GraphBuilder &operator=(const GraphBuilder &) = delete;

  /// A value of the graph.
  using Value = int;

  /// Appends a function argument (static or dynamic dims); `name` becomes its kiln.name.
  Value argument(const TensorType &type, llvm::StringRef name = "");
  /// A constant with this tensor's bytes (large ones are hoisted as weights
  /// like any model's).
  llvm::Expected<Value> constant(const Tensor &value);
  /// A constant held as a `dense_resource<key>` blob (the form exporters
  /// use for weights; loaded without copying).
  llvm::Expected<Value> resourceConstant(llvm::StringRef key, const Tensor &value);
  /// `tensor.cast` of `v` to `type` (same dtype and rank; dims may become
  /// dynamic or static).
  llvm::Expected<Value> cast(Value v, const TensorType &type);
  /// One op by its op-table name with kernel-style attributes; `results`
  /// are its result types. Errors name the op and what is wrong.
  llvm::Expected<std::vector<Value>> op(llvm::StringRef name, llvm::ArrayRef<Value> operands,
                                        const ops::AttrMap &attrs, llvm::ArrayRef<TensorType> results);
  /// The type of a value.
  const TensorType &type(Value v) const;

  /// Ends the function, returning `results` (no op can be added after).
  llvm::Error setResults(llvm::ArrayRef<Value> results);
  /// Verifies the module and makes it a Program (the builder is spent
  /// afterwards); with `results`, calls setResults first.
  llvm::Expected<std::unique_ptr<Program>> finish(llvm::ArrayRef<Value> results);
  llvm::Expected<std::unique_ptr<Program>> finish();
  /// The graph as MLIR text (generic form); empty after finish().
  std::string str() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::lowering
