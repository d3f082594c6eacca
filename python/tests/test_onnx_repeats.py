"""A node of one op on the same values as an earlier node (constants compared by
value) takes the earlier node's results: exporters repeat such nodes, as BERT's
attention mask rebuilt by a Where in every layer (Importer.repeat_key)."""

import numpy as np
from onnx import helper

from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info


def masked_layers(fills=(-1e9, -1e9), layers=2):
    """x [2, 8]; a bool mask [2, 8]; each layer: m = Where(mask, 0, fill) (a Constant
    of its own), x = Softmax(x * 2 + m)."""
    rng = np.random.default_rng(2)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        nodes += [helper.make_node("Constant", [], [f"zero{i}"], value=helper.make_tensor(f"z{i}", 1, [], [0.0])),
                  helper.make_node("Constant", [], [f"fill{i}"],
                                   value=helper.make_tensor(f"f{i}", 1, [], [fills[i % len(fills)]])),
                  helper.make_node("Where", ["mask", f"zero{i}", f"fill{i}"], [f"m{i}"]),
                  helper.make_node("Mul", [x, "two"], [f"s{i}"]),
                  helper.make_node("Add", [f"s{i}", f"m{i}"], [f"a{i}"]),
                  helper.make_node("Softmax", [f"a{i}"], [f"x{i + 1}"], axis=-1)]
        x = f"x{i + 1}"
    nodes[-1].output[0] = "y"
    feeds = {"x": rng.uniform(-1, 1, (2, 8)).astype(np.float32), "mask": rng.uniform(size=(2, 8)) < 0.7}
    model = onnx_model(nodes, [tensor_info("x", np.float32, (2, 8)), tensor_info("mask", np.bool_, (2, 8))],
                       [tensor_info("y", np.float32, None)], [("two", np.array(2.0, np.float32))])
    return model, feeds


def where_launches(module):
    return module.text().count("call_kernel(stowage_math_where")


def test_a_repeated_where_runs_once(device):
    model, feeds = masked_layers(layers=3)
    got, module, _ = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert where_launches(module) == 1


def test_constants_of_other_values_are_not_shared(device):
    model, feeds = masked_layers(fills=(-1e9, -5.0))
    got, module, _ = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert where_launches(module) == 2
