"""NPU support rules and partitioning, on the zoo, on synthetic graphs and on real models."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import shared_manifest, shared_model_paths, shared_params
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader import zoo
from cascader.cli import main as cli_main
from cascader.frontend.partition import CPU, NPU, _dead_npu_operators, _segments, partition
from cascader.frontend.support import RULES, WEIGHT_SUM_MAX, check_operator
from cascader.frontend.operator_view import OperatorView
from cascader.tflite import Operator, SubGraph, Tensor

# --- every zoo model maps fully to the NPU -------------------------------------------------


# Operators a zoo model may still leave on the CPU: GELU's lowering is on its way (issue #40).
NOT_YET_ON_THE_NPU = {"transformer_block": {"GELU"}}


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_zoo_networks_run_on_the_npu(name):
    report = cascader.inspect(zoo.get(name))
    on_cpu = [(r.opcode, r.reason) for r in report.operators if r.target == CPU]
    assert {opcode for opcode, _ in on_cpu} <= NOT_YET_ON_THE_NPU.get(name, set()), on_cpu
    assert len(report.segments) == 1 + 2 * len(on_cpu)  # a CPU operator inside splits the NPU segment
    assert report.total_macs > 0 and report.peak_activation_bytes > 0


# Zoo cases the hardware cannot run, and the rule that says so.
EXPECTED_ON_CPU = {"dw_3x3_multiplier2": "depth_multiplier"}  # multiplier 2 on 8 input channels


@pytest.mark.parametrize("name,model", zoo.single_op_cases(), ids=[n for n, _ in zoo.single_op_cases()])
def test_zoo_single_ops_run_on_the_npu(name, model):
    report = cascader.inspect(model)
    if name in EXPECTED_ON_CPU:
        assert [r.rule for r in report.operators] == [EXPECTED_ON_CPU[name]]
    else:
        assert report.cpu_operators == 0, [r.reason for r in report.operators]


def test_lone_reshape_between_cpu_operators_runs_on_the_npu():
    """A RESHAPE between two CPU operators is an NPU segment of its own (one copy), as Vela 5.2
    runs it (coral_movenet has three); the binary stays bit-exact."""
    from cascader._zoo_layers import CalibratedNet

    net = CalibratedNet(seed=3)
    x = net.input((1, 8, 8, 4))
    x = net.depthwise_conv2d(x, depth_multiplier=2, name="cpu_before")  # multiplier 2: CPU
    x = net.reshape(x, (1, 4, 16, 8))
    net.output(net.depthwise_conv2d(x, depth_multiplier=2, name="cpu_after"))
    model = net.build()
    compiled = cascader.compile(model)
    targets = [(s.target, [model.main.operators[i].opcode for i in s.operators]) for s in compiled.partition.segments]
    assert targets == [(CPU, ["DEPTHWISE_CONV_2D"]), (NPU, ["RESHAPE"]), (CPU, ["DEPTHWISE_CONV_2D"])]
    assert cascader.check(model, compiled).bit_exact


def test_macs_and_bytes_of_a_conv():
    report = cascader.inspect(zoo.conv2d((1, 32, 32, 16), 24, kernel=(3, 3), stride=(2, 2), padding="SAME"))
    (conv,) = report.operators
    assert conv.macs == 16 * 16 * 24 * 3 * 3 * 16
    assert conv.weight_bytes == 24 * 3 * 3 * 16 + 24 * 4  # int8 weights + int32 bias
    assert (conv.ifm_bytes, conv.ofm_bytes) == (32 * 32 * 16, 16 * 16 * 24)
    # One op: its IFM and OFM are live together.
    assert report.peak_activation_bytes == 32 * 32 * 16 + 16 * 16 * 24


def test_peak_of_a_residual_block():
    model = zoo.resnet8()
    report = cascader.inspect(model)
    g = model.main
    # Cross-check the C++ sweep against a direct count of what each step keeps live.
    ranges = cascader.frontend.liveness.activation_live_ranges(g)
    steps = max(ranges.end)
    direct = max(int(ranges.size[(ranges.start <= s) & (s < ranges.end)].sum()) for s in range(steps))
    assert report.peak_activation_bytes == direct


# --- individual rules send the right operator to the CPU -----------------------------------


def _conv_with(**options):
    model = zoo.conv2d((1, 16, 16, 8), 8, kernel=(3, 3))
    model.main.operators[0].options.update(options)
    return model


@pytest.mark.parametrize(
    "model,rule",
    [
        (_conv_with(stride_w=4, stride_h=4), "stride_range"),
        (_conv_with(fused_activation_function="TANH"), "fused_activation"),
        (_conv_with(dilation_h_factor=40, dilation_w_factor=40), "dilated_kernel_height"),
    ],
    ids=["stride", "activation", "dilation"],
)
def test_rules_reject_with_their_reason(model, rule):
    verdict = check_operator(OperatorView(model.main, 0))
    assert not verdict.npu and verdict.rule == rule
    report = cascader.inspect(model)
    assert report.operators[0].target == CPU and report.operators[0].rule == rule


def test_per_channel_weight_sums_beyond_the_accumulator_budget_stay_on_the_cpu():
    """Vela's limit on the sum of |w - zp| per output channel. A 3x3 convolution of 8,000 input
    channels (72,000 weights per output channel) with every weight at -128 (zero point 0) is
    beyond it; with weights at 1, or with 2,000 channels (too few to reach it whatever the
    weights: its sum is skipped), it is not."""
    def conv(channels: int, value: int):
        model = zoo.conv2d((1, 3, 3, channels), 1, kernel=(3, 3), padding="VALID")
        w = model.main.tensors[model.main.operators[0].inputs[1]]
        assert int(w.quantization.zero_point[0]) == 0
        model.main.tensors[model.main.operators[0].inputs[1]] = dataclasses.replace(w, data=np.full_like(w.data, value))
        return OperatorView(model.main, 0)

    verdict = check_operator(conv(8_000, -128))
    assert 72_000 * 128 > WEIGHT_SUM_MAX and not verdict.npu and verdict.rule == "weights_sum"
    assert check_operator(conv(8_000, 1)).npu
    assert check_operator(conv(2_000, -128)).npu


@pytest.mark.parametrize("bad", [0.0, -0.5, float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("where", ["ifm", "weights"])
def test_scales_that_are_not_finite_and_positive_stay_on_the_cpu(bad, where):
    """A zero, negative, NaN or infinite scale, of a feature map or of one weight channel."""
    model = zoo.conv2d((1, 8, 8, 4), 4, kernel=(3, 3))
    op = model.main.operators[0]
    q = model.main.tensors[op.inputs[0 if where == "ifm" else 1]].quantization
    assert check_operator(OperatorView(model.main, 0)).npu
    q.scale = np.array([q.scale[0]] * (1 if where == "ifm" else 3) + [bad], np.float32)
    if where == "ifm":
        q.scale = q.scale[-1:]
    verdict = check_operator(OperatorView(model.main, 0))
    assert not verdict.npu and verdict.rule == "quantized" and "non-finite or non-positive" in verdict.reason


def test_float_feature_maps_stay_on_the_cpu():
    model = zoo.add((1, 8, 8, 4))
    for t in model.main.tensors:
        if not t.is_constant:
            t.dtype, t.quantization = "float32", None
    verdict = check_operator(OperatorView(model.main, 0))
    assert verdict.rule == "data_type" and "float32" in verdict.reason


def test_unsupported_and_planned_operators_are_named(monkeypatch):
    from cascader.frontend import support

    model = zoo.add((1, 8, 8, 4))
    model.main.operators[0] = dataclasses.replace(model.main.operators[0], opcode="GATHER_ND", options={},
                                                  options_type=None)
    assert "not supported by the Ethos-U NPU" in check_operator(OperatorView(model.main, 0)).reason
    monkeypatch.setattr(support, "PLANNED_OPERATORS", frozenset({"GATHER_ND"}))
    assert "not lowered by cascader yet" in check_operator(OperatorView(model.main, 0)).reason


def test_every_rule_has_a_reason_and_a_source():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert all(r.reason and r.source for r in RULES)


# --- partitioning: convex, topologically ordered, maximal ---------------------------------


def _chain_graph(kinds_and_inputs: list[tuple[bool, list[int]]]) -> tuple[SubGraph, list[bool]]:
    """Op i writes tensor i + 1 and reads the outputs of the listed earlier ops (or tensor 0)."""
    tensors = [Tensor(f"t{i}", (1, 4), "int8") for i in range(len(kinds_and_inputs) + 1)]
    ops = [Operator("ADD", tuple(j + 1 for j in ins) or (0,), (i + 1,)) for i, (_, ins) in enumerate(kinds_and_inputs)]
    return SubGraph(tensors, ops, (0,), (len(ops),)), [npu for npu, _ in kinds_and_inputs]


def _check_partition(graph: SubGraph, on_npu: list[bool]) -> None:
    segments = _segments(graph, on_npu)
    order = [i for s in segments for i in s.operators]
    assert sorted(order) == list(range(len(graph.operators)))
    position = {op: k for k, op in enumerate(order)}
    producer = {op.outputs[0]: i for i, op in enumerate(graph.operators)}
    preds = {i: {producer[t] for t in op.inputs if t in producer} for i, op in enumerate(graph.operators)}
    for i in range(len(graph.operators)):  # topological
        assert all(position[p] < position[i] for p in preds[i])
    # Maximal: a CPU operator between every two NPU segments (a cascade cannot cross one).
    assert all(a.target != NPU or b.target != NPU for a, b in zip(segments, segments[1:]))
    for s in segments:  # one target per segment; NPU segments convex
        assert len({on_npu[i] for i in s.operators}) == 1
        if s.target != NPU:
            continue
        inside = set(s.operators)
        # Anything reachable from the segment through an outside op must not lead back in.
        frontier = [j for j in range(len(graph.operators)) if j not in inside and preds[j] & inside]
        seen = set(frontier)
        while frontier:
            j = frontier.pop()
            assert j not in inside
            for k in range(len(graph.operators)):
                if preds[k] & {j}:
                    assert k not in inside, f"segment {s.operators} is not convex"
                    if k not in seen:
                        seen.add(k)
                        frontier.append(k)


@st.composite
def _random_dag(draw):
    n = draw(st.integers(1, 24))
    spec = []
    for i in range(n):
        ins = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        spec.append((draw(st.booleans()), ins))
    return spec


@settings(max_examples=300, deadline=None)
@given(_random_dag())
def test_partition_is_convex_and_topological(spec):
    _check_partition(*_chain_graph(spec))


def test_partition_merges_independent_branches():
    # 0 NPU -> 1 CPU -> 3 NPU; 0 -> 2 NPU: op 2 joins op 0's segment, op 3 cannot.
    graph, on_npu = _chain_graph([(True, []), (False, [0]), (True, [0]), (True, [1, 2])])
    segments = _segments(graph, on_npu)
    assert [(s.target, s.operators) for s in segments] == [(NPU, (0, 2)), (CPU, (1,)), (NPU, (3,))]


def test_npu_groups_with_no_cpu_operator_between_are_one_segment():
    """0 CPU; 1 NPU reads the input (level 0), 2 NPU reads op 0 (level 1): the groups meet with
    no CPU operator between them and run as one segment. As two, a cascade planned across
    them put op 2's stripes into op 1's segment, whose constants it lacked (found by random
    networks)."""
    graph, on_npu = _chain_graph([(False, []), (True, []), (True, [0])])
    segments = _segments(graph, on_npu)
    assert [(s.target, s.operators) for s in segments] == [(CPU, (0,)), (NPU, (1, 2))]


def test_npu_operators_no_output_depends_on_are_removed():
    """0 NPU feeds 1 NPU, which feeds 2 NPU, which nothing reads: 1 and 2 are removed. 3 NPU
    is read only by 4 CPU, which nothing reads either: TFLM runs 4, so 3 stays. 5 NPU is the
    model's output."""
    graph, on_npu = _chain_graph([(True, []), (True, [0]), (True, [1]), (True, [0]), (False, [3]), (True, [0])])
    removed = _dead_npu_operators(graph, on_npu)
    assert removed == (1, 2)
    segments = _segments(graph, on_npu, set(removed))
    assert [(s.target, s.operators) for s in segments] == [(NPU, (0, 3, 5)), (CPU, (4,))]


# --- real models ------------------------------------------------------------------------

# Operators the NPU rules must keep on the CPU in the shared models, by reason.
FLOAT_EDGE_MODELS = ("tinyengine_vww", "openmv_palm_detection_full_192", "openmv_yolov8n_192",
                     "coral_movenet_single_pose_lightning_ptq")


@pytest.mark.parametrize("path", shared_params(shared_model_paths()))
def test_shared_model_partition(path):
    model = cascader.load_model(path)
    report = cascader.inspect(model, name=path.stem)
    part = partition(model)
    _check_partition(part.graph, [v.npu for v in part.verdicts])
    entry = shared_manifest().get(path.name)
    if entry:  # MACs computed independently when the shared set was built
        assert report.total_macs == entry["macs"]
    assert report.npu_operators > 0
    for r in report.operators:
        if r.target == CPU:
            assert r.reason and r.rule
        if r.opcode in ("DEQUANTIZE",) or (r.opcode == "QUANTIZE" and r.rule == "quantize_integer"):
            assert r.target == CPU  # float <-> int conversion at the edges stays on the CPU
    if path.stem in FLOAT_EDGE_MODELS:
        assert any(r.opcode in ("QUANTIZE", "DEQUANTIZE") and r.target == CPU for r in report.operators)


def test_person_detect_matches_published_figures():
    paths = [p for p in shared_model_paths() if p.stem == "tflm_person_detect"]
    if not paths:
        pytest.skip("CASCADER_MODELS is not set")
    report = cascader.inspect(paths[0])
    # Vela 5.2 maps all 31 operators, the final SOFTMAX included, and so does cascader.
    assert (report.npu_operators, report.cpu_operators) == (31, 0)
    assert len([s for s in report.segments if s.target == NPU]) == 1
    # TFLM's own planner reports a 55,296 B non-persistent arena for this model
    # (tflite-micro benchmarking README); the uncascaded activation peak is the same figure.
    assert report.peak_activation_bytes == 55_296


# --- the CLI --------------------------------------------------------------------------------


def test_cli_inspect_zoo(capsys):
    assert cli_main(["inspect", "zoo:mobilenet_v2"]) == 0
    out = capsys.readouterr().out
    assert "DEPTHWISE_CONV_2D" in out and "peak live activations" in out


def test_cli_bad_model(tmp_path, capsys):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model at all")
    assert cli_main(["inspect", str(bad)]) == 2
    assert "not a TFLite model" in capsys.readouterr().err
    assert cli_main(["inspect", "zoo:no_such_model"]) == 2


def test_malformed_operand_lists_are_model_errors():
    """An ADD with one input (a corrupt file) is named in inspect and refused by compile."""
    model = zoo.add((1, 8, 8, 4))
    op = model.main.operators[0]
    op.inputs = op.inputs[:1]
    report = cascader.inspect(model)
    assert report.operators[0].rule == "operand_count" and "takes 2 inputs" in report.operators[0].reason
    with pytest.raises(cascader.ModelError, match="operator 0 is malformed.*ADD takes 2 inputs, this one has 1"):
        cascader.compile(model)


def test_inspect_notes_int16_add_sub_as_any_npu_operator():
    """16x8 ADD/SUB are bit-exact on the NPU (test_lower_int16_add_sub): the report notes their
    OFM shape, as for every other NPU operator, with no caveat."""
    from cascader._zoo_layers import CalibratedNet

    for dtype in ("int8", "int16"):
        net = CalibratedNet(seed=2, calibration_samples=4)
        x = net.input((1, 6, 6, 8), dtype=dtype)
        net.output(net.sub(net.add(x, net.conv2d(x, 8, (1, 1))), x))
        report = cascader.inspect(net.build())
        assert {r.opcode: (r.target, r.note) for r in report.operators} == {
            op: ("NPU", "1x6x6x8") for op in ("CONV_2D", "ADD", "SUB")}
