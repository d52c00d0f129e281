"""Folds an ONNX model's shape computations before torch-mlir imports it.

`kiln import` runs this (with the Python beside torch-mlir's tools, which has
the `onnx` package) on every ONNX file: exporters compute reshape targets from
tensor shapes at run time (nn.MultiheadAttention's Shape -> Gather/Slice ->
Concat -> Reshape, Mod for the heads), and torch-mlir's importer leaves every
tensor downstream of such a Reshape without a shape (`!torch.vtensor<[],f32>`),
which its lowering then refuses. With the graph's input shapes static, those
computations are constants: each node whose inputs are all known and small
(shape arithmetic, never weights or activations) is evaluated with ONNX's
reference evaluator and replaced by an initializer, Shape nodes of tensors
whose inferred shape is static by their value, shape inference run again, until
nothing more folds; nodes and initializers left unread are dropped.

    python3 fold_onnx_shapes.py IN.onnx OUT.onnx REPORT.txt

REPORT.txt receives the number of nodes folded; OUT.onnx is written only when
that is above 0 (with its weights in OUT.onnx.data beside it where they pass
protobuf's 2 GB). A model whose weights lie in files beside it is read with
them. Dynamic dimensions stay as they are.
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

# Random, control flow, sequences, several outputs: never evaluated here.
NEVER = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
         "If", "Loop", "Scan", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SplitToSequence",
         "ConcatFromSequence", "SequenceEmpty", "SequenceLength", "Dropout"}
LIMIT = 1 << 16  # elements of a value this folds: shape arithmetic, not data


def static_shapes(graph):
    shapes = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if all(d is not None for d in dims):
            shapes[vi.name] = dims
    return shapes


def evaluate(node, known, opsets):
    """The node's one output from its known inputs, or None."""
    names = [i for i in node.input if i]
    inputs = [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(known[i].dtype), known[i].shape)
              for i in names]
    out = helper.make_tensor_value_info(node.output[0], onnx.TensorProto.UNDEFINED, None)
    model = helper.make_model(helper.make_graph([node], "fold", inputs, [out]), opset_imports=opsets)
    return np.asarray(ReferenceEvaluator(model).run(None, {i: known[i] for i in names})[0])


def fold_once(model):
    model = shape_inference.infer_shapes(model)
    graph = model.graph
    known = {i.name: numpy_helper.to_array(i) for i in graph.initializer if np.prod(i.dims) <= LIMIT}
    shapes = static_shapes(graph)
    kept, folded = [], 0
    for node in graph.node:
        value = None
        if len(node.output) == 1 and not node.domain and node.op_type not in NEVER:
            try:
                if node.op_type == "Constant":
                    # Kept as it is: only what reads it folds. (A tensor's
                    # size is read off its dims, not by decoding it: a
                    # weight stored as a Constant is never copied here.)
                    tensor = next((a.t for a in node.attribute if a.name == "value"), None)
                    if tensor is None or np.prod(tensor.dims) <= LIMIT:
                        c = evaluate(node, known, model.opset_import)
                        if c.size <= LIMIT:
                            known[node.output[0]] = c
                elif node.op_type in ("Shape", "Size") and node.input[0] in shapes:
                    dims = np.array(shapes[node.input[0]], dtype=np.int64)
                    if node.op_type == "Size":
                        value = np.array(int(np.prod(dims)), dtype=np.int64)
                    else:
                        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                        value = dims[attrs.get("start", 0):attrs.get("end", len(dims))]
                elif node.input and all(i == "" or i in known for i in node.input):
                    value = evaluate(node, known, model.opset_import)
            except Exception:  # noqa: BLE001 (the reference evaluator raises many kinds): left as it is
                value = None
        if value is not None and value.size <= LIMIT:
            known[node.output[0]] = value
            graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
            folded += 1
        else:
            kept.append(node)
    # Nodes and initializers nothing reads any more (backwards: a dropped
    # node's inputs may be unread then).
    needed = {o.name for o in graph.output}
    live = []
    for node in reversed(kept):
        if any(o in needed for o in node.output):
            live.append(node)
            needed.update(i for i in node.input if i)
            for a in node.attribute:  # subgraphs' reads of outer values
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    needed.update(i for n in g.node for i in n.input if i)
    del graph.node[:]
    graph.node.extend(reversed(live))
    inits = [i for i in graph.initializer if i.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    return model, folded


def main():
    source, target, report = sys.argv[1:4]
    model = onnx.load(source)
    total = 0
    for _ in range(32):
        model, n = fold_once(model)
        total += n
        if n == 0:
            break
    if total:
        model = shape_inference.infer_shapes(model)
        try:
            onnx.save(model, target)
        except ValueError:  # over protobuf's 2 GB: the weights beside it, as exporters write such models
            onnx.save(model, target, save_as_external_data=True, all_tensors_to_one_file=True,
                      location=os.path.basename(target) + ".data")
    with open(report, "w") as f:
        f.write(f"{total}\n")


if __name__ == "__main__":
    main()
