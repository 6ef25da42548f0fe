"""Pictures of compiler results (matplotlib, imported lazily: `pip install cascader[plot]`)."""

from __future__ import annotations

from typing import Any

from .memory import MemoryLayout

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
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
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
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
