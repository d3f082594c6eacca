"""Findings known and not yet fixed: each a finding's kind, a pattern of its message
(and, where that is not enough, the ops the model holds or a pattern of its
mutations) and what is wrong. A run counts them apart ("known") and does not fail on
them, so that CI keeps failing on new findings only. Remove an entry once its cause
is fixed.
"""

import re

KNOWN = [
    dict(kind="wrong-refusal", message=r"has the dynamic shape \((\d+, )*0(, \d+)*,?\)",
         why="a graph input with a dimension of 0 is taken for an open (dynamic) one; ONNX allows empty tensors"),
    dict(kind="accepted-invalid",
         message=r"Type Error: Type \(tensor\(\w+\)\) of output arg \(\w+\) of node \(\w+\) does not match",
         why="a graph output declared with another element type than its node makes is accepted (declared output "
             "types are not checked)"),
    dict(kind="accepted-invalid",
         message=r"Type '.*' of input parameter \(\w+\) of operator \(\w+\) in node \(\w+\) is invalid|"
                 r"Type parameter \(\w+\) of Optype \(\w+\) bound to different types",
         why="an operand of a type the op's schema does not allow (or that differs from its sibling operands' type) "
             "is accepted (operand types are not checked against the schema)"),
    dict(kind="accepted-invalid", message=r"Inferred shape and existing shape differ",
         why="a graph output declared with other dims than its node makes is accepted (declared output shapes are "
             "not checked)"),
    dict(kind="accepted-invalid", message=r".", mutations=r"opset [156]\b",
         why="a model of an old opset that onnx's version converter upgrades is not checked against its own "
             "schemas first (BatchNormalization-1 without consumed_inputs, Clip-6 with 2 inputs)"),
    dict(kind="wrong-refusal", message=r"\(Conv\): (conv\dd: argument 'residual': shape|reshape: cannot reshape)",
         ops={"Conv"},
         why="a Conv absorbs a residual Add whose other operand broadcasts ([1, 1, 1] against [4, 5, 1]); only "
             "one of the Conv's output shape can be absorbed"),
    dict(kind="mismatch", message=r"NaN where the reference has none", ops={"Relu", "Clip", "HardSigmoid", "Celu"},
         why="Relu, Clip, HardSigmoid and Celu of NaN give 0 (or the lower bound), where ONNX Runtime and numpy "
             "give NaN: the kernels' fmax/fmin drop a NaN operand"),
    dict(kind="mismatch", message=r"NaN|infinities", ops={"MaxPool"},
         why="a MaxPool window over padding only (pads below the kernel, a dilation stepping over the input): "
             "Stowage gives -inf, ONNX Runtime -FLT_MAX, ONNX's reference evaluator 0"),
    dict(kind="mismatch", message=r"NaN", ops={"MeanVarianceNormalization"},
         why="MeanVarianceNormalization of a constant row: ONNX Runtime computes the variance as E[x^2] - E[x]^2 "
             "(as the specification's function does), which rounds below 0 and gives NaN; Stowage's two passes "
             "give 0 (not Stowage's defect; the generator cannot see a constant row coming)"),
    dict(kind="mismatch", message=r"shape", mutations=r"=-9223372036854775808", ops={"Slice"},
         why="a Slice step of -2^63: ONNX Runtime's extent overflows (1 element where the slice is empty)"),
]


def known(details):
    """What is wrong, when the finding (a result's kind, message, ops, mutations) is a
    known one; else None."""
    for entry in KNOWN:
        if entry["kind"] != details["kind"] or not re.search(entry["message"], details["message"]):
            continue
        if "ops" in entry and not entry["ops"] & set(details.get("ops", ())):
            continue
        if "mutations" in entry and not re.search(entry["mutations"], "; ".join(details.get("mutations", ()))):
            continue
        return entry["why"]
    return None
