"""Pictures of compiler results (matplotlib, imported lazily: `pip install cascader[plot]`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from .memory import MemoryLayout, PlacedBuffer

if TYPE_CHECKING:
    from .planner import Frontier
    from .records import Records

# One colour per buffer kind, grouped as the issue asks: feature maps, stripe buffers, weights, copies.
KIND_COLOURS = {
    "feature_map": "#4c72b0",
    "stripe_buffer": "#55a868",
    "weights": "#dd8452",
    "double_weights": "#c44e52",
    "copy": "#8172b3",
    "lut": "#937860",
    "scratch": "#8c8c8c",
}


def plot_memory(layout: MemoryLayout, path: str | None = None, title: str = "") -> Any:
    """Address over time: one rectangle per buffer, coloured by kind, one panel per arena.

    The dashed line is the arena's lower bound (peak live bytes); the solid line its size.
    A buffer is labelled with its name where the name fits inside its rectangle; the legend
    sits to the right of the panel, off the data.
    Returns the matplotlib Figure; saves it to `path` when given.
    """
    plt = _pyplot(path)
    from matplotlib.patches import Patch, Rectangle

    arenas = [a for a in layout.sizes if a not in ("flash",) and any(b.arena == a for b in layout.buffers)]
    fig, axes = plt.subplots(len(arenas) or 1, 1, figsize=(12, 4.5 * max(len(arenas), 1)), squeeze=False)
    drawn: list[tuple[Any, list[tuple[PlacedBuffer, Any]]]] = []
    for ax, arena in zip(axes[:, 0], arenas):
        members = [b for b in layout.buffers if b.arena == arena]
        size = layout.sizes[arena]
        t_end = max(b.end for b in members)
        rectangles = [(b, ax.add_patch(Rectangle((b.start, b.offset), b.end - b.start, b.size,
                                                 facecolor=KIND_COLOURS.get(b.kind, "#cccccc"),
                                                 edgecolor="black", linewidth=0.4, alpha=0.85)))
                      for b in members]
        drawn.append((ax, rectangles))
        lb = layout.lower_bounds.get(arena)
        if lb:
            ax.axhline(lb, color="red", linestyle="--", linewidth=1.2, zorder=4, label=f"lower bound {lb:,} B")
        ax.axhline(size, color="black", linewidth=1, zorder=3, label=f"arena {size:,} B")
        ax.set_xlim(0, t_end)
        ax.set_ylim(0, max(size, lb or 0) * 1.05 or 1)
        ax.set_xlabel("schedule step")
        ax.set_ylabel("address (bytes)")
        ax.set_title(f"{title + ': ' if title else ''}{arena}")
        kinds = sorted({b.kind for b in members})
        handles = [Patch(facecolor=KIND_COLOURS.get(k, "#cccccc"), label=k) for k in kinds]
        # Outside the axes, to their right: the arena line and the largest buffers reach the
        # top corners, where a legend inside would hide them. tight_layout makes room for it.
        ax.legend(handles=handles + ax.get_legend_handles_labels()[0], loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0, fontsize=7)
    # Labels are measured in pixels, so the panels must have their final size first.
    fig.tight_layout()
    for ax, rectangles in drawn:
        _label_buffers(ax, rectangles)
    return _finish(fig, path)


# Buffer labels: their font size (points), and the room (pixels) they keep from the edges of
# their rectangle so that the outline stays visible.
_LABEL_FONTSIZE = 6
_LABEL_MARGIN = 1.5


def _label_candidates(name: str) -> list[tuple[str, float]]:
    """(text, rotation) to try in turn: the name across, then without its parenthesised
    detail ("block1/expand (rolling, 9 rows)" -> "block1/expand"), then both upright for a
    tall narrow rectangle (a short-lived buffer of many bytes)."""
    short = name.split(" (")[0]
    texts = [name] if short == name else [name, short]
    return [(t, r) for r in (0.0, 90.0) for t in texts]


def _label_buffers(ax: Any, rectangles: "list[tuple[PlacedBuffer, Any]]") -> None:
    """Name each buffer inside its rectangle where the name fits and crosses no other label
    (aliased buffers share bytes and steps), largest rectangles first; others stay unnamed."""
    placed: list[Any] = []
    for buffer, patch in sorted(rectangles, key=lambda bp: (bp[0].end - bp[0].start) * bp[0].size, reverse=True):
        if not buffer.name:
            continue
        room = patch.get_window_extent()
        centre = (buffer.start + (buffer.end - buffer.start) / 2, buffer.offset + buffer.size / 2)
        for text, rotation in _label_candidates(buffer.name):
            label = ax.text(*centre, text, fontsize=_LABEL_FONTSIZE, rotation=rotation, ha="center", va="center",
                            rotation_mode="anchor", clip_on=True)
            extent = label.get_window_extent()
            fits = (extent.x0 >= room.x0 + _LABEL_MARGIN and extent.x1 <= room.x1 - _LABEL_MARGIN
                    and extent.y0 >= room.y0 + _LABEL_MARGIN and extent.y1 <= room.y1 - _LABEL_MARGIN)
            if fits and not any(extent.overlaps(other) for other in placed):
                placed.append(extent)
                break
            label.remove()


def _pyplot(path: str | None) -> Any:
    """pyplot, on the file backend when only a file is wanted (no display needed)."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _finish(fig: Any, path: str | None) -> Any:
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def plot_pareto(frontier: "Frontier", chosen: tuple[int, float] | None = None,
                others: Iterable[tuple[str, int, float]] = (), path: str | None = None, title: str = "") -> Any:
    """The SRAM-versus-cycles frontier, the chosen binary starred.

    `chosen` is (SRAM bytes, cycles) of the compiled binary; `others` are labelled points of
    other compilers or settings (label, SRAM bytes, cycles), e.g. Vela's Size and Performance,
    on the same estimator. A compiled frontier (`cascader.plan`) is made of binaries on that
    yardstick, so a binary is on it or above it; a planned one (`compiled=False`) shows the
    planner's predictions, which cost every stripe as it runs, and is labelled so. The floor
    (the least SRAM any schedule needs) is a vertical line labelled with its operator.
    """
    plt = _pyplot(path)
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [p.sram_bytes / 1024 for p in frontier.points]
    ys = [p.cycles for p in frontier.points]
    ax.step(xs, ys, where="post", color="#4c72b0", linewidth=1, alpha=0.6)
    kind = "binaries" if frontier.compiled else "proposals, planned"
    ax.plot(xs, ys, "o", color="#4c72b0", label=f"cascader frontier ({len(xs)} {kind})")
    if chosen is not None:
        ax.plot([chosen[0] / 1024], [chosen[1]], "*", color="#c44e52", markersize=16, label="compiled (binary)",
                zorder=5)
    for k, (label, sram, cycles) in enumerate(others):
        ax.plot([sram / 1024], [cycles], "s", markersize=8, color=f"C{k + 1}", label=label, zorder=4)
    if frontier.floor_bytes:
        ax.axvline(frontier.floor_bytes / 1024, color="#55a868", linestyle="--", linewidth=1,
                   label=f"floor {frontier.floor_bytes / 1024:.1f} KiB ({frontier.floor_operator})")
    ax.set_xlabel("SRAM (KiB)")
    ax.set_ylabel("cycles per inference")
    ax.set_title(title or f"SRAM vs cycles on {frontier.accelerator}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, path)


def plot_layers(layers: "Records", path: str | None = None, title: str = "") -> Any:
    """Cycles (bars) and SRAM in use (line) per layer, in execution order; CPU operators grey."""
    plt = _pyplot(path)
    fig, ax = plt.subplots(figsize=(max(8, 0.12 * len(layers)), 4.5))
    x = [r.index for r in layers]
    ax.bar(x, [r.cycles or 0 for r in layers], color=["#4c72b0" if r.target == "NPU" else "#8c8c8c" for r in layers],
           width=0.8)
    for r in layers:
        if r.target == "CPU":
            ax.axvspan(r.index - 0.4, r.index + 0.4, color="#8c8c8c", alpha=0.3)
    ax.set_xlabel("layer (execution order; grey: CPU)")
    ax.set_ylabel("cycles", color="#4c72b0")
    sram = ax.twinx()
    sram.plot(x, [(r.sram_live or 0) / 1024 for r in layers], color="#c44e52", marker=".", linewidth=1)
    sram.set_ylabel("SRAM in use (KiB)", color="#c44e52")
    sram.set_ylim(bottom=0)
    ax.set_title(title or "cycles and SRAM per layer")
    return _finish(fig, path)
