"""int16 EXP and LOG through one lookup of the table less an offset (#43, `lower_lut.lookup_offset`).

TFLite's int16 interpolation casts base + delta to int16 (it wraps); the NPU's lookup
saturates. Less an offset c, the wrap moves off every interval and one lookup is exact, then an
ADD of c wraps it back (the U85 writes the ADD's low half, the U55/U65 pick the low halves of
an int32 sum). Checked here: the offset's words against the reference's lookup on all 65,536
codes (independently of `lookup_offset`'s own check), the compiled forms bit-exact on every
code and on 2 seeds on U55-128, U65-256 and U85-128/256/512, the two-lookup form where no
offset exists, and the U85's cycles against Vela 5.2's single (inexact) lookup.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.frontend import lower_lut
from cascader.frontend.fixed_point import wrap16
from cascader.frontend.lower_lut import int16_samples, interpolation_lines, log_function, lookup_offset, lut_words
from cascader.tflite.builder import ModelBuilder, quantization
from conftest import compile_on_npu, cycles_against_vela

pytest.importorskip("ai_edge_litert")
from cascader.bench.simulate import validate  # noqa: E402
from cascader.operator_zoo import operator_model  # noqa: E402
from cascader.reference import ReferenceInterpreter  # noqa: E402

ACCELERATORS = ["ethos-u55-128", "ethos-u65-256", "ethos-u85-128", "ethos-u85-256", "ethos-u85-512"]
CODES = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 256, 256, 1)

# (opcode, input scale, output scale, offset): the operator zoo's EXP (one interval wraps), two
# wrapping intervals, EXP just past float's range, a LOG whose offset is far from 0, a LOG with a
# slope narrowed to int16 that never wraps (one plain lookup), an EXP that never wraps.
CASES = [("EXP", 0.02, 0.06, 1), ("EXP", 0.01, 0.001, 1), ("EXP", 0.003, 0.1, 1), ("LOG", 0.1, 0.0001, -7016),
         ("LOG", 1.0, 0.0001, 0), ("EXP", 0.001, 0.0001, 0)]


def _table(opcode: str, in_scale: float, out_scale: float) -> np.ndarray:
    fn = np.exp if opcode == "EXP" else log_function((out_scale, 0), "int16")
    return int16_samples(fn, (in_scale, 0), (out_scale, 0))


def _npu_lookup(words: bytes) -> np.ndarray:
    """Every int16 code through the NPU's 16-bit table: base + ((slope * r + 64) >> 7), saturated."""
    w = np.frombuffer(words, "<u4").astype(np.int64)
    base, slope = wrap16(w & 0xFFFF), wrap16(w >> 16)
    u = CODES.reshape(-1).astype(np.int64) + 32768
    return np.clip(base[u >> 7] + ((slope[u >> 7] * (u & 127) + 64) >> 7), -32768, 32767)


@pytest.mark.parametrize("opcode, in_scale, out_scale, offset", CASES)
def test_offset_lookup_is_the_reference_lookup(opcode: str, in_scale: float, out_scale: float, offset: int) -> None:
    table = _table(opcode, in_scale, out_scale)
    assert lookup_offset(table) == offset
    reference = wrap16(interpolation_lines(table)).reshape(-1)
    plain = _npu_lookup(lut_words(table))
    assert np.array_equal(plain, reference) == (offset == 0)
    assert np.array_equal(wrap16(_npu_lookup(lut_words(wrap16(table - offset))) + offset), reference)


def test_a_table_no_offset_fits() -> None:
    """Lines that together cross every cut 32767 + c: no single lookup is exact."""
    table = np.full(513, -32768, np.int64)
    # Lines 0..32511, 32767..256, 0..-1, -1..-32512, -32768..-257, -1..-32513 (slope 32768
    # narrowed), 32767..32768 (slope -65535 narrowed to 1), then flat.
    table[:8] = [0, 32767, 0, -1, -32768, -1, 32767, -32768]
    assert lookup_offset(table) is None


def _model(opcode: str, shape, in_scale: float, out_scale: float) -> cascader.Model:
    b = ModelBuilder()
    x = b.add_input("x", shape, "int16", quantization(in_scale, 0))
    y = b.add_tensor("y", shape, "int16", quantization(out_scale, 0))
    b.add_operator(opcode, [x], [y], version=2)
    b.mark_output(y)
    return b.build()


def _exact_on_every_code(tmp_path, model, accelerator: str, operations: int):
    path, compiled = compile_on_npu(tmp_path, model, accelerator, operations)
    result = validate(path, compiled.model, (0, 1))
    assert result.bit_exact, result.details
    ours = cascader.simulate(compiled, [CODES])[0]
    assert np.array_equal(ours, ReferenceInterpreter(model).run([CODES])[0])
    return compiled


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("opcode, in_scale, out_scale, offset", CASES)
def test_on_every_code(tmp_path, accelerator: str, opcode: str, in_scale: float, out_scale: float,
                       offset: int) -> None:
    """One lookup; with an offset an ADD (U85: wrapping) or an int32 ADD and the low halves."""
    u85 = accelerator.startswith("ethos-u85")
    operations = 1 if offset == 0 else 2 if u85 else 3
    compiled = _exact_on_every_code(tmp_path, _model(opcode, CODES.shape, in_scale, out_scale), accelerator, operations)
    if offset:
        add = next(s.lowered for s in compiled.schedule.operations if s.lowered.registers.get("sub_op") == "ADD")
        assert bool(add.registers.get("wrap_ofm")) == u85


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256", "ethos-u85-256"])
def test_two_lookups_where_no_offset_fits(tmp_path, monkeypatch, accelerator: str) -> None:
    """Where `lookup_offset` finds none, the base and the delta are two lookups summed with the wrap."""
    monkeypatch.setattr(lower_lut, "lookup_offset", lambda table: None)
    u85 = accelerator.startswith("ethos-u85")
    _exact_on_every_code(tmp_path, _model("EXP", CODES.shape, 0.02, 0.06), accelerator, 3 if u85 else 4)


@pytest.mark.parametrize("accelerator", ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512"])
def test_u85_cycles_against_vela(accelerator: str) -> None:
    """The operator zoo's int16 EXP (it wraps): at most Vela's cycles, whose one lookup is off by
    up to 58,112 on 4 of 2,048 values (U85-256: 4,212 cycles, Vela 5,506; two lookups took 6,736)."""
    ours, vela = cycles_against_vela(operator_model("EXP", "int16"), accelerator)
    assert ours <= vela
