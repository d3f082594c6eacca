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


def _is_image_scope(scope):
    """Whether the layout places the scope's tensors as rectangles of pixels."""
    storages = scope["storages"]
    return bool(storages) and all("width" in s and all("x" in t for t in s["tensors"]) for s in storages)


def _draw_image(ax, storage, steps, cmap):
    """One image storage: its tensors as rectangles at their pixels (row 0 at the
    top, as images are addressed), coloured by when they are born; tensors alive
    at different times may share pixels, drawn over each other."""
    from matplotlib.patches import Rectangle

    width, height = max(storage["width"], 1), max(storage["height"], 1)
    ax.add_patch(Rectangle((0, 0), width, height, fill=False, edgecolor="0.35", linestyle="--", linewidth=1))
    names = {}  # rectangle -> names of the tensors that took it, in order of birth
    for t in sorted(storage["tensors"], key=lambda t: t["start"]):
        color = cmap(t["start"] / max(steps, 1))
        ax.add_patch(Rectangle((t["x"], t["y"]), t["width"], t["height"], facecolor=color, edgecolor="black",
                               linewidth=0.6, alpha=0.75))
        names.setdefault((t["x"], t["y"], t["width"], t["height"]), []).append(t["name"])
    for (x, y, w, h), taken in names.items():
        if w * 12 >= width and h * 12 >= height:  # names of tiny rectangles would only clutter
            ax.text(x + w / 2, y + h / 2, "\n".join(taken), ha="center", va="center", fontsize=6)
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_aspect("auto")
    ax.set_xlabel("x (pixels)", fontsize=8)
    ax.set_ylabel("y (pixels)", fontsize=8)
    ax.tick_params(labelsize=7)
    count = len(storage["tensors"])
    ax.set_title(f"{storage['name']}: {width} x {height} px, {_bytes_text(storage['nbytes'])}, "
                 f"{count} tensor{'s' if count != 1 else ''}", fontsize=8)


def _draw_image_scope(panel, scope, steps, cmap):
    """A row of panels, one per image storage, and a colour bar for time."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    storages = scope["storages"]
    axes = panel.subplots(1, len(storages), squeeze=False)[0]
    for ax, storage in zip(axes, storages):
        _draw_image(ax, storage, steps, cmap)
    count = len(storages)
    panel.suptitle(
        f"scope {scope['scope']}: {count} image{'s' if count != 1 else ''}, planned "
        f"{_bytes_text(scope['storage_bytes'])}, lower bound {_bytes_text(scope['lower_bound'])} (pixel bytes)",
        fontsize=10)
    bar = panel.colorbar(ScalarMappable(Normalize(0, max(steps, 1)), cmap), ax=list(axes), fraction=0.03, pad=0.02)
    bar.set_label("birth (binding index)", fontsize=8)
    bar.ax.tick_params(labelsize=7)


def plot_memory(executable, path, function=None):
    """Draws where every tensor of ``function`` (default: the entry function)
    lives: per buffer scope, byte offset over time, each tensor a labelled
    rectangle inside its storage (storages of one scope stacked), and the
    lower bound (most bytes alive at once) as a dotted line; per image scope,
    one panel per image storage with its tensors as rectangles at their pixels
    (x, y), coloured by birth (tensors alive at different times may share
    pixels). An executable loaded without its IR text draws image scopes like
    buffers. The format follows the suffix of ``path``: .png or .svg. Needs
    matplotlib."""
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

    from matplotlib import colormaps

    # A Figure without pyplot: no global state, no display needed.
    fig = Figure(figsize=(10, 1.0 + 3.4 * len(scopes)), dpi=110, layout="constrained")
    panels = fig.subfigures(len(scopes), 1, squeeze=False)[:, 0]
    colors = [
        "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
        "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f",
    ]  # fmt: skip
    for panel, scope in zip(panels, scopes):
        if _is_image_scope(scope):
            _draw_image_scope(panel, scope, layout["steps"], colormaps["viridis"])
        else:
            _draw_scope(panel.subplots(), scope, layout["steps"], colors)
    fig.suptitle(f"memory of function '{layout['function']}'")
    with atomic_path(path) as temp:
        fig.savefig(temp, format=suffix[1:])
