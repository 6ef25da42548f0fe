"""Pictures of compiler results (matplotlib, imported lazily: `pip install cascader[plot]`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from .memory import MemoryLayout

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


def plot_memory(layout: MemoryLayout, path: str | None = None, title: str = "", label_min_fraction: float = 0.04) -> Any:
    """Address over time: one rectangle per buffer, coloured by kind, one panel per arena.

    The dashed line is the arena's lower bound (peak live bytes); the solid line its size.
    Buffers taller than `label_min_fraction` of the arena are labelled with their name.
    Returns the matplotlib Figure; saves it to `path` when given.
    """
    plt = _pyplot(path)
    from matplotlib.patches import Patch, Rectangle

    arenas = [a for a in layout.sizes if a not in ("flash",) and any(b.arena == a for b in layout.buffers)]
    fig, axes = plt.subplots(len(arenas) or 1, 1, figsize=(12, 4.5 * max(len(arenas), 1)), squeeze=False)
    for ax, arena in zip(axes[:, 0], arenas):
        members = [b for b in layout.buffers if b.arena == arena]
        size = layout.sizes[arena]
        t_end = max(b.end for b in members)
        for b in members:
            ax.add_patch(Rectangle((b.start, b.offset), b.end - b.start, b.size, facecolor=KIND_COLOURS.get(b.kind, "#cccccc"),
                                   edgecolor="black", linewidth=0.4, alpha=0.85))
            if size and b.size >= label_min_fraction * size and b.name:
                ax.text(b.start + 0.05, b.offset + b.size / 2, b.name[:24], fontsize=6, va="center", clip_on=True)
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
        ax.legend(handles=handles + ax.get_legend_handles_labels()[0], loc="upper right", fontsize=7)
    return _finish(fig, path)


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
    """The SRAM-versus-cycles frontier: each proposal a point, the chosen one starred.

    `chosen` is (SRAM bytes, cycles) of the compiled binary; `others` are labelled points of
    other compilers or settings (label, SRAM bytes, cycles), e.g. Vela's Size and Performance.
    The frontier's cycles are the planner's predictions, which cost every stripe separately;
    binaries are measured by the estimator, which costs an operation's stripes together as
    Vela's does, so a compiled point can sit below the frontier.
    """
    plt = _pyplot(path)
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [p.sram_bytes / 1024 for p in frontier.points]
    ys = [p.cycles for p in frontier.points]
    ax.step(xs, ys, where="post", color="#4c72b0", linewidth=1, alpha=0.6)
    ax.plot(xs, ys, "o", color="#4c72b0", label=f"cascader frontier ({len(xs)} proposals)")
    if chosen is not None:
        ax.plot([chosen[0] / 1024], [chosen[1]], "*", color="#c44e52", markersize=16, label="compiled (binary)",
                zorder=5)
    for k, (label, sram, cycles) in enumerate(others):
        ax.plot([sram / 1024], [cycles], "s", markersize=8, color=f"C{k + 1}", label=label, zorder=4)
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
