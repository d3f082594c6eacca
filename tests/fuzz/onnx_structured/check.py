"""One input through ONNX Runtime and through Stowage (import, compile, a VM on the
default device, invoke), and the verdict.

Outcomes:
  matched             both ran and Stowage's outputs are ONNX Runtime's (or, where
                      they differ, ONNX's reference evaluator's: kind "reference")
  refused-by-stowage  a StowageError with a message (UnsupportedError anywhere; any
                      StowageError where the registry does not claim the model's ops
                      at their schema versions and types, or ONNX Runtime refused too,
                      or the model was mutated)
  refused-by-ort      ONNX Runtime refused a model Stowage ran (nothing to compare)
  ambiguous           Stowage's outputs are neither ONNX Runtime's nor ONNX's reference
                      evaluator's, and those two disagree as well
  finding             anything else: a mismatch; an exception that is not a
                      StowageError; a StowageError without a message; an error other
                      than UnsupportedError on a valid model that the registry claims
                      and ONNX Runtime runs; a mutated model that Stowage runs although
                      it breaks ONNX's rules (ONNX Runtime's graph, shape or type checks
                      or onnx.checker refuse it); a crash or a hang in Stowage (seen by
                      the driver, which runs inputs in worker processes)
"""

import traceback

import numpy as np

STAGES = ["idle", "generate", "onnxruntime", "import", "compile", "vm", "invoke", "compare"]


class Verdict:
    __slots__ = ("outcome", "kind", "message", "stage")

    def __init__(self, outcome, kind="", message="", stage=""):
        self.outcome, self.kind, self.message, self.stage = outcome, kind, message, stage

    def as_dict(self):
        return {"outcome": self.outcome, "kind": self.kind, "message": self.message, "stage": self.stage}


class OrtRefusal:
    def __init__(self, kind, message, at_load):
        self.kind, self.message, self.at_load = kind, message, at_load


_sessions_options = None


def run_ort(data, feeds):
    """ONNX Runtime's outputs, or an OrtRefusal."""
    import onnxruntime as ort

    global _sessions_options
    if _sessions_options is None:
        _sessions_options = ort.SessionOptions()
        _sessions_options.log_severity_level = 4
        _sessions_options.intra_op_num_threads = 1
        _sessions_options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(data, _sessions_options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own error classes: the model is refused
        return OrtRefusal(type(e).__name__, _first_line(e), at_load=True)
    try:
        names = [i.name for i in session.get_inputs()]
        return session.run(None, {n: feeds[n] for n in names if n in feeds})
    except Exception as e:  # a refusal at run time (a shape, an index out of range)
        return OrtRefusal(type(e).__name__, _first_line(e), at_load=False)


def _first_line(e):
    text = str(e).strip()
    return text.splitlines()[0][:400] if text else ""


def runtime_inputs(data):
    """The names of the graph inputs fed at run time, in order."""
    import onnx

    model = onnx.load_from_string(data)
    known = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in known]


def run_stowage(data, feeds, device, stage):
    """Stowage's outputs as numpy arrays; `stage(name)` is told each step."""
    import stowage as sw

    stage("import")
    module = sw.from_onnx(data)
    stage("compile")
    exe = sw.compile(module)
    stage("vm")
    vm = sw.VirtualMachine(exe, device=device)
    stage("invoke")
    try:
        names = runtime_inputs(data)
    except Exception:  # a model onnx cannot parse was imported: Stowage's import must have refused it
        names = list(feeds)
    args = []
    for n in names:
        a = feeds.get(n)
        if a is None:
            from stowage.errors import InvalidInputError
            raise InvalidInputError(f"the fuzzer has no feed for input '{n}'")  # reported as a refusal
        args.append(a.astype(np.uint8) if a.dtype == np.bool_ else a)
    result = vm.invoke("main", *args)
    results = result if isinstance(result, tuple) else (result,)
    outs = [r.numpy() if hasattr(r, "numpy") else np.asarray(r) for r in results]
    return outs, vm.profile()


def compare(got, want, tolerance):
    """None when Stowage's outputs `got` are ONNX Runtime's `want`, else why not.
    Integers and bools exactly (a bool as uint8 0/1); floats: NaN and infinities
    where the reference has them, finite values within `tolerance` of the largest
    of max(1, |reference|)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return f"output {i}: shape {list(g.shape)}, expected {list(w.shape)}"
        if w.dtype == np.bool_:
            if g.dtype not in (np.bool_, np.uint8) or not np.array_equal(g.astype(np.bool_), w):
                return f"output {i}: bools differ at {_first_diff(g.astype(np.bool_), w)}"
            continue
        if g.dtype != w.dtype:
            return f"output {i}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind != "f":
            if not np.array_equal(g, w):
                return f"output {i}: integers differ at {_first_diff(g, w)}"
            continue
        if not np.array_equal(np.isnan(g), np.isnan(w)):
            return f"output {i}: NaN where the reference has none, or none where it has one"
        inf = np.isinf(w)
        if not np.array_equal(g[inf], w[inf]) or np.isinf(g[~inf]).any():
            return f"output {i}: infinities differ"
        finite = np.isfinite(w)
        if finite.any():
            scale = max(1.0, float(np.max(np.abs(w[finite]))))
            err = float(np.max(np.abs(g[finite].astype(np.float64) - w[finite].astype(np.float64)))) / scale
            if err > tolerance:
                return f"output {i}: error {err:.3g} relative to {scale:.3g} (tolerance {tolerance:g})"
    return None


def _first_diff(g, w):
    idx = np.argwhere(g != w)
    if not len(idx):
        return "?"
    at = tuple(int(i) for i in idx[0])
    return f"{list(at)}: {g[at]} != {w[at]} ({len(idx)} of {w.size})"


def check(data, feeds, *, mutated, claimed, device, tolerance, stage=lambda s: None, profile=None):
    """The Verdict on one model (bytes) with its feeds."""
    import stowage as sw

    stage("onnxruntime")
    reference = run_ort(data, feeds)
    try:
        got, counters = run_stowage(data, feeds, device, stage)
    except sw.StowageError as e:
        message = str(e).strip()
        where = _stage_now(stage)
        if not message:
            return Verdict("finding", "empty-message", f"{type(e).__name__} without a message", where)
        refused_ort = isinstance(reference, OrtRefusal)
        if not mutated and not refused_ort and claimed and not isinstance(e, sw.UnsupportedError):
            return Verdict("finding", "wrong-refusal", f"{type(e).__name__}: {message}", where)
        return Verdict("refused-by-stowage", type(e).__name__, message, where)
    except Exception as e:  # the finding: anything that is not a StowageError
        frame = traceback.extract_tb(e.__traceback__)[-1]
        return Verdict("finding", "exception", f"{type(e).__name__}: {str(e)[:300]} "
                       f"({frame.filename.rsplit('/', 3)[-1]}:{frame.lineno})", _stage_now(stage))
    if profile is not None:
        for key in ("programs_built", "programs_loaded"):
            profile[key] = profile.get(key, 0) + int(counters.get(key, 0))
    if isinstance(reference, OrtRefusal):
        why_invalid = invalid_model(data, reference) if mutated and reference.at_load else None
        if why_invalid:
            return Verdict("finding", "accepted-invalid", f"{why_invalid}; Stowage ran it", "compare")
        return Verdict("refused-by-ort", reference.kind, reference.message, "onnxruntime")
    stage("compare")
    why = compare(got, reference, tolerance)
    if why:
        # ONNX Runtime departs from the specification now and then (a Resize's
        # rounding, a normalization over one element): ONNX's reference evaluator decides.
        second = run_reference(data, feeds)
        if second is not None and compare(got, second, tolerance) is None:
            return Verdict("matched", "reference", f"ONNX Runtime departs from ONNX's reference evaluator: {why}",
                           "compare")
        if second is not None and compare(reference, second, tolerance) is not None:
            # The two references disagree too: a case the specification leaves open
            # (a max over a window of padding only) or one rounding decides.
            return Verdict("ambiguous", "references disagree", why, "compare")
        return Verdict("finding", "mismatch", why, "compare")
    return Verdict("matched")


def run_reference(data, feeds):
    """ONNX's reference evaluator's outputs, or None where it cannot run the model."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    try:
        model = onnx.load_from_string(data)
        names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        return ReferenceEvaluator(model).run(None, {n: feeds[n] for n in names})
    except Exception:  # an op or a case the evaluator does not implement
        return None


def invalid_model(data, refusal):
    """Why the model breaks ONNX's rules, when ONNX Runtime's refusal at load says so
    (its graph checks, shape or type inference) or onnx.checker refuses it; else None
    (a kernel of ONNX Runtime's refusing what it does not implement, GRU without
    hidden_size, is its own limit)."""
    if refusal.kind == "InvalidGraph" or "ShapeInferenceError" in refusal.message or "Type Error" in refusal.message:
        return f"ONNX Runtime refuses the model ({refusal.kind}: {refusal.message})"
    import onnx

    try:
        onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    except Exception as e:  # onnx.checker.ValidationError, InferenceError, a model onnx cannot parse
        return f"onnx.checker refuses the model ({_first_line(e)})"
    return None


def _stage_now(stage):
    return getattr(stage, "current", "")
