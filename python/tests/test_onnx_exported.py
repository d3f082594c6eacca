"""ONNX import of graphs shaped as PyTorch's exporters emit them, against ONNX Runtime:
the dynamo exporter's ReduceMean pooling before a classifier, the TorchScript
exporter's shape chains (which must fold at import), attention with a causal mask
built from constants and a padding mask from an int64 attention_mask, embedding
lookups from int64 token ids, LayerNormalization, Gelu and its Erf form, several
outputs, float16 initializers. benchmarks/zoo.py runs whole exported models."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stowage as sw

ort = pytest.importorskip("onnxruntime")

rng = np.random.default_rng(2027)
FLOAT_MIN = float(np.finfo(np.float32).min)  # what exporters fill masked scores with
ONNX_TYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.float16: TensorProto.FLOAT16}


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def const(name, value):
    """A Constant node as the TorchScript exporter writes them."""
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name + "_v"))


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    """A model of `nodes`; inputs as (name, array), outputs as names (float32)."""
    graph = helper.make_graph(
        nodes,
        "exported",
        [helper.make_tensor_value_info(n, ONNX_TYPES[a.dtype.type], a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in initializers],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def run_both(model, inputs, device, texture=False):
    """(Stowage's outputs, ONNX Runtime's, the Stowage module) on the same inputs."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, dict(inputs))
    module = sw.from_onnx(model, texture=texture)
    vm = sw.VirtualMachine(sw.compile(module), device=device)
    got = vm.invoke("main", *[a for _, a in inputs])
    got = [t.numpy() for t in (got if isinstance(got, (tuple, list)) else [got])]
    return got, want, module


def check(model, inputs, device, texture=False):
    got, want, module = run_both(model, inputs, device, texture)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        scale = max(float(np.max(np.abs(w))), 1e-30)
        assert float(np.max(np.abs(g.astype(np.float64) - w))) / scale <= 1e-4
    return module


def kernels(module):
    return module.text().count("call_kernel")


# ---- the dynamo exporter's global pooling ---------------------------------------------


@pytest.mark.parametrize("axes", [[2, 3], [-1, -2]])
@pytest.mark.parametrize("texture", [False, True])
def test_reduce_mean_pooling_before_classifier(axes, texture, device):
    """resnet's AdaptiveAvgPool2d((1, 1)) + flatten + fc as torch.onnx.export(dynamo=True) writes it."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("ReduceMean", ["r", "axes"], ["mean"], keepdims=1, noop_with_empty_axes=0),
        helper.make_node("Reshape", ["mean", "flat"], ["view"], allowzero=1),
        helper.make_node("Gemm", ["view", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    inits = [("w", rand(16, 8, 3, 3)), ("axes", np.array(axes, np.int64)), ("flat", np.array([1, -1], np.int64)),
             ("fc_w", rand(10, 16)), ("fc_b", rand(10))]
    model = make_model(nodes, [("x", rand(1, 8, 7, 7))], ["logits"], inits, opset=18)
    check(model, [("x", rand(1, 8, 7, 7))], device, texture)


# ---- the TorchScript exporter's shape chains ------------------------------------------


def view_model(shape_chain):
    """x -> Relu -> x.view(x.size(0), -1) -> Relu; the view's shape from Shape->Gather->
    Unsqueeze->Concat (the TorchScript exporter) or a constant."""
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    if shape_chain:
        nodes += [
            helper.make_node("Shape", ["r"], ["s"]),
            const("zero", np.array(0, np.int64)),
            helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
            const("axes0", np.array([0], np.int64)),
            helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
            const("minus_one", np.array([-1], np.int64)),
            helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
        ]
    else:
        nodes.append(const("target", np.array([2, -1], np.int64)))
    nodes += [helper.make_node("Reshape", ["r", "target"], ["v"]), helper.make_node("Relu", ["v"], ["y"])]
    return make_model(nodes, [("x", rand(2, 3, 4, 5))], ["y"])


def test_shape_chain_folds_at_import(device):
    x = rand(2, 3, 4, 5)
    chained = check(view_model(True), [("x", x)], device)
    plain = sw.from_onnx(view_model(False))
    assert kernels(chained) == kernels(plain)  # Shape, Gather, Unsqueeze, Concat: no kernel


def test_dynamic_batch_shape_chain_folds_with_given_shape(device):
    """The same chain over an input whose batch the exporter left open (dynamic_axes)."""
    model = view_model(True)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    module = sw.from_onnx(model, shapes={"x": (2, 3, 4, 5)})
    assert kernels(module) == kernels(sw.from_onnx(view_model(False)))
    x = rand(2, 3, 4, 5)
    vm = sw.VirtualMachine(sw.compile(module), device=device)
    np.testing.assert_allclose(vm.invoke("main", x).numpy(), np.maximum(x, 0).reshape(2, -1), rtol=0, atol=0)


# ---- attention as transformers' exports have it ---------------------------------------

S, D, HEADS = 8, 16, 2
HEAD = D // HEADS


def causal_mask_nodes(how):
    """Nodes giving 'future' (bool, S x S: key after query) from constants alone."""
    if how == "range":  # arange(S)[None, :] > arange(S)[:, None]
        return [
            const("start", np.array(0, np.int64)), const("limit", np.array(S, np.int64)),
            const("delta", np.array(1, np.int64)),
            helper.make_node("Range", ["start", "limit", "delta"], ["pos"]),
            const("ax0", np.array([0], np.int64)), const("ax1", np.array([1], np.int64)),
            helper.make_node("Unsqueeze", ["pos", "ax1"], ["rows"]),
            helper.make_node("Unsqueeze", ["pos", "ax0"], ["cols"]),
            helper.make_node("Less", ["rows", "cols"], ["future"]),
        ]
    # triu(ones(S, S, bool), diagonal=1), as aten::triu exports
    return [
        const("square", np.array([S, S], np.int64)),
        helper.make_node("ConstantOfShape", ["square"], ["ones"],
                         value=numpy_helper.from_array(np.array([1], np.int64), "one")),
        const("diagonal", np.array(1, np.int64)),
        helper.make_node("Trilu", ["ones", "diagonal"], ["upper"], upper=1),
        helper.make_node("Cast", ["upper"], ["future"], to=TensorProto.BOOL),
    ]


def attention_model(causal):
    """One self-attention block: int64 attention_mask (1 = token, 0 = padding) to an
    additive mask, then a causal mask from constants through Where (GPT-2's export)."""

    def heads(name, src, perm):
        return [
            helper.make_node("MatMul", [src, "w" + name], [name + "_p"]),
            helper.make_node("Add", [name + "_p", "b" + name], [name + "_b"]),
            helper.make_node("Reshape", [name + "_b", "split_heads"], [name + "_h"]),
            helper.make_node("Transpose", [name + "_h"], [name], perm=perm),
        ]

    nodes = heads("q", "x", [0, 2, 1, 3]) + heads("k", "x", [0, 2, 3, 1]) + heads("v", "x", [0, 2, 1, 3])
    nodes += [
        helper.make_node("MatMul", ["q", "k"], ["qk"]),
        helper.make_node("Div", ["qk", "scale"], ["scores"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        const("mask_axes", np.array([1, 2], np.int64)),
        helper.make_node("Unsqueeze", ["mask_f", "mask_axes"], ["mask4"]),
        helper.make_node("Sub", ["one", "mask4"], ["inverted"]),
        helper.make_node("Mul", ["inverted", "float_min"], ["padding"]),
        helper.make_node("Add", ["scores", "padding"], ["padded"]),
    ]
    if causal:
        nodes += causal_mask_nodes(causal)
        nodes.append(helper.make_node("Where", ["future", "float_min", "padded"], ["masked"]))
    else:
        nodes.append(helper.make_node("Identity", ["padded"], ["masked"]))
    nodes += [
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["context"]),
        helper.make_node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["context_t", "merge_heads"], ["merged"]),
        helper.make_node("MatMul", ["merged", "wo"], ["y"]),
    ]
    inits = [(p + n, rand(D, D) * 0.3 if p == "w" else rand(D)) for n in "qkv" for p in "wb"]
    inits += [("wo", rand(D, D) * 0.3), ("scale", np.array(np.sqrt(HEAD), np.float32)),
              ("one", np.array(1.0, np.float32)), ("float_min", np.array(FLOAT_MIN, np.float32)),
              ("split_heads", np.array([1, S, HEADS, HEAD], np.int64)), ("merge_heads", np.array([1, S, D], np.int64))]
    return make_model(nodes, [("x", rand(1, S, D)), ("attention_mask", padded_mask())], ["y"], inits)


def padded_mask():
    mask = np.ones((1, S), np.int64)
    mask[:, -3:] = 0
    return mask


@pytest.mark.parametrize("causal", [None, "range", "trilu"])
def test_attention_with_masks(causal, device):
    module = check(attention_model(causal), [("x", rand(1, S, D)), ("attention_mask", padded_mask())], device)
    if causal:  # the causal mask folds at import: its Where is the one kernel it adds
        assert kernels(module) == kernels(sw.from_onnx(attention_model(None))) + 1


# ---- embeddings, normalisation, GELU ---------------------------------------------------

VOCAB = 50


def test_embedding_lookup_from_token_ids(device):
    """word + position embeddings (Gather on constant tables) then LayerNormalization, as BERT exports."""
    nodes = [
        helper.make_node("Gather", ["words", "input_ids"], ["word_vectors"], axis=0),
        const("start", np.array(0, np.int64)), const("limit", np.array(S, np.int64)),
        const("delta", np.array(1, np.int64)),
        helper.make_node("Range", ["start", "limit", "delta"], ["positions"]),
        helper.make_node("Gather", ["position_table", "positions"], ["position_vectors"], axis=0),
        helper.make_node("Add", ["word_vectors", "position_vectors"], ["summed"]),
        helper.make_node("LayerNormalization", ["summed", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-12),
    ]
    inits = [("words", rand(VOCAB, D)), ("position_table", rand(S + 4, D)), ("gamma", rand(D)), ("beta", rand(D))]
    ids = rng.integers(0, VOCAB, (1, S), dtype=np.int64)
    check(make_model(nodes, [("input_ids", ids)], ["y"], inits), [("input_ids", ids)], device)


@pytest.mark.parametrize("shape,axis", [((2, 5, 16), -1), ((3, 24), 1), ((2, 3, 4, 6), 2)])
def test_layer_normalization(shape, axis, device):
    normalized = shape[axis:]
    node = helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=axis, epsilon=1e-5)
    inits = [("gamma", rand(*normalized)), ("beta", rand(*normalized))]
    check(make_model([node], [("x", rand(*shape))], ["y"], inits), [("x", rand(*shape) * 3 + 1)], device)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate, device):
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    check(make_model([node], [("x", rand(2, 8, 16))], ["y"], opset=20), [("x", rand(2, 8, 16) * 3)], device)


def test_erf_gelu(device):
    """x * 0.5 * (1 + erf(x / sqrt 2)): nn.GELU as the TorchScript exporter writes it below opset 20."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["scaled"]),
        helper.make_node("Erf", ["scaled"], ["erf"]),
        helper.make_node("Add", ["erf", "one"], ["shifted"]),
        helper.make_node("Mul", ["h", "shifted"], ["doubled"]),
        helper.make_node("Mul", ["doubled", "half"], ["y"]),
    ]
    inits = [("w", rand(16, 32)), ("sqrt2", np.array(np.sqrt(2), np.float32)), ("one", np.array(1, np.float32)),
             ("half", np.array(0.5, np.float32))]
    check(make_model(nodes, [("x", rand(2, 8, 16))], ["y"], inits), [("x", rand(2, 8, 16))], device)


# ---- several outputs, float16 weights -------------------------------------------------


def test_two_outputs(device):
    """Features and logits, as a detection or segmentation head's export returns both."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["features"]),
        helper.make_node("GlobalAveragePool", ["features"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    inits = [("w", rand(8, 3, 3, 3)), ("fc_w", rand(5, 8)), ("fc_b", rand(5))]
    model = make_model(nodes, [("x", rand(1, 3, 9, 9))], ["features", "logits"], inits)
    check(model, [("x", rand(1, 3, 9, 9))], device)


def test_float16_initializers(device):
    """Half-precision weights cast to float32 before use (a model exported after .half() on its weights)."""
    nodes = [
        helper.make_node("Cast", ["w16"], ["w"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Cast", ["b16"], ["b"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["h", "b"], ["y"]),
    ]
    inits = [("w16", rand(16, 8).astype(np.float16)), ("b16", rand(8).astype(np.float16))]
    model = make_model(nodes, [("x", rand(4, 16))], ["y"], inits)
    check(model, [("x", rand(4, 16))], device)


def test_softmax_nan_guard_of_a_fully_masked_row(device):
    """The dynamo exporter's scaled_dot_product_attention: a boolean mask through Where(-inf),
    Softmax, then Where(IsNaN(p), 0, p), which zeroes a row whose keys are all masked."""
    keep = np.ones((4, 6), bool)
    keep[1] = False  # this query sees no key: its softmax is NaN, the guard makes it 0
    keep[2, 3:] = False
    nodes = [
        helper.make_node("Where", ["keep", "scores", "minus_inf"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "p"], ["y"]),
    ]
    inits = [("keep", keep), ("minus_inf", np.array(-np.inf, np.float32)), ("zero", np.array(0, np.float32))]
    model = make_model(nodes, [("scores", rand(1, 2, 4, 6))], ["y"], inits, opset=18)
    check(model, [("scores", rand(1, 2, 4, 6))], device)
