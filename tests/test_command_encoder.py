"""The register command-stream encoder (emit/command_encoder) on Vela's own command streams.

For every stream Vela 5.2 writes for the zoo (and, with CASCADER_MODELS, a subset of the shared
models) on three accelerators: decode -> encode -> decode gives the same operations, value for
value; the re-encoded stream is no longer than Vela's (redundant register writes are elided);
and Vela's binary with our streams in place of its own simulates to the same outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import _core, zoo
from cascader.bench.package import repackage
from cascader.vela import UNLIMITED_SRAM, VelaConfig, compile_with_vela
from cascader.emit import encode_command_stream
from cascader.errors import InvalidArgumentError
from cascader.reference import random_inputs
from cascader.sim import npu_calls

from conftest import shared_models_dir

pytest.importorskip("ethosu.vela")

ACCELERATORS = ["ethos-u55-128", "ethos-u65-256", "ethos-u65-512"]
ZOO = {"mobilenet_v2": zoo.mobilenet_v2, "resnet8": zoo.resnet8, "ds_cnn_kws": zoo.ds_cnn_kws}
SHARED = ["tflm_person_detect", "mlperftiny_vww_96_int8", "emza_ssd_slim_120x160x1_v1_int8"]


def _without_offsets(ops):
    return [{k: v for k, v in op.items() if k != "word_offset"} for op in ops]


def _round_trip(path, accelerator):
    vela = cascader.load_model(compile_with_vela(path, VelaConfig(accelerator, "Performance", UNLIMITED_SRAM)).path)
    streams = []
    for call in npu_calls(vela):
        decoded = _core.decode_driver_payload(call.payload)
        ops = decoded["operations"]
        words = encode_command_stream(ops, accelerator)
        again = _core.decode_driver_payload(_core.encode_driver_payload(words, accelerator))["operations"]
        assert _without_offsets(again) == _without_offsets(ops)
        assert len(words) <= decoded["command_stream_words"], "redundant writes should not make the stream longer"
        streams.append(words)
    return vela, streams


def _check(path, accelerator):
    vela, streams = _round_trip(path, accelerator)
    original = cascader.load_model(path)
    ours = repackage(original, vela, command_streams=streams)
    inputs = random_inputs(original, 0)
    for a, b in zip(cascader.simulate(vela, inputs), cascader.simulate(ours, inputs)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_streams_round_trip(tmp_path, name, accelerator):
    path = tmp_path / f"{name}.tflite"
    cascader.save_model(ZOO[name](), path)
    _check(path, accelerator)


@pytest.mark.skipif(shared_models_dir() is None, reason="CASCADER_MODELS is not set")
@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", SHARED)
def test_shared_streams_round_trip(name, accelerator):
    _check(shared_models_dir() / f"{name}.tflite", accelerator)


def test_waits_follow_the_memory_accesses():
    """A kernel waits for the DMA that fills what it reads; a DMA over bytes a queued kernel
    still reads waits for the kernels first."""
    compiled = cascader.compile(zoo.mobilenet_v1())
    words = _core.split_driver_payload(npu_calls(compiled.model)[0].payload)[1]
    opcodes = [int(w) & 0x3FF for w in words if not (int(w) >> 14) & 1]
    assert 0x011 in opcodes  # DMA_WAIT
    kinds = [op["kind"] for op in compiled.operations[0]]
    assert "dma" in kinds


def test_values_out_of_range_are_named():
    op = cascader.sim.decode(cascader.compile(zoo.resnet8()).model)[0]["operations"][0]
    bad = dict(op, padding=(200, 0, 0, 0))
    with pytest.raises(InvalidArgumentError, match="operation 0: padding top"):
        encode_command_stream([bad])
    with pytest.raises(InvalidArgumentError, match="no 'ofm'"):
        encode_command_stream([{k: v for k, v in op.items() if k != "ofm"}])
    two_cores = dict(op, parallel_mode=1, weights1=op["weights"], scales1=op["scales"])
    with pytest.raises(InvalidArgumentError, match="cores"):
        encode_command_stream([two_cores], "ethos-u55-128")
    # A field of the wrong type is named, optional ones and nested tables too (a dict was once
    # built from the value, and failed with a TypeError).
    add = dict(op, kind="elementwise", sub_op="ADD", ifm2=op["ifm"], broadcast=(False,) * 3)
    for record, key, value in ((op, "weights", 7), (op, "activation", (0, 0)), (op, "kernel", [1]),
                               (add, "ifm2_scalar", "one")):
        with pytest.raises(InvalidArgumentError, match=f"'{key}' has the wrong type"):
            encode_command_stream([dict(record, **{key: value})])
