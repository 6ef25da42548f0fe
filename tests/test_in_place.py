"""In-place operations: the NPU block traversal, the hazard check and the simulator's hook.

Proof, in three parts:
- brute force (hypothesis): an operation executed block by block in traversal order on one
  shared byte buffer gives the non-overlapping result for every input exactly when
  `in_place_hazard` reports nothing;
- real command streams: Vela's compile of a 3x3 depthwise and of an ADD, with the OFM base
  register patched over the IFM, raises in the simulator at the unsafe shifts and is bit-exact
  against the reference interpreter at `min_in_place_shift`;
- `min_in_place_shift` is the smallest safe multiple of 16 (every smaller one has a hazard).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cascader import _core, load_model, save_model, zoo
from cascader.errors import BinaryError, CascaderError, InvalidArgumentError
from cascader.memory import offline_memory_allocation
from cascader.sim import block_traversal, in_place_hazard, min_in_place_shift, npu_calls, simulate

ES = {"int8": 1, "int16": 2}


def feature_map(base: int, shape: tuple[int, int, int], dtype: str = "int8", layout: str = "NHWC") -> dict:
    """A one-tile feature map dict, as `cascader.sim.decode` gives them, with packed strides."""
    h, w, c = shape
    es = ES[dtype]
    if layout == "NHWC":
        strides = (w * c * es, c * es, es)
    else:  # NHCWB16: 16-channel bricks, each brick a W x 16 plane of the row
        strides = (math.ceil(c / 16) * w * 16 * es, 16 * es, w * 16 * es)
    return dict(region=1, base=[base] * 4, shape=shape, tiles=(h, h, w), strides=strides, dtype=dtype,
                layout=layout, zero_point=0)


def address(fm: dict, y: int, x: int, c: int) -> int:
    sy, sx, sc = fm["strides"]
    es = ES[fm["dtype"]]
    if fm["layout"] == "NHWC":
        return fm["base"][0] + y * sy + x * sx + c * es
    return fm["base"][0] + y * sy + x * sx + (c // 16) * sc + (c % 16) * es


def operation(kind: str, ofm_shape, ifm_depth: int, kernel=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0),
              block=(1, 1, 1), ifm_base=4096, ofm_base=0, dtypes=("int8", "int8"), layouts=("NHWC", "NHWC"),
              broadcast=(False, False, False)) -> dict:
    oh, ow, oc = ofm_shape
    pt, pl, pb, pr = padding
    ih = oh if kind == "elementwise" else (oh - 1) * stride[0] + kernel[0] - pt - pb
    iw = ow if kind == "elementwise" else (ow - 1) * stride[1] + kernel[1] - pl - pr
    op = dict(kind=kind, word_offset=0, ifm=feature_map(ifm_base, (ih, iw, ifm_depth), dtypes[0], layouts[0]),
              ofm=feature_map(ofm_base, ofm_shape, dtypes[1], layouts[1]),
              kernel=dict(height=kernel[0], width=kernel[1], stride=stride, dilation=(1, 1), part_kernel_first=False),
              padding=padding, block=block, ifm_upscale=0)
    if kind == "pool":
        op["sub_op"] = "AVERAGE"
    if kind == "elementwise":
        op["sub_op"] = "ADD"
        shape2 = tuple(1 if b else s for b, s in zip(broadcast, ofm_shape))
        op["ifm2"] = feature_map(30000, shape2, dtypes[0], layouts[0])
        op["ifm2_scalar"] = None
        op["broadcast"] = broadcast
    return op


# --- the traversal ------------------------------------------------------------------------------


def test_blocks_go_depth_then_width_then_height():
    op = operation("depthwise", (4, 6, 32), 32, kernel=(3, 3), padding=(1, 1, 1, 1), block=(2, 4, 16))
    order = [(b.ofm[0][0], b.ofm[1][0], b.ofm[2][0]) for b in block_traversal(op)]
    assert order == [(y, x, c) for y in (0, 2) for x in (0, 4) for c in (0, 16)]
    last = block_traversal(op)[-1]
    assert last.ofm == ((2, 4), (4, 6), (16, 32))  # clipped at the OFM edge
    # 3x3 same: one row and column of halo either side, clipped to the IFM; own channels only
    assert last.ifm == ((1, 4), (3, 6), (16, 32))


def test_footprints_by_kind():
    conv = operation("conv", (4, 4, 8), 5, kernel=(3, 3), stride=(2, 2), block=(2, 2, 8))
    assert [b.ifm for b in block_traversal(conv)][:2] == [((0, 5), (0, 5), (0, 5)), ((0, 5), (4, 9), (0, 5))]
    add = operation("elementwise", (4, 4, 8), 8, block=(2, 4, 8), broadcast=(True, False, True))
    first, second = block_traversal(add)
    assert first.ifm == first.ofm == ((0, 2), (0, 4), (0, 8))
    assert second.ifm2 == ((0, 1), (0, 4), (0, 1))  # broadcast axes read their single element
    assert block_traversal(operation("depthwise", (2, 2, 8), 8, kernel=(3, 3), block=(1, 1, 8)))[3].ifm == \
        ((1, 4), (1, 4), (0, 8))


def test_upscaled_ifm_maps_back_to_source_rows():
    # transpose convolution: the kernel walks the 2x upscaled IFM; block rows 4-7 reach
    # upscaled rows 3-7, source rows 1-3
    op = operation("conv", (8, 8, 4), 4, kernel=(3, 3), padding=(1, 1, 1, 1), block=(4, 8, 4))
    op["ifm_upscale"] = 2
    assert [b.ifm for b in block_traversal(op)] == [((0, 3), (0, 4), (0, 4)), ((1, 4), (0, 4), (0, 4))]


def test_ofm_over_ifm2_is_checked_too():
    op = operation("elementwise", (4, 4, 16), 16, block=(2, 4, 16))
    op["ofm"]["base"] = [op["ifm2"]["base"][0] + 16] * 4  # 16 B above IFM2: writes run ahead
    hazard = in_place_hazard(op)
    assert hazard is not None and hazard.operand == "IFM2" and (hazard.reader, hazard.writer) == (1, 0)
    assert in_place_hazard(op, ifm2=False) is None  # IFM2 in other memory: nothing to overwrite


def test_bad_operation_dicts_are_named():
    op = operation("depthwise", (4, 4, 8), 8, block=(0, 4, 8))
    with pytest.raises(InvalidArgumentError, match="positive block config"):
        block_traversal(op)
    op = operation("depthwise", (4, 4, 8), 8)
    del op["ofm"]["strides"]
    with pytest.raises(InvalidArgumentError, match="'strides'"):
        in_place_hazard(op)
    op = operation("depthwise", (4, 4, 8), 8)
    op["ifm"]["layout"] = "NCHW"
    with pytest.raises(InvalidArgumentError, match="NHWC or NHCWB16"):
        min_in_place_shift(op)
    op = operation("depthwise", (4, 4, 8), 8, ofm_base=-16)
    with pytest.raises(InvalidArgumentError, match="non-negative tile addresses"):
        in_place_hazard(op)
    # a hostile stream: 1x1x1 blocks over a large in-place map; bounded, and named
    op = operation("elementwise", (2048, 2048, 16), 16, block=(1, 1, 1), ofm_base=4096)
    with pytest.raises(BinaryError, match="too many OFM blocks"):
        in_place_hazard(op)


# --- brute force --------------------------------------------------------------------------------


def _load(buf: np.ndarray, at: int, es: int) -> int:
    return int.from_bytes(buf[at : at + es].tobytes(), "little")


def _mixed(buf: np.ndarray, at: int, es: int) -> int:
    """An input element folded so that a change in any of its bytes shows in the low byte of
    the output (an 8-bit OFM keeps only that)."""
    v = _load(buf, at, es)
    return v + 7 * (v >> 8)


def _store(buf: np.ndarray, at: int, es: int, value: int) -> None:
    buf[at : at + es] = np.frombuffer((value % (1 << (8 * es))).to_bytes(es, "little"), dtype=np.uint8)


def _output(op: dict, weights: np.ndarray, buf: np.ndarray, y: int, x: int, c: int) -> int:
    """One OFM element as a weighted sum of exactly the inputs it depends on (odd weights, so
    any single changed input changes it)."""
    ifm, es = op["ifm"], ES[op["ifm"]["dtype"]]
    if op["kind"] == "elementwise":
        fm2 = op["ifm2"]
        b = [0 if bc else v for bc, v in zip(op["broadcast"], (y, x, c))]
        return 3 * _mixed(buf, address(ifm, y, x, c), es) + 5 * _mixed(buf, address(fm2, *b), es)
    (ih, iw, ic), k = ifm["shape"], op["kernel"]
    (sy, sx), (pt, pl) = k["stride"], op["padding"][:2]
    total = 0
    for ky in range(k["height"]):
        for kx in range(k["width"]):
            iy, ix = y * sy - pt + ky, x * sx - pl + kx
            if not (0 <= iy < ih and 0 <= ix < iw):
                continue
            channels = range(ic) if op["kind"] == "conv" else (c,)
            for i in channels:
                total += int(weights[c, ky, kx, i % weights.shape[3]]) * _mixed(buf, address(ifm, iy, ix, i), es)
    return total


def _blocks_in_order(op: dict, weights: np.ndarray, buf: np.ndarray) -> None:
    """Each block reads all it needs, then writes its OFM block, in the NPU's order."""
    ofm, oes = op["ofm"], ES[op["ofm"]["dtype"]]
    for block in block_traversal(op):
        (y0, y1), (x0, x1), (c0, c1) = block.ofm
        values = {(y, x, c): _output(op, weights, buf, y, x, c)
                  for y in range(y0, y1) for x in range(x0, x1) for c in range(c0, c1)}
        for (y, x, c), v in values.items():
            _store(buf, address(ofm, y, x, c), oes, v)


@st.composite
def in_place_cases(draw):
    kind = draw(st.sampled_from(["depthwise", "pool", "conv", "elementwise"]))
    oh, ow, oc = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    ic = draw(st.integers(1, 4)) if kind == "conv" else oc
    kernel, stride, padding, broadcast = (1, 1), (1, 1), (0, 0, 0, 0), (False, False, False)
    if kind == "elementwise":
        broadcast = tuple(draw(st.lists(st.booleans(), min_size=3, max_size=3)))
    else:
        kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        # stride <= kernel: then the footprint box is exactly the elements the outputs use
        stride = (draw(st.integers(1, kernel[0])), draw(st.integers(1, kernel[1])))
        padding = (draw(st.integers(0, kernel[0] - 1)), draw(st.integers(0, kernel[1] - 1)),
                   draw(st.integers(0, kernel[0] - 1)), draw(st.integers(0, kernel[1] - 1)))
        if (oh - 1) * stride[0] + kernel[0] - padding[0] - padding[2] < 1:
            padding = (padding[0], padding[1], 0, padding[3])
        if (ow - 1) * stride[1] + kernel[1] - padding[1] - padding[3] < 1:
            padding = (padding[0], padding[1], padding[2], 0)
    block = (draw(st.integers(1, oh)), draw(st.integers(1, ow)), draw(st.integers(1, oc)))
    dtypes = (draw(st.sampled_from(["int8", "int16"])), draw(st.sampled_from(["int8", "int16"])))
    layouts = (draw(st.sampled_from(["NHWC", "NHCWB16"])), draw(st.sampled_from(["NHWC", "NHCWB16"])))
    # The OFM from fully below to fully above the IFM, in single bytes (not only 16 B steps).
    reach = oh * ow * 16 * 2 + 16
    shift = draw(st.one_of(st.integers(-32, 160), st.integers(-reach, reach)))  # mostly overlapping
    op = operation(kind, (oh, ow, oc), ic, kernel, stride, padding, block, 4096, 4096 - shift, dtypes, layouts,
                   broadcast)
    return op, shift


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(in_place_cases(), st.randoms(use_true_random=False))
def test_brute_force_agrees_with_the_hazard_check(case, rnd):
    op, _ = case
    hazard = in_place_hazard(op)
    oh, ow, oc = op["ofm"]["shape"]
    rng = np.random.default_rng(rnd.randint(0, 2**32))
    weights = rng.integers(0, 128, size=(oc, 3, 3, 4)) * 2 + 1
    ofm, oes = op["ofm"], ES[op["ofm"]["dtype"]]
    blocks = block_traversal(op)
    first_wrong = []
    for _ in range(4):  # random data: an overwrite that happens to write equal bytes is invisible once
        buf = rng.integers(0, 256, size=40000, dtype=np.uint8)
        pristine = buf.copy()
        expected = {(y, x, c): _output(op, weights, pristine, y, x, c) % (1 << (8 * oes))
                    for y in range(oh) for x in range(ow) for c in range(oc)}
        _blocks_in_order(op, weights, buf)
        wrong = [i for i, b in enumerate(blocks)
                 if any(_load(buf, address(ofm, y, x, c), oes) != expected[(y, x, c)]
                        for y in range(*b.ofm[0]) for x in range(*b.ofm[1]) for c in range(*b.ofm[2]))]
        if wrong:
            first_wrong.append(wrong[0])
    if hazard is None:
        assert not first_wrong, f"no hazard reported, yet blocks {first_wrong} differ"
    else:
        assert first_wrong, f"hazard reported but every input gave the non-overlapping result: {hazard.message}"
        # nothing before the first hazardous block can be hurt
        assert min(first_wrong) >= hazard.reader and hazard.writer < hazard.reader


@settings(max_examples=150, deadline=None)
@given(in_place_cases())
def test_min_shift_is_the_smallest_safe_multiple_of_16(case):
    op, _ = case
    shift = min_in_place_shift(op)
    assert shift >= 0 and shift % 16 == 0

    def at(s: int) -> dict:
        o = copy.deepcopy(op)
        o["ofm"]["base"] = [o["ifm"]["base"][0] - s] * 4
        return o

    assert in_place_hazard(at(shift), ifm2=False) is None
    assert all(in_place_hazard(at(s), ifm2=False) is not None for s in range(0, shift, 16))
    if op["kind"] == "elementwise" and op["ifm"]["dtype"] == op["ofm"]["dtype"] and \
            op["ifm"]["layout"] == op["ofm"]["layout"]:
        assert shift == 0  # same-shape elementwise: each block reads only what it then overwrites


def test_offset_zero_depthwise_is_unsafe_and_one_row_down_is_safe():
    # TinyEngine's in-place depthwise at offset 0 on the NPU's block order: block row 1 reads
    # IFM row 3, which block row 0 (OFM rows 0-3) has overwritten.
    op = operation("depthwise", (8, 8, 16), 16, kernel=(3, 3), padding=(1, 1, 1, 1), block=(4, 8, 16),
                   ifm_base=4096, ofm_base=4096)
    hazard = in_place_hazard(op)
    assert hazard is not None and (hazard.reader, hazard.writer) == (1, 0)
    assert "OFM block 1 (y 4..7" in hazard.message
    assert min_in_place_shift(op) == 8 * 16  # one IFM row


def test_search_budget_falls_back_to_the_trailing_shift_only_when_asked():
    # an int16 OFM from an int8 IFM outruns it: the safe shift grows with every block
    op = operation("depthwise", (16, 16, 16), 16, kernel=(3, 3), padding=(1, 1, 1, 1), block=(2, 4, 16),
                   dtypes=("int8", "int16"), ifm_base=1 << 20, ofm_base=1 << 20)
    exact = min_in_place_shift(op)
    with pytest.raises(CascaderError, match="exact=False"):
        min_in_place_shift(op, budget=10)
    trailing = min_in_place_shift(op, exact=False, budget=10)
    assert trailing >= exact and trailing % 16 == 0
    op["ofm"]["base"] = [op["ifm"]["base"][0] - trailing] * 4
    assert in_place_hazard(op, ifm2=False) is None


# --- Vela's command streams, patched in place ---------------------------------------------------

OFM_BASE0 = 0x010  # cmd1 opcode of the OFM BASE0 register


def _vela(model, name: str, tmp_path: Path):
    pytest.importorskip("ethosu.vela")
    pytest.importorskip("ai_edge_litert")
    from cascader.vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela

    path = tmp_path / f"{name}.tflite"
    path.write_bytes(save_model(model))
    return path, compile_with_vela(path, VelaConfig("ethos-u55-128", "Performance", UNLIMITED_SRAM)).path


def _the_operation(binary: Path, kind: str):
    (call,) = npu_calls(load_model(binary))
    decoded = _core.decode_driver_payload(call.payload)
    (op,) = [o for o in decoded["operations"] if o["kind"] == kind]
    return call, decoded, op


def _with_ofm_base(binary: Path, new_base: int):
    """The binary with its one block operation's OFM BASE0 register (and the OFM tensor's
    arena offset, so `simulate` reads the output from there) moved to `new_base`."""
    model = load_model(binary)
    (call,) = npu_calls(model)
    decoded = _core.decode_driver_payload(call.payload)
    (op,) = [o for o in decoded["operations"] if o["kind"] != "dma"]
    words = np.frombuffer(call.payload, dtype="<u4").copy()
    start, at, i = decoded["command_stream_word"], None, decoded["command_stream_word"]
    while i < start + op["word_offset"]:  # replay the command/payload framing up to the operation
        code = int(words[i]) & 0xFFFF
        if (code >> 14) & 3 == 1:
            if code & 0x3FF == OFM_BASE0:
                at = i + 1
            i += 2
        else:
            i += 1
    assert at is not None
    words[at] = new_base
    sg = model.main
    sg.tensors[sg.operators[call.index].inputs[0]].data = words.view(np.uint8)
    offsets = dict(call.arena_offsets)
    (ofm_tensor,) = call.ofms
    offsets[ofm_tensor] = offsets[call.scratch_tensor] + new_base
    model.add_metadata("OfflineMemoryAllocation", offline_memory_allocation(len(sg.tensors), offsets))
    return model


def _check_shifts(source: Path, binary: Path, kind: str, unsafe: list[int], safe: int) -> None:
    from cascader.reference import ReferenceInterpreter, random_inputs

    _, _, op = _the_operation(binary, kind)
    ifm_base = op["ifm"]["base"][0]
    original = load_model(source)
    inputs = random_inputs(original, 0)
    for shift in unsafe:
        with pytest.raises(BinaryError, match=rf"\({kind}\): the OFM overwrites its IFM"):
            simulate(_with_ofm_base(binary, ifm_base - shift), inputs)
    got = simulate(_with_ofm_base(binary, ifm_base - safe), inputs)
    for g, e in zip(got, ReferenceInterpreter(original).run(inputs)):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name, shape, expected_shift", [
    ("dw_3x3_s1_same", (1, 16, 16, 8), 16 * 8),  # Vela's 12x16 blocks span the width: one IFM row
    ("dw_3x3_24x16x16", (1, 24, 16, 16), None),  # 8x10 blocks: the next block in a row reads back
])
def test_vela_depthwise_in_place(tmp_path, name, shape, expected_shift):
    source, binary = _vela(zoo.depthwise_conv2d(shape), name, tmp_path)
    _, _, op = _the_operation(binary, "depthwise")
    assert len(block_traversal(op)) > 1, "a single block is trivially safe; the case needs several"
    shift = min_in_place_shift(op)
    assert shift > 0 and shift == (expected_shift or shift)
    _check_shifts(source, binary, "depthwise", unsafe=[0, shift - 16], safe=shift)


def test_vela_add_in_place(tmp_path):
    source, binary = _vela(zoo.add((1, 48, 48, 32)), "add", tmp_path)
    _, _, op = _the_operation(binary, "elementwise")
    assert len(block_traversal(op)) > 1
    assert min_in_place_shift(op) == 0
    # 16 B "less" than 0: the OFM starts 16 B above the IFM, so writes run ahead of reads
    _check_shifts(source, binary, "elementwise", unsafe=[-16], safe=0)
