"""ONNX's operator conformance suite (the node cases shipped in the onnx wheel,
``onnx.backend.test.case.node``) through Stowage: import, compile, run on the
default device, compare with the case's expected outputs at the case's rtol and
atol, as ``onnx.backend.test`` does for ONNX Runtime and TVM.

    python3 python/tests/conformance.py [--ops Relu,Conv] [--failures] [--no-ort]

prints, for the float32 cases (every input and output float32), how many pass
for Stowage and for ONNX Runtime (measured in the same run), per op type and in
total. Every input is passed at run time, weights included, as the cases give them.
"""

import argparse
import collections
import sys
import warnings

import numpy as np


def float32_cases():
    """The suite's node cases whose inputs and outputs are all float32."""
    import onnx
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)

    def all_float(model):
        values = list(model.graph.input) + list(model.graph.output)
        return all(v.type.HasField("tensor_type") and v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
                   for v in values)

    return [c for c in cases if c.model is not None and all_float(c.model)]


def op_of(case):
    """The op a case tests: the op of its single node, or its name's op for an expanded function."""
    ops = {n.op_type for n in case.model.graph.node}
    if len(ops) == 1:
        return next(iter(ops))
    return "(expanded) " + case.name.replace("test_", "").split("_")[0]


def main_op(case):
    """The op type a case belongs to in the tables: the tested op, expanded or not."""
    import onnx

    name = case.name[len("test_"):]
    by_lower = {s.name.lower(): s.name for s in onnx.defs.get_all_schemas()}
    best = None
    for i in range(len(name), 0, -1):  # the longest prefix that names an op
        prefix = name[:i].replace("_", "")
        if prefix in by_lower and (i == len(name) or name[i] == "_"):
            best = by_lower[prefix]
            break
    if best is None:
        ops = sorted({n.op_type for n in case.model.graph.node})
        best = ops[0] if len(ops) == 1 else name.split("_")[0]
    return best


def close(got, want, rtol, atol):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return False, f"shape {list(got.shape)}, expected {list(want.shape)}"
    if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
        diff = np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))) if got.size else 0
        return False, f"values differ (max abs difference {diff:.3g})"
    return True, ""


def run_stowage(case, device):
    """None when the case passes, else a one-line reason."""
    import stowage as sw

    model = case.model
    try:
        module = sw.from_onnx(model)
        exe = sw.compile(module)
        vm = sw.VirtualMachine(exe, device=device)
    except sw.StowageError as e:
        return f"{type(e).__name__}: {e}"
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    for inputs, outputs in case.data_sets:
        try:
            result = vm.invoke("main", *[np.asarray(inputs[i], order="C") for i in range(len(names))])  # 0-d stays 0-d
        except sw.StowageError as e:
            return f"{type(e).__name__}: {e}"
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(outputs):
            return f"{len(results)} outputs, expected {len(outputs)}"
        for got, want in zip(results, outputs):
            ok, why = close(got.numpy(), want, case.rtol, case.atol)
            if not ok:
                return why
    return None


def run_ort(case):
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only: warnings about folding would flood the table
        session = ort.InferenceSession(case.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        for inputs, outputs in case.data_sets:
            got = session.run(None, dict(zip(names, inputs)))
            for g, w in zip(got, outputs):
                if not close(g, w, case.rtol, case.atol)[0]:
                    return "values differ"
    except Exception as e:  # ONNX Runtime's own errors for ops it lacks
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="only the cases of these op types (comma-separated)")
    parser.add_argument("--failures", action="store_true", help="print each failing case with its reason")
    parser.add_argument("--no-ort", action="store_true", help="do not run ONNX Runtime beside")
    parser.add_argument("--device", default=None, help="the device (default: the VM's default)")
    args = parser.parse_args(argv)
    cases = float32_cases()
    if args.ops:
        wanted = set(args.ops.split(","))
        cases = [c for c in cases if main_op(c) in wanted]
    ours = collections.Counter()
    theirs = collections.Counter()
    totals = collections.Counter()
    for case in cases:
        op = main_op(case)
        totals[op] += 1
        why = run_stowage(case, args.device)
        if why is None:
            ours[op] += 1
        elif args.failures:
            print(f"FAIL {case.name}: {why.splitlines()[0][:300]}")
        if not args.no_ort and run_ort(case) is None:
            theirs[op] += 1
    print(f"{'op':28} {'cases':>5} {'stowage':>8} {'onnxruntime':>12}")
    for op in sorted(totals):
        print(f"{op:28} {totals[op]:5} {ours[op]:8} {theirs[op] if not args.no_ort else '-':>12}")
    n = sum(totals.values())
    ort_total = "-" if args.no_ort else sum(theirs.values())
    print(f"float32 node cases: {n}; stowage passes {sum(ours.values())} ({sum(1 for o in totals if ours[o] == totals[o])}"
          f" op types whole); onnxruntime passes {ort_total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
