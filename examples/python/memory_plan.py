"""Prints the memory report of a program and draws its plan.

    python examples/python/memory_plan.py [OUT.png|OUT.svg]

Uses the tensor-level program of add_mul_planned.py when the planner is there to
place it, else the hand-placed one of add_mul.py.
"""

import sys

import stowage as sw
import add_mul
import add_mul_planned


def compiled():
    try:
        return "planned", sw.compile(add_mul_planned.build())
    except sw.StowageError as e:
        if "'empty'" not in str(e):
            raise
        return "placed by hand", sw.compile(add_mul.build())


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "memory_plan.png"
    how, exe = compiled()
    print(f"memory of '{exe.entry_function()}' ({how}):")
    print(f"{'scope':<14}{'planned':>10}{'lower bound':>13}{'naive':>10}{'reuse only':>12}{'seconds':>10}")
    for scope, r in exe.memory_report.items():
        cells = [r[k] for k in ("planned_bytes", "lower_bound", "naive_bytes", "reuse_only_bytes")]
        seconds = "-" if r["seconds"] is None else f"{r['seconds']:.4f}"
        print(f"{scope:<14}" + "".join(f"{'-' if c is None else c:>{w}}" for c, w in zip(cells, (10, 13, 10, 12)))
              + f"{seconds:>10}")
    sw.plot_memory(exe, path)
    print(f"picture: {path}")


if __name__ == "__main__":
    main()
