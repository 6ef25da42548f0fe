"""How much in-place execution saves on real command streams, and what the check costs.

For every block operation in Vela's compile of the zoo networks (ethos-u55-128, Performance),
with Vela's own block configs: is the OFM safe at offset 0 over its IFM (TinyEngine's in-place
form), the smallest safe shift below it (`cascader.sim.min_in_place_shift`), and the bytes the
pair needs separately (IFM + OFM) against in place (shift + max(IFM, OFM - shift)). Whether
the IFM dies at that operation is the scheduler's business; this is the ceiling. Run as

    python -m cascader.bench.in_place [--models DIR] [--kinds depthwise,elementwise]
"""

from __future__ import annotations

import argparse
import copy
import glob
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import _core, load_model, save_model, zoo
from ..sim import block_traversal, in_place_hazard, npu_calls
from ..vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela


@dataclass
class InPlaceRow:
    model: str
    operation: int  # index among the stream's block operations
    kind: str
    ofm_shape: tuple[int, int, int]
    block: tuple[int, int, int]
    blocks: int
    ifm_bytes: int
    ofm_bytes: int
    safe_at_zero: bool
    min_shift: int
    vela_in_place: bool  # Vela already put the OFM over the IFM or IFM2
    exact: bool  # False: the search hit its budget; min_shift is the safe trailing bound
    seconds: float  # min_in_place_shift's time

    @property
    def separate_bytes(self) -> int:
        return self.ifm_bytes + self.ofm_bytes

    @property
    def in_place_bytes(self) -> int:
        return self.min_shift + max(self.ifm_bytes, self.ofm_bytes - self.min_shift)


def _bytes(fm: dict, rows: int) -> int:
    return rows * int(fm["strides"][0])  # one tile, rows of stride_y bytes (bricks included)


def analyse(binary: str | os.PathLike, name: str, kinds: tuple[str, ...]) -> list[InPlaceRow]:
    rows = []
    for call in npu_calls(load_model(binary)):
        ops = [o for o in _core.decode_driver_payload(call.payload)["operations"] if o["kind"] != "dma"]
        for i, op in enumerate(ops):
            if op["kind"] not in kinds:
                continue
            blocks = block_traversal(op)
            ifm_rows = max(b.ifm[0][1] for b in blocks)
            at_zero = copy.deepcopy(op)
            delta = op["ifm"]["base"][0] - op["ofm"]["base"][0]
            # tiles the map does not use may hold base 0; those stay put
            at_zero["ofm"]["base"] = [b + delta if b or t == 0 else 0 for t, b in enumerate(op["ofm"]["base"])]
            start = time.perf_counter()
            shift, exact = _core.min_in_place_shift(op)
            seconds = time.perf_counter() - start
            ofm_at, ofm_end = op["ofm"]["base"][0], op["ofm"]["base"][0] + _bytes(op["ofm"], op["ofm"]["shape"][0])
            inputs = [(op["ifm"], ifm_rows)]
            if op.get("ifm2") and op.get("ifm2_scalar") is None:
                inputs.append((op["ifm2"], 1 if op["broadcast"][0] else op["ofm"]["shape"][0]))
            overlap = any(fm["region"] == op["ofm"]["region"] and fm["base"][0] < ofm_end
                          and ofm_at < fm["base"][0] + _bytes(fm, rows) for fm, rows in inputs)
            rows.append(InPlaceRow(
                name, i, op["kind"] + (f" {op['sub_op']}" if "sub_op" in op else ""), tuple(op["ofm"]["shape"]),
                tuple(op["block"]), len(blocks), _bytes(op["ifm"], ifm_rows), _bytes(op["ofm"], op["ofm"]["shape"][0]),
                in_place_hazard(at_zero, ifm2=False) is None, shift, overlap, exact, seconds))
    return rows


def format_table(rows: list[InPlaceRow]) -> str:
    head = (f"{'model':28} {'op':>3} {'kind':18} {'OFM HxWxC':>12} {'block':>10} {'#blk':>5} {'IFM B':>8} "
            f"{'OFM B':>8} {'@0':>4} {'min shift':>10} {'separate':>9} {'in place':>9} {'saved':>6} {'vela':>5} "
            f"{'ms':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        saved = 1 - r.in_place_bytes / r.separate_bytes
        lines.append(
            f"{r.model:28} {r.operation:>3} {r.kind:18} {'x'.join(map(str, r.ofm_shape)):>12} "
            f"{'x'.join(map(str, r.block)):>10} {r.blocks:>5} {r.ifm_bytes:>8,} {r.ofm_bytes:>8,} "
            f"{'yes' if r.safe_at_zero else 'NO':>4} {r.min_shift:>9,}{' ' if r.exact else '*'} {r.separate_bytes:>9,} "
            f"{r.in_place_bytes:>9,} "
            f"{100 * saved:>5.1f}% {'yes' if r.vela_in_place else '-':>5} {1000 * r.seconds:>7.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="also every .tflite in this folder")
    parser.add_argument("--kinds", default="depthwise,elementwise,pool", help="operation kinds to report")
    args = parser.parse_args(argv)
    kinds = tuple(args.kinds.split(","))
    config = VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM)
    rows: list[InPlaceRow] = []
    with tempfile.TemporaryDirectory() as tmp:
        sources = []
        for name, build in zoo.MODELS.items():
            path = Path(tmp) / f"zoo_{name}.tflite"
            path.write_bytes(save_model(build()))
            sources.append(path)
        if args.models:
            sources += sorted(Path(p) for p in glob.glob(os.path.join(args.models, "*.tflite")))
        for path in sources:
            rows += analyse(compile_with_vela(path, config).path, path.stem, kinds)
    print(format_table(rows))
    unsafe = [r for r in rows if not r.safe_at_zero]
    print(f"\n{len(rows)} operations; {len(unsafe)} unsafe at offset 0 "
          f"({', '.join(sorted({r.kind for r in unsafe})) or 'none'}); "
          f"in place saves {sum(r.separate_bytes - r.in_place_bytes for r in rows):,} of "
          f"{sum(r.separate_bytes for r in rows):,} IFM+OFM bytes over these operations; "
          f"slowest min_in_place_shift {1000 * max((r.seconds for r in rows), default=0):.2f} ms; "
          f"{sum(not r.exact for r in rows)} shifts marked * are the safe trailing bound (search budget hit)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
