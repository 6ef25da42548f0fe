"""`check` always answers (#40): bit-exact, not bit-exact, or could not check with a reason.

The models the issue names: an int8 LSTM left on the CPU (its state in variable tensors), a
detection model whose declared-scalar output the reference shapes (1,), a custom operator the
reference cannot load between NPU subgraphs (each subgraph is then checked on its own), resource
variables carried over three steps; the CLI's exit codes; and every zoo and shared model.
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader import zoo
from cascader.checking import check
from cascader.cli import main
from cascader.tflite import Model, load_model, save_model
from cascader.tflite.builder import ModelBuilder, add_variable_initialiser, quantization

from conftest import shared_model_paths

pytest.importorskip("ai_edge_litert")
from cascader.reference import ReferenceInterpreter, random_inputs  # noqa: E402
from cascader.sim import Session, simulate  # noqa: E402

TARGETS = ("ethos-u55-128", "ethos-u65-256")


def _add(b: ModelBuilder, x: int, y: int, name: str, q, activation: str = "NONE") -> int:
    out = b.add_tensor(name, b.tensors[x].shape, "int8", q)
    b.add_operator("ADD", [x, y], [out], {"fused_activation_function": activation}, version=2)
    return out


def lstm_model(steps: int = 3, n_input: int = 4, n_cell: int = 5, cifg: bool = True) -> Model:
    """ADD (NPU), an int8 UNIDIRECTIONAL_SEQUENCE_LSTM, ADD (NPU). With `cifg` the input gate is
    coupled to the forget gate (its weights and bias omitted), a variant the NPU lowering (as
    Vela's) leaves on the CPU; the other optional inputs are omitted (no peephole, projection or
    layer norm). Its output and cell state are variable tensors, with the five intermediates
    LiteRT's 8x8_16 kernel reads."""
    rng = np.random.default_rng(0)
    b = ModelBuilder(description="tiny lstm")
    x0 = b.add_input("x0", (1, steps, n_input), "int8", quantization(0.05, 3))
    x = _add(b, x0, x0, "x", quantization(0.1, 3))

    def weights(name: str, shape: tuple[int, int]) -> int:
        return b.add_constant(name, rng.integers(-127, 128, size=shape).astype(np.int8), "int8", quantization(0.01))

    def bias(name: str) -> int:
        return b.add_constant(name, rng.integers(-2000, 2000, size=n_cell).astype(np.int32), "int32",
                              quantization(0.0005))

    to_gates = [weights(f"input_to_{g}", (n_cell, n_input)) for g in ("input", "forget", "cell", "output")]
    recurrent = [weights(f"recurrent_to_{g}", (n_cell, n_cell)) for g in ("input", "forget", "cell", "output")]
    biases = [bias(f"{g}_bias") for g in ("input", "forget", "cell", "output")]
    h = b.add_tensor("output_state", (1, n_cell), "int8", quantization(1 / 128))
    c = b.add_tensor("cell_state", (1, n_cell), "int16", quantization(2**-11))
    b.tensors[h].is_variable = b.tensors[c].is_variable = True
    y = b.add_tensor("y", (1, steps, n_cell), "int8", quantization(1 / 128))
    intermediates = [b.add_tensor(f"intermediate_{i}", (0,), "int16" if i < 4 else "int8", quantization(2**-12))
                     for i in range(5)]
    if cifg:
        to_gates[0] = recurrent[0] = biases[0] = -1
    op = b.add_operator("UNIDIRECTIONAL_SEQUENCE_LSTM",
                        [x, *to_gates, *recurrent, -1, -1, -1, *biases, -1, -1, h, c, -1, -1, -1, -1], [y],
                        {"fused_activation_function": "TANH", "time_major": False}, version=3,
                        options_type="UnidirectionalSequenceLSTMOptions")
    b.operators[op].intermediates = tuple(intermediates)
    b.mark_output(_add(b, y, y, "z", quantization(1 / 64)))
    return b.build()


def detection_model(boxes: int = 8, classes: int = 2, detections: int = 3) -> Model:
    """ADD (NPU), DEQUANTIZEs, TFLite_Detection_PostProcess whose num_detections is declared
    with no dimensions: its kernel makes it (1,)."""
    import flatbuffers.flexbuffers as flexbuffers

    b = ModelBuilder(description="tiny detector")
    x = b.add_input("x", (1, boxes, 4), "int8", quantization(0.05))
    encodings = _add(b, x, x, "encodings", quantization(0.1))
    scores = b.add_input("scores", (1, boxes, classes + 1), "int8", quantization(1 / 256, -128))
    as_float = []
    for t, name in ((encodings, "encodings_f"), (scores, "scores_f")):
        as_float.append(b.add_tensor(name, b.tensors[t].shape, "float32"))
        b.add_operator("DEQUANTIZE", [t], [as_float[-1]])
    anchors = b.add_constant("anchors", np.random.default_rng(1).uniform(0.2, 0.8, (boxes, 4)).astype(np.float32))
    outputs = [b.add_tensor("detection_boxes", (1, detections, 4), "float32"),
               b.add_tensor("detection_classes", (1, detections), "float32"),
               b.add_tensor("detection_scores", (1, detections), "float32"),
               b.add_tensor("num_detections", (), "float32")]
    options = flexbuffers.Dumps({"max_detections": detections, "max_classes_per_detection": 1,
                                 "nms_score_threshold": 0.0, "nms_iou_threshold": 0.5, "num_classes": classes,
                                 "y_scale": 10.0, "x_scale": 10.0, "h_scale": 5.0, "w_scale": 5.0})
    b.add_custom_operator("TFLite_Detection_PostProcess", [*as_float, anchors], outputs, options)
    for t in outputs:
        b.mark_output(t)
    return b.build()


def custom_model(pool_scale: float = 0.1) -> Model:
    """ADD and MAX_POOL (an NPU subgraph), a custom PoseDecoder no interpreter knows, then an
    ADD (another NPU subgraph) of its result and the pool's."""
    b = ModelBuilder(description="custom decoder")
    x = b.add_input("x", (1, 8, 8, 4), "int8", quantization(0.05, 2))
    a = _add(b, x, x, "a", quantization(0.1, -3))
    p = b.add_tensor("p", (1, 4, 4, 4), "int8", quantization(pool_scale, -3))
    b.add_operator("MAX_POOL_2D", [a], [p], {"padding": "VALID", "stride_h": 2, "stride_w": 2,
                                             "filter_height": 2, "filter_width": 2})
    decoded = b.add_tensor("decoded", (1, 4, 4, 4), "int8", quantization(0.1, -3))
    b.add_custom_operator("PoseDecoder", [p], [decoded], b"\x00")
    b.mark_output(_add(b, decoded, p, "y", quantization(0.2, 1), "RELU"))
    return b.build()


def accumulator_model() -> Model:
    """A resource variable `acc`: CALL_ONCE sets it to 7s (its initialiser, subgraph 1); each
    inference reads it, adds the input (NPU), and assigns back a 3x3 average of the sum."""
    q = quantization(0.05, 2)
    shape = (1, 4, 4, 8)
    b = ModelBuilder(description="accumulator")
    x = b.add_input("x", shape, "int8", q)
    b.add_operator("CALL_ONCE", [], [], {"init_subgraph_index": 1})
    handle = b.add_tensor("handle", (), "resource")
    b.add_operator("VAR_HANDLE", [], [handle], {"shared_name": "acc"})
    state = b.add_tensor("state", shape, "int8", q)
    b.add_operator("READ_VARIABLE", [handle], [state])
    y = _add(b, x, state, "y", quantization(0.08, -1))
    averaged = b.add_tensor("averaged", shape, "int8", q)
    b.add_operator("AVERAGE_POOL_2D", [y], [averaged], {"padding": "SAME", "stride_h": 1, "stride_w": 1,
                                                        "filter_height": 3, "filter_width": 3})
    b.add_operator("ASSIGN_VARIABLE", [handle, averaged], [])
    b.mark_output(y)
    model = b.build()
    add_variable_initialiser(model, "acc", np.full(shape, 7, np.int8), "int8", q)  # subgraph 1
    return model


def _ops(model: Model) -> list[str]:
    return [op.name for op in model.main.operators]


# -- (a) an LSTM on the CPU ----------------------------------------------------------------------

@pytest.mark.parametrize("accelerator", TARGETS)
def test_lstm_on_the_cpu_is_bit_exact_over_steps(accelerator):
    model = lstm_model()
    result = cascader.compile(model, accelerator=accelerator)
    assert _ops(result.model) == ["ethos-u", "UNIDIRECTIONAL_SEQUENCE_LSTM", "ethos-u"]
    checked = check(model, result, seeds=2)
    assert checked.bit_exact, checked
    assert checked.steps == 3 and checked.outputs[0].elements == 2 * 3 * 15


def test_lstm_state_carries_across_runs_and_resets():
    model = lstm_model()
    binary = cascader.compile(model, accelerator="ethos-u55-128").model
    session, reference = Session(binary), ReferenceInterpreter(model)
    inputs = random_inputs(model, 0)
    runs = [session.run(inputs)[0] for _ in range(3)]
    for got in runs:
        np.testing.assert_array_equal(got, reference.run(inputs)[0])
    assert not np.array_equal(runs[0], runs[1])  # the state changed the answer to the same inputs
    assert set(session.variables) == {"output_state", "cell_state"}
    session.reset()
    np.testing.assert_array_equal(session.run(inputs)[0], runs[0])
    # simulate is one inference from the start state
    np.testing.assert_array_equal(simulate(binary, inputs)[0], runs[0])


# -- (b) a scalar output -------------------------------------------------------------------------

def test_declared_scalar_output_is_shaped_as_the_reference_shapes_it():
    model = detection_model()
    binary = cascader.compile(model, accelerator="ethos-u55-128").model
    inputs = random_inputs(model, 0)
    got, expected = simulate(binary, inputs), ReferenceInterpreter(model).run(inputs)
    assert got[3].shape == expected[3].shape == (1,)
    checked = check(model, binary, seeds=2)
    assert checked.bit_exact, checked
    assert checked.outputs[3].shape == (1,) and checked.outputs[3].elements == 2


def test_vela_binary_with_a_scalar_output_is_bit_exact():
    vela = pytest.importorskip("cascader.vela")
    model = detection_model()
    try:
        compiled = vela.compile(model, "ethos-u55-128")
    except vela.VelaNotInstalled:
        pytest.skip("Vela is not installed")
    assert check(model, compiled.path, seeds=2).bit_exact


# -- (c) a custom operator the reference cannot load -------------------------------------------

@pytest.mark.parametrize("accelerator", TARGETS)
def test_custom_operator_checks_each_npu_subgraph_on_its_own(accelerator):
    model = custom_model()
    binary = cascader.compile(model, accelerator=accelerator).model
    assert _ops(binary) == ["ethos-u", "PoseDecoder", "ethos-u"]
    with pytest.raises(cascader.CascaderError, match="PoseDecoder"):
        ReferenceInterpreter(model)
    checked = check(model, binary, seeds=2)
    assert checked.bit_exact, checked
    assert checked.scope == "NPU subgraphs" and "PoseDecoder" in checked.note
    assert "one by one" in checked.verdict
    assert [(o.name, o.operator) for o in checked.outputs] == [("p", 0), ("y", 2)]
    assert all(o.elements == 2 * 64 for o in checked.outputs)


def test_a_cut_npu_subgraph_that_differs_is_a_mismatch():
    """The binary of one model against a source whose pooled tensor has another scale. MAX_POOL
    copies values whatever the scale, so the first NPU subgraph still agrees; the ADD of the
    second reads the pooled tensor at another scale, so its result differs."""
    binary = cascader.compile(custom_model(), accelerator="ethos-u55-128").model
    checked = check(custom_model(pool_scale=0.2), binary, seeds=1)
    assert checked.mismatched and not checked.bit_exact
    assert [(o.name, o.mismatched > 0) for o in checked.outputs] == [("p", False), ("y", True)]
    assert checked.verdict.startswith("NOT bit-exact")


def test_cuts_agree_with_the_whole_model_check():
    model = lstm_model()
    binary = cascader.compile(model, accelerator="ethos-u55-128").model
    checked = check(model, binary, seeds=1, by_npu_subgraph=True)
    assert checked.bit_exact, checked
    assert [o.name for o in checked.outputs] == ["x", "z"]


# -- (d) resource variables over three steps ---------------------------------------------------

def test_resource_variables_carry_state_over_three_steps():
    model = accumulator_model()
    result = cascader.compile(model, accelerator="ethos-u55-128")
    assert {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"} <= set(_ops(result.model))
    assert len(result.model.subgraphs) == 2  # the initialiser is carried over
    checked = check(model, result, seeds=2)
    assert checked.bit_exact, checked
    assert checked.steps == 3 and checked.outputs[0].elements == 2 * 3 * 128
    session, reference = Session(result.model), ReferenceInterpreter(model)
    inputs = random_inputs(model, 0)
    runs = [session.run(inputs)[0] for _ in range(3)]
    for got in runs:
        np.testing.assert_array_equal(got, reference.run(inputs)[0])
    assert not np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[1], runs[2])
    session.reset()
    np.testing.assert_array_equal(session.run(inputs)[0], runs[0])


# -- the command line --------------------------------------------------------------------------

def test_cli_exit_codes_without_a_traceback(tmp_path, capsys):
    binary = tmp_path / "custom_cascader.tflite"
    cascader.compile(custom_model(), accelerator="ethos-u55-128").save(binary)
    source, other, renamed = tmp_path / "custom.tflite", tmp_path / "other.tflite", tmp_path / "renamed.tflite"
    source.write_bytes(save_model(custom_model()))
    other.write_bytes(save_model(custom_model(pool_scale=0.2)))
    model = custom_model()
    for t in model.main.tensors:
        t.name = f"renamed_{t.name}"
    renamed.write_bytes(save_model(model))
    garbage = tmp_path / "garbage.tflite"
    garbage.write_bytes(b"not a model")
    cases = [(source, binary, 0), (other, binary, 1), (renamed, binary, 2), (tmp_path / "missing.tflite", binary, 2),
             (source, garbage, 2)]
    for src, bin_, code in cases:
        assert main(["simulate", str(bin_), "--check-against", str(src), "--seeds", "1"]) == code, (src, bin_)
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        if code == 2:
            reasons = [line for line in err.splitlines() if line.startswith("cascader: could not check")]
            assert len(reasons) == 1 and reasons[0].strip() != "cascader: could not check:", err
    assert main(["simulate", str(binary), "--check-against", "zoo:resnet8", "--seeds", "1"]) == 2


# -- every model gets an answer ----------------------------------------------------------------

EVERY_MODEL = [pytest.param(name, id=f"zoo:{name}") for name in zoo.MODELS] + [
    pytest.param(str(p), id=p.stem) for p in shared_model_paths()]


@pytest.mark.parametrize("spec", EVERY_MODEL)
def test_check_answers_on_every_model(spec):
    model = zoo.get(spec) if spec in zoo.MODELS else load_model(spec)
    binary = cascader.compile(model, accelerator="ethos-u55-128")
    checked = check(model, binary, seeds=1)  # never raises
    assert checked.verdict
    assert checked.bit_exact, checked
