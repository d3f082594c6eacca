"""Pictures of memory plans."""

import os

from ._files import atomic_path
from .errors import InvalidInputError


def _bytes_text(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def _draw_scope(ax, scope, steps, colors):
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator

    base = 0
    color_index = 0
    for storage in scope["storages"]:
        ax.add_patch(
            Rectangle(
                (storage["start"], base),
                storage["end"] - storage["start"],
                storage["nbytes"],
                fill=False,
                edgecolor="0.35",
                linestyle="--",
                linewidth=1,
            )
        )
        ax.text(
            storage["start"] + 0.1,
            base + storage["nbytes"],
            f"storage {storage['name']}: {_bytes_text(storage['nbytes'])}",
            va="bottom",
            ha="left",
            fontsize=8,
            color="0.25",
        )
        for t in storage["tensors"]:
            width = t["end"] - t["start"]
            color = colors[color_index % len(colors)]
            color_index += 1
            ax.add_patch(
                Rectangle(
                    (t["start"], base + t["offset"]),
                    width,
                    t["nbytes"],
                    facecolor=color,
                    edgecolor="black",
                    linewidth=0.8,
                )
            )
            ax.text(
                t["start"] + width / 2,
                base + t["offset"] + t["nbytes"] / 2,
                f"{t['name']}\n{_bytes_text(t['nbytes'])}",
                ha="center",
                va="center",
                fontsize=8,
            )
        base += storage["nbytes"]

    lower_bound = scope["lower_bound"]
    ax.axhline(lower_bound, color="red", linestyle=":", linewidth=1.5, label=f"lower bound {_bytes_text(lower_bound)}")
    ax.set_xlim(0, max(steps, 1))
    top = max(base, lower_bound, 1)
    ax.set_ylim(0, top * 1.12)
    # Byte offsets read best at power-of-two steps: about 4 to 8 of them.
    ax.yaxis.set_major_locator(MultipleLocator(1 << max(0, (top // 8).bit_length())))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: _bytes_text(int(y)) if y >= 0 else ""))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("time (binding index)")
    ax.set_ylabel("offset")
    count = len(scope["storages"])
    ax.set_title(
        f"scope {scope['scope']}: {count} storage{'s' if count != 1 else ''}, "
        f"planned {_bytes_text(scope['storage_bytes'])}, lower bound {_bytes_text(lower_bound)}",
        fontsize=10,
    )
    ax.legend(loc="upper right", fontsize=8)


def plot_memory(executable, path, function=None):
    """Draws where every tensor of ``function`` (default: the entry function)
    lives: per memory scope, byte offset over time, each tensor a labelled
    rectangle inside its storage (storages of one scope stacked), and the
    lower bound (most bytes alive at once) as a dotted line. The format follows
    the suffix of ``path``: .png or .svg. Needs matplotlib."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".png", ".svg"):
        raise InvalidInputError(f"plot_memory: argument 'path': '{path}' must end in .png or .svg")
    layout = executable.memory_layout(function)
    scopes = layout["scopes"]
    if not scopes:
        raise InvalidInputError(f"plot_memory: function '{layout['function']}' allocates no storage")
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError("plot_memory needs matplotlib: pip install 'stowage[plot]' (or pip install matplotlib)") from e

    # A Figure without pyplot: no global state, no display needed.
    fig = Figure(figsize=(10, 1.0 + 3.2 * len(scopes)), dpi=110)
    axes = fig.subplots(len(scopes), 1, squeeze=False)[:, 0]
    colors = [
        "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
        "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f",
    ]  # fmt: skip
    for ax, scope in zip(axes, scopes):
        _draw_scope(ax, scope, layout["steps"], colors)
    fig.suptitle(f"memory of function '{layout['function']}'")
    fig.tight_layout()
    with atomic_path(path) as temp:
        fig.savefig(temp, format=suffix[1:])
