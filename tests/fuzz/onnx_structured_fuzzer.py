"""Structured, differential fuzzing of the ONNX importer.

Valid mode generates small valid models from the operator registry (chains of 1 to
4 nodes over the ops in onnx_structured/, random shapes and attributes valid for
each op's schema, checked by onnx.checker), imports, compiles and runs each on the
default device and compares with ONNX Runtime. Mutate mode damages such a model
(attributes, known values, dims, types, node inputs, opsets) and requires one of
Stowage's errors, with a message, or (where ONNX Runtime runs the model) its result.
onnx_structured/check.py says what counts as a finding. Inputs are numbered; input
i of seed s is the same model on every machine and with any --jobs.

    PYTHONPATH=build/python python3 tests/fuzz/onnx_structured_fuzzer.py --seconds 30 --seed 1 \\
        [--mode valid|mutate|both] [--jobs J] [--count N] [--out DIR] [--timeout S]
    ... --seed 1 --index 1234 [--mode mutate]    one input, in this process, with its details
    ... --replay DIR/finding.onnx                 a written finding again (its .npz holds the feeds)

Each input runs in a worker process (--jobs of them), so that a crash or an input
over --timeout seconds (a hang) is a finding, not the end of the run. Findings are
written to --out as .onnx with the feeds as .npz and a .txt saying what happened;
the exit status is 1 when there is any. Kernels are cached on disk across workers
and runs ($STOWAGE_CACHE_DIR, docs/security.md): the first inputs of a fresh cache
build kernels, later ones load them.
"""

import argparse
import collections
import multiprocessing
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from onnx_structured import check as checking  # noqa: E402
from onnx_structured.generate import covered_ops, generate, rng_for  # noqa: E402
from onnx_structured.known import known  # noqa: E402

OUTCOMES = ["matched", "refused-by-stowage", "refused-by-ort", "ambiguous", "known", "finding"]


def mode_of(mode, index):
    return mode if mode != "both" else ("valid", "mutate")[index % 2]


def make_input(seed, index, mode):
    """(model bytes, feeds, details) of input `index`."""
    from onnx_structured.mutate import mutate

    case = generate(seed, index)
    details = {"index": index, "mode": mode, "ops": case.ops, "opset": case.opset, "claimed": case.claimed,
               "unclaimed": case.unclaimed, "valid": case.valid, "why_invalid": case.why_invalid, "mutations": []}
    if mode == "mutate" and case.valid:
        data, feeds, done = mutate(rng_for(seed, index, 1), case)
        details["mutations"] = done
        return data, feeds, details
    return case.model.SerializeToString(), case.feeds, details


class Stage:
    """The step an input is at, shared with the driver so that a crash or a hang
    can be placed (a crash inside ONNX Runtime is not Stowage's)."""

    def __init__(self, shared=None):
        self.shared = shared
        self.current = "idle"

    def __call__(self, name):
        self.current = name
        if self.shared is not None:
            self.shared.value = checking.STAGES.index(name)


def run_input(seed, index, mode, device, tolerance, stage, profile=None):
    start = time.perf_counter()
    stage("generate")
    data, feeds, details = make_input(seed, index, mode)
    if not details["valid"]:
        verdict = checking.Verdict("skipped", "generator", details["why_invalid"], "generate")
    else:
        verdict = checking.check(data, feeds, mutated=mode == "mutate", claimed=details["claimed"], device=device,
                                 tolerance=tolerance, stage=stage, profile=profile)
    stage("idle")
    details.update(verdict.as_dict())
    mark_known(details)
    details["seconds"] = time.perf_counter() - start
    return details


def mark_known(details):
    """A finding listed in onnx_structured/known.py becomes outcome "known"."""
    if details["outcome"] == "finding":
        why = known(details)
        if why:
            details["outcome"], details["known"] = "known", why


def default_device():
    import stowage as sw

    found = sw.devices()
    return found[0]["spec"] if found else None


def worker_main(conn, shared_stage, seed, tolerance, pocl_threads):
    if pocl_threads:
        os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", str(pocl_threads))
    stage = Stage(shared_stage)
    device = default_device()
    profile = {}
    while True:
        task = conn.recv()
        if task is None:
            conn.send({"profile": profile})
            return
        index, mode = task
        try:
            result = run_input(seed, index, mode, device, tolerance, stage, profile)
        except Exception as e:  # the fuzzer's own mistake (checking.check catches everything Stowage raises)
            result = {"index": index, "mode": mode, "ops": [], "opset": 0, "claimed": False, "unclaimed": [],
                      "valid": False, "why_invalid": "", "mutations": [], "outcome": "skipped", "kind": "fuzzer",
                      "message": f"{type(e).__name__}: {e}", "stage": stage.current, "seconds": 0.0}
        conn.send(result)


class Worker:
    def __init__(self, ctx, args):
        self.stage = ctx.Value("i", 0, lock=False)
        self.conn, child = ctx.Pipe()
        pocl_threads = max(1, (os.cpu_count() or 1) // args.jobs) if args.jobs > 1 else 0
        self.proc = ctx.Process(target=worker_main, args=(child, self.stage, args.seed, args.tolerance, pocl_threads),
                                daemon=True)
        self.proc.start()
        child.close()
        self.task = None  # (index, mode, start time)

    def send(self, index, mode):
        self.task = (index, mode, time.monotonic())
        self.conn.send((index, mode))

    def stage_name(self):
        return checking.STAGES[self.stage.value] if 0 <= self.stage.value < len(checking.STAGES) else "?"

    def kill(self):
        self.proc.kill()
        self.proc.join()


def lost_input(worker, kind, seed):
    """The record of an input whose worker crashed or hung."""
    index, mode, start = worker.task
    stage = worker.stage_name()
    _, _, details = make_input(seed, index, mode)
    if kind == "crash":
        code = worker.proc.exitcode
        message = f"the worker died (exit code {code}) during {stage}"
    else:
        message = f"over the time limit during {stage}"
    # A crash or a hang inside ONNX Runtime is its own; one while comparing (the
    # reference evaluator on a large result) the fuzzer's: Stowage had not begun, or had done.
    outcome, kind = {"onnxruntime": ("refused-by-ort", f"ort-{kind}"),
                     "compare": ("ambiguous", f"compare-{kind}")}.get(stage, ("finding", kind))
    details.update({"outcome": outcome, "kind": kind, "message": message, "stage": stage,
                    "seconds": time.monotonic() - start})
    mark_known(details)
    return details


def run_parallel(args, on_result):
    ctx = multiprocessing.get_context("spawn")
    workers = [Worker(ctx, args) for _ in range(args.jobs)]
    deadline = time.monotonic() + args.seconds if args.seconds else None
    next_index = args.first
    stop_at = args.first + args.count if args.count else None
    profile = collections.Counter()

    def more():
        if stop_at is not None and next_index >= stop_at:
            return False
        return deadline is None or time.monotonic() < deadline

    from multiprocessing.connection import wait

    try:
        while True:
            for w in workers:
                if w.task is None and more():
                    w.send(next_index, mode_of(args.mode, next_index))
                    next_index += 1
            busy = [w for w in workers if w.task is not None]
            if not busy:
                break
            ready = wait([w.conn for w in busy], timeout=1.0)
            for w in busy:
                if w.conn in ready:
                    try:
                        result = w.conn.recv()
                    except (EOFError, ConnectionError):
                        w.proc.join()
                        on_result(lost_input(w, "crash", args.seed))
                        workers[workers.index(w)] = Worker(ctx, args)
                        continue
                    w.task = None
                    on_result(result)
                elif time.monotonic() - w.task[2] > args.timeout:
                    w.kill()
                    on_result(lost_input(w, "hang", args.seed))
                    workers[workers.index(w)] = Worker(ctx, args)
    finally:
        for w in workers:
            try:
                w.conn.send(None)
                if w.conn.poll(30):
                    profile.update(w.conn.recv().get("profile", {}))
            except (EOFError, OSError, ConnectionError):
                pass
            w.proc.join(timeout=5)
            if w.proc.is_alive():
                w.kill()
    return profile


class Tally:
    def __init__(self):
        self.outcomes = collections.Counter()
        self.by_mode = collections.defaultdict(collections.Counter)
        self.per_op = collections.defaultdict(collections.Counter)
        self.kinds = collections.Counter()
        self.known = collections.Counter()
        self.references = 0  # matched ONNX's reference evaluator where ONNX Runtime departs
        self.ambiguous = collections.Counter()
        self.refusals = collections.Counter()  # (op, error class, message start) of valid models' refusals
        self.claimed_refusals = 0
        self.findings = []
        self.skipped = 0
        self.slowest = 0.0

    def add(self, r):
        if r["outcome"] == "skipped":
            self.skipped += 1
            self.findings.append(r)  # a generator's mistake fails the run too: the fuzzer must not rot
            return
        self.outcomes[r["outcome"]] += 1
        self.by_mode[r["mode"]][r["outcome"]] += 1
        self.slowest = max(self.slowest, r.get("seconds", 0.0))
        for op in sorted(set(r["ops"])):
            self.per_op[op][r["outcome"]] += 1
            self.per_op[op]["inputs"] += 1
        if r["outcome"] == "finding":
            self.kinds[r["kind"]] += 1
            self.findings.append(r)
        if r["outcome"] == "known":
            self.known[r["known"]] += 1
        if r["outcome"] == "matched" and r["kind"] == "reference":
            self.references += 1
        if r["outcome"] == "ambiguous":
            self.ambiguous[r["kind"]] += 1
        if r["outcome"] == "refused-by-stowage" and r["mode"] == "valid":
            if r["claimed"]:
                self.claimed_refusals += 1
            ops = [op for op, _ in r["unclaimed"]] or r["ops"]
            self.refusals[(ops[0] if len(set(ops)) == 1 else "+".join(sorted(set(ops))), r["kind"],
                           r["message"][:90])] += 1

    @property
    def total(self):
        return sum(self.outcomes.values())


def print_summary(tally, args, seconds, profile, out=sys.stdout):
    p = lambda *a: print(*a, file=out)  # noqa: E731
    n = tally.total
    p(f"structured ONNX fuzzer: seed {args.seed}, mode {args.mode}, {args.jobs} job(s)")
    p(f"inputs: {n} in {seconds:.1f} s ({n / seconds if seconds else 0:.1f}/s); slowest {tally.slowest:.2f} s")
    p(f"{'outcome':22} {'all':>7} " + " ".join(f"{m:>7}" for m in sorted(tally.by_mode)))
    for o in OUTCOMES:
        p(f"{o:22} {tally.outcomes[o]:7} " + " ".join(f"{tally.by_mode[m][o]:7}" for m in sorted(tally.by_mode)))
    p(f"matched ONNX's reference evaluator where ONNX Runtime departs from it: {tally.references}")
    for kind, count in tally.ambiguous.most_common():
        p(f"  ambiguous ({count}): {kind}")
    for why, count in tally.known.most_common():
        p(f"  known ({count}): {why}")
    p(f"valid models refused although the registry claims every node: {tally.claimed_refusals} "
      "(UnsupportedError: an attribute or mode a converter does not implement)")
    if tally.skipped:
        p(f"generated models onnx.checker refused (the generator's mistakes): {tally.skipped}")
    if profile:
        p(f"kernel programs: {profile.get('programs_built', 0)} built from source, "
          f"{profile.get('programs_loaded', 0)} loaded from the disk cache")
    for kind, count in tally.kinds.most_common():
        p(f"  finding: {kind}: {count}")
    p("")
    p(f"{'op':26} {'inputs':>7} {'matched':>8} {'refused-stowage':>16} {'refused-ort':>12} {'findings':>9}")
    for op in sorted(tally.per_op):
        c = tally.per_op[op]
        p(f"{op:26} {c['inputs']:7} {c['matched']:8} {c['refused-by-stowage']:16} {c['refused-by-ort']:12} "
          f"{c['finding']:9}")
    if tally.refusals and args.refusals:
        p("")
        p("valid models refused by Stowage, by op (count, error, message):")
        for (op, kind, msg), count in sorted(tally.refusals.items(), key=lambda kv: (-kv[1], kv[0]))[:args.refusals]:
            p(f"  {count:5}  {op}: {kind}: {msg}")


def write_finding(r, args):
    import numpy as np

    os.makedirs(args.out, exist_ok=True)
    kind = r["kind"] if r["outcome"] == "finding" else "generator"
    stem = os.path.join(args.out, f"{kind}-seed{args.seed}-{r['mode']}-{r['index']}")
    data, feeds, _ = make_input(args.seed, r["index"], r["mode"])
    with open(stem + ".onnx", "wb") as f:
        f.write(data)
    np.savez(stem + ".npz", **feeds)
    with open(stem + ".txt", "w") as f:
        f.write(f"{kind} during {r['stage']}: {r['message']}\n")
        f.write(f"ops: {' '.join(r['ops'])} (opset {r['opset']})\n")
        if r["mutations"]:
            f.write(f"mutations: {'; '.join(r['mutations'])}\n")
        f.write(f"again: python3 tests/fuzz/onnx_structured_fuzzer.py --seed {args.seed} --index {r['index']} "
                f"--mode {r['mode']}\n")
    return stem


def replay(args):
    """Runs one written finding (an .onnx with its .npz) in this process."""
    import numpy as np

    with open(args.replay, "rb") as f:
        data = f.read()
    npz = os.path.splitext(args.replay)[0] + ".npz"
    feeds = dict(np.load(npz)) if os.path.exists(npz) else {}
    verdict = checking.check(data, feeds, mutated=True, claimed=False, device=default_device(),
                             tolerance=args.tolerance, stage=Stage())
    print(verdict.as_dict())
    return 1 if verdict.outcome == "finding" else 0


def run_one(args):
    """Runs input --index in this process and prints it."""
    import onnx

    mode = mode_of(args.mode, args.index)
    data, _, details = make_input(args.seed, args.index, mode)
    try:
        print(onnx.printer.to_text(onnx.load_from_string(data)))
    except Exception as e:  # a mutated model onnx cannot print
        print(f"(not printable: {type(e).__name__})")
    result = run_input(args.seed, args.index, mode, default_device(), args.tolerance, Stage())
    for key in ("mode", "opset", "ops", "claimed", "unclaimed", "mutations", "outcome", "kind", "stage", "message"):
        print(f"{key}: {result[key]}")
    return 1 if result["outcome"] in ("finding", "skipped") else 0


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=None, help="stop starting inputs after this long (default 30)")
    ap.add_argument("--count", type=int, default=None, help="run this many inputs (with --seconds: whichever first)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first", type=int, default=0, help="the first input's index")
    ap.add_argument("--mode", choices=["valid", "mutate", "both"], default="both")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one input may take before it is a hang")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--out", default="fuzz-structured", help="where findings are written")
    ap.add_argument("--refusals", type=int, default=25, help="how many kinds of refusal to list (0: none)")
    ap.add_argument("--index", type=int, default=None, help="run this one input here, printing it")
    ap.add_argument("--replay", default=None, help="run this written finding (.onnx) here")
    args = ap.parse_args(argv)
    if args.seconds is None and args.count is None:
        args.seconds = 30.0
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.replay:
        return replay(args)
    if args.index is not None:
        return run_one(args)
    covered, uncovered = covered_ops()
    print(f"generators cover {len(covered)} of the registry's {len(covered) + len(uncovered)} op types; "
          f"not: {', '.join(uncovered) or 'none'}", flush=True)
    tally = Tally()
    start = time.monotonic()

    def on_result(r):
        tally.add(r)
        if r["outcome"] in ("finding", "skipped"):
            stem = write_finding(r, args)
            print(f"FINDING {r['kind']} (input {r['index']}, {r['mode']}, during {r['stage']}): "
                  f"{r['message'][:300]} -> {stem}.onnx", flush=True)

    profile = run_parallel(args, on_result)
    print_summary(tally, args, time.monotonic() - start, profile)
    return 1 if tally.findings else 0


if __name__ == "__main__":
    sys.exit(main())
