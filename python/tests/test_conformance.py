"""ONNX's operator conformance suite in the tests: every float32 node case (and its
expanded form) of every op the importer's registry lists runs through Stowage on
the default device, beside ONNX Runtime in the same run (conformance.py is the
adapter). A case that fails is listed in KNOWN_FAILURES with its reason, and runs
as a strict expected failure, so the list cannot go stale: a case that starts to
pass must leave it. The totals print at the end of the session."""

import pytest

import conformance
from stowage.frontend import registry

# case name -> why Stowage fails it (kept to what is really missing).
KNOWN_FAILURES = {
    "test_scan_sum": "Scan of opset 8 (the batched form) is not supported",
    "test_batchnorm_example_training_mode": "training_mode=1 (inference only)",
    "test_batchnorm_epsilon_training_mode": "training_mode=1 (inference only)",
    "test_range_float_type_positive_delta_expanded": "its function body uses Loop, which is not supported",
}

_REGISTERED = set(registry.op_types())
CASES = [c for c in conformance.float32_cases() if conformance.main_op(c) in _REGISTERED]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case, device, record_property):
    why = conformance.run_stowage(case, device)
    ort_ok = conformance.run_ort(case) is None
    # A property of the test's report: with pytest-xdist the reports, not this
    # module's state, reach the process that prints the summary.
    record_property("conformance", [case.name, conformance.main_op(case), why is None, ort_ok])
    if case.name in KNOWN_FAILURES:
        if why is None:
            pytest.fail(f"passes now: remove it from KNOWN_FAILURES ({KNOWN_FAILURES[case.name]})")
        pytest.xfail(KNOWN_FAILURES[case.name])
    assert why is None, why


def summary_lines(results):
    """The totals of the cases run in this session, for the terminal summary; `results`
    maps a case's name to (op, Stowage passed, ONNX Runtime passed)."""
    if not results:
        return []
    ours = sum(1 for _, ok, _ in results.values() if ok)
    theirs = sum(1 for _, _, ok in results.values() if ok)
    ops = {op for op, _, _ in results.values()}
    whole = sum(1 for op in ops if all(ok for o, ok, _ in results.values() if o == op))
    total = len(conformance.float32_cases())
    return [f"ONNX conformance, float32 node cases of the {len(ops)} registered op types run here: "
            f"{len(results)} cases; Stowage passes {ours} ({whole} op types whole), ONNX Runtime {theirs}; "
            f"the suite has {total} float32 node cases in all"]
