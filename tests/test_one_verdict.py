"""One verdict: the CPU operators `inspect` lists are the ones the compiled binary leaves on the
CPU, for every zoo model and every model in $CASCADER_MODELS.

The binary's CPU operators are counted in the binary itself: its operators other than the
`ethos-u` custom operator, by opcode (the compile renumbers them, so the multisets of
opcodes are compared, and their count).
"""

from __future__ import annotations

from collections import Counter

import pytest

import cascader
from cascader import zoo
from cascader.random_networks import random_network
from cascader.tflite import load_model
from conftest import shared_model_paths, shared_params

ETHOS_U = "ethos-u"


def _binary_cpu_opcodes(binary: bytes) -> Counter:
    model = load_model(binary)
    graph = model.subgraphs[0]
    return Counter(op.name for op in graph.operators if op.name != ETHOS_U)


def _check(model) -> None:
    inspection = cascader.inspect(model)
    inspected = Counter(r.opcode for r in inspection.operators if r.target == "CPU")
    compiled = cascader.compile(model)
    in_binary = _binary_cpu_opcodes(compiled.binary)
    assert inspected == in_binary, f"inspect says {dict(inspected)} on the CPU, the binary has {dict(in_binary)}"
    assert inspection.cpu_operators == compiled.summary().cpu_operators == sum(in_binary.values())


def _zoo_models():
    models = [(name, factory) for name, factory in zoo.MODELS.items()]
    models += [(name, lambda m=m: m) for name, m in zoo.single_op_cases()]
    models += [(name, lambda m=m: m) for name, m in zoo.activation_op_cases()]
    models += [("random_network_106", lambda: random_network(106).model)]  # a dead operator, removed
    return models


@pytest.mark.parametrize("name,factory", _zoo_models(), ids=[n for n, _ in _zoo_models()])
def test_zoo_model(name, factory):
    _check(factory())


@pytest.mark.parametrize("path", shared_params(shared_model_paths()))
def test_shared_model(path):
    _check(load_model(path))


def test_a_lowering_verdict_is_inspects_too():
    """An operator the support rules accept but the lowering cannot express (RESIZE_BILINEAR
    with align_corners, 33x33 -> 65x65) is on the CPU in both, with the lowering's reason."""
    import numpy as np

    from cascader.tflite.builder import ModelBuilder
    from cascader.tflite.model import Quantization

    q = Quantization(scale=np.array([0.05], np.float32), zero_point=np.array([0], np.int64))
    b = ModelBuilder()
    x = b.add_input("x", (1, 33, 33, 4), "int8", q)
    size = b.add_tensor("size", (2,), "int32", None, np.array([65, 65], np.int32))
    y = b.add_tensor("y", (1, 65, 65, 4), "int8", q)
    b.add_operator("RESIZE_BILINEAR", [x, size], [y], {"align_corners": True, "half_pixel_centers": False})
    b.mark_output(y)
    model = b.build()
    (report,) = cascader.inspect(model).operators
    assert report.target == "CPU" and report.rule == "lowering" and "align_corners" in report.reason
    _check(model)
