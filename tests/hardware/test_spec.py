"""DeviceSpec: the built-ins' numbers hold what the datasheets say (dense, never sparse), JSON round trips
and refuses a wrong field in one line, names resolve with did-you-mean, device names map to parts."""

from __future__ import annotations

import dataclasses
import json

import pytest

import dispatchtrace as dt
from dispatchtrace.hardware import BUILT_IN, OP_CLASSES, Efficiency, Link, spec_of

T = 1e12


def test_every_built_in_is_named_and_cited():
    assert tuple(BUILT_IN) == ("a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "mi300x", "l4")
    for name, spec in BUILT_IN.items():
        assert dt.DeviceSpec.named(name) is spec and spec.name == name
        for field in ("peak_flops", "memory_bandwidth", "memory", "launch_overhead", "compute_efficiency",
                      "memory_efficiency", "intra_node", "inter_node"):
            assert spec.sources.get(field), (name, field)
        assert spec.intra_node.source and spec.inter_node.source and spec.ranks_per_node == 8
        assert set(spec.compute_efficiency) >= {"matmul", "convolution", "attention", "other"}
        assert set(spec.memory_efficiency) == set(OP_CLASSES)


@pytest.mark.parametrize(("name", "bf16", "f32", "f64", "bandwidth", "memory_gib"), [
    ("a100-40gb", 312, 19.5, 19.5, 1555e9, 40),
    ("a100-80gb", 312, 19.5, 19.5, 2039e9, 80),
    ("h100-sxm", 989.4, 66.9, 66.9, 3.35e12, 80),
    ("h100-pcie", 756, 51.2, 51.2, 2.0e12, 80),
    ("h200", 989.4, 66.9, 66.9, 4.8e12, 141),
    ("b200", 2250, 75, 37, 8e12, 180),
    ("mi300x", 1307.4, 163.4, 163.4, 5.3e12, 192),
    ("l4", 121, 30.3, 0.473, 300e9, 24),
])
def test_the_dense_figures(name, bf16, f32, f64, bandwidth, memory_gib):
    spec = dt.DeviceSpec.named(name)
    assert spec.peak("bfloat16") == pytest.approx(bf16 * T)
    assert spec.peak("float16") == spec.peak("bfloat16")
    assert spec.peak("float32") == pytest.approx(f32 * T)
    assert spec.peak("float64") == pytest.approx(f64 * T)
    assert spec.memory_bandwidth == bandwidth and spec.memory == memory_gib * 2**30
    # dense: TF32 is half of BF16 on every tensor-core part here, FP8 twice (A100 has none)
    assert spec.peak("tfloat32") == pytest.approx(spec.peak("bfloat16") / 2, rel=0.01)
    if name.startswith("a100"):
        assert spec.peak("float8_e4m3fn") is None
    else:
        assert spec.peak("float8_e4m3fn") == pytest.approx(2 * spec.peak("bfloat16"), rel=0.01)


def test_peak_reads_torch_dtypes_and_float8_family():
    import torch

    h100, mi300x = dt.DeviceSpec.named("h100"), dt.DeviceSpec.named("mi300x")
    assert h100.peak(torch.bfloat16) == h100.peak("torch.bfloat16") == h100.peak("bf16") == 989.4 * T
    assert mi300x.peak(torch.float8_e4m3fn) == mi300x.peak("float8_e4m3fnuz") == 2614.9 * T
    assert h100.peak(torch.complex64) is None


def test_efficiency_rises_with_size_and_stays_below_one():
    for spec in BUILT_IN.values():
        for op_class in OP_CLASSES:
            small = spec.efficiency(op_class, flops=1e3, nbytes=1e2)
            large = spec.efficiency(op_class, flops=1e15, nbytes=1e11)
            assert 0 < small[0] < large[0] <= 1 and 0 < small[1] < large[1] <= 1, (spec.name, op_class)
    h100 = dt.DeviceSpec.named("h100")
    big_gemm = h100.efficiency("matmul", flops=2 * 8192**3, nbytes=None)[0]
    assert 0.7 <= big_gemm <= 0.8  # large GEMMs: 70-80% of the dense peak
    assert h100.efficiency("copy", flops=None, nbytes=4e9)[1] == pytest.approx(0.9, abs=0.01)
    with pytest.raises(dt.SpecError, match="not 'matmull' \\(did you mean 'matmul'"):
        h100.efficiency("matmull", flops=1, nbytes=1)


def test_a_spec_without_curves_is_the_roofline():
    spec = dt.DeviceSpec(name="bare", peak_flops={"float32": 1e12}, memory_bandwidth=1e11, launch_overhead=0)
    assert spec.efficiency("attention", flops=1e9, nbytes=1e9) == (1.0, 1.0)
    other = dataclasses.replace(spec, compute_efficiency={"other": Efficiency.flat(0.5)})
    assert other.efficiency("attention", flops=1e9, nbytes=1e9) == (0.5, 1.0)


@pytest.mark.parametrize("name", list(BUILT_IN))
def test_json_round_trip(tmp_path, name):
    spec = BUILT_IN[name]
    path = tmp_path / f"{name}.json"
    spec.save(path)
    again = dt.DeviceSpec.load(path)
    assert again == spec and hash(again) == hash(spec)
    assert again.intra_node == spec.intra_node and again.compute_efficiency["matmul"] == spec.compute_efficiency["matmul"]
    assert spec_of(path) == spec and spec_of(str(path)) == spec
    assert json.loads(path.read_text())["format"] == "dispatchtrace-devicespec"


def test_pickle_and_deepcopy():
    import copy
    import pickle

    spec = BUILT_IN["mi300x"]
    assert pickle.loads(pickle.dumps(spec)) == spec and copy.deepcopy(spec) == spec
    assert dataclasses.replace(spec, name="mine").peak_flops == spec.peak_flops


def test_a_hand_written_spec(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "peak_flops": {"bfloat16": 100e12}, "memory_bandwidth": 1e12,
                                "launch_overhead": 4e-6, "compute_efficiency": {"matmul": [[1e9, 0.2], [1e12, 0.7]]},
                                "intra_node": {"bandwidth": 100e9, "latency": 2e-6}}))
    spec = dt.DeviceSpec.load(path)
    assert spec.peak("bfloat16") == 100e12 and spec.efficiency("matmul", flops=1e12, nbytes=None) == (0.7, 1.0)
    assert spec.intra_node == Link(bandwidth=100e9, latency=2e-6) and spec.ranks_per_node == 1


@pytest.mark.parametrize(("change", "message"), [
    ({"memory_bandwidth": "3 TB/s"}, "memory_bandwidth takes a positive number of bytes per second, not '3 TB/s'"),
    ({"peak_flops": {"bf16": 1e12}}, "peak_flops takes dtype names .* not 'bf16' \\(did you mean 'bfloat16'\\?\\)"),
    ({"peak_flops": {}}, "peak_flops takes at least one dtype's rate"),
    ({"peak_flops": {"bfloat16": -1}}, "peak_flops\\['bfloat16'\\] takes a positive number of FLOP/s, not -1"),
    ({"launch_overhead": None}, "launch_overhead takes a number of seconds >= 0, not None"),
    ({"compute_efficiency": {"matmul": [[1e9, 1.5]]}}, "compute_efficiency\\['matmul'\\]: .* fraction takes a number in \\(0, 1\\], not 1.5"),
    ({"compute_efficiency": {"gemm": [[1e9, 0.5]]}}, "compute_efficiency takes op classes .* not 'gemm'"),
    ({"memory_efficiency": {"copy": [[1e9, 0.5], [1e8, 0.6]]}}, "sizes must increase strictly"),
    ({"intra_node": {"bandwidth": 0, "latency": 1e-6}}, "intra_node: Link bandwidth must be a positive number"),
    ({"inter_node": {"bandwidth": 1e9}}, "inter_node.latency is missing"),
    ({"ranks_per_node": 0}, "ranks_per_node takes a whole number >= 1, not 0"),
    ({"bandwidth": 1e12}, "unknown field 'bandwidth'"),
    ({"version": 9}, "version 9 is not one this dispatchtrace reads"),
    ({"name": None}, "name takes a non-empty string, not None"),
])
def test_a_wrong_field_is_one_line_naming_it(tmp_path, change, message):
    data = {**BUILT_IN["h100-sxm"].to_dict(), **change}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(dt.SpecError, match=message) as e:
        dt.DeviceSpec.load(path)
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)


def test_a_missing_field(tmp_path):
    data = BUILT_IN["l4"].to_dict()
    del data["memory_bandwidth"]
    with pytest.raises(dt.SpecError, match="device spec: the field 'memory_bandwidth' is missing"):
        dt.DeviceSpec.from_dict(data)


@pytest.mark.parametrize(("text", "message"), [
    ('{"name": "x", "peak_flops": {', "not a valid device spec JSON \\(line 1, column 30"),
    ("[1, 2]", "a device spec is a JSON object, not list"),
    ("", "not a valid device spec JSON"),
])
def test_a_damaged_file_is_one_line(tmp_path, text, message):
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(dt.SpecError, match=message) as e:
        spec_of(path)
    assert "\n" not in str(e.value)
    with pytest.raises(dt.SpecError, match="no such device spec file"):
        spec_of(tmp_path / "missing.json")


def test_unknown_names_suggest_close_ones():
    assert spec_of("H100").name == "h100-sxm" and spec_of("A100_40GB").name == "a100-40gb"
    with pytest.raises(dt.SpecError, match="no built-in device spec 'h100-smx' \\(did you mean 'h100-sxm'") as e:
        spec_of("h100-smx")
    assert "the built-ins are a100-40gb, a100-80gb, h100-sxm" in str(e.value)
    with pytest.raises(dt.SpecError, match="'mi300' is|did you mean 'mi300x'"):
        dt.DeviceSpec.named("mi30x")
    with pytest.raises(dt.SpecError, match="no built-in device spec 'tpu-v5'; the built-ins"):
        dt.DeviceSpec.named("tpu-v5")
    with pytest.raises(dt.SpecError, match="not int"):
        spec_of(3)
    with pytest.raises(dt.SpecError, match="not an empty string"):
        spec_of(" ")


@pytest.mark.parametrize(("reported", "name"), [
    # what torch.cuda.get_device_name() returns on each part (nvidia-smi's names)
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100-PCIE-40GB", None),
    ("NVIDIA A100 80GB PCIe", None),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", None),
    ("NVIDIA GH200 480GB", None),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H200 NVL", None),
    ("NVIDIA B200", "b200"),
    ("AMD Instinct MI300X", "mi300x"),
    ("AMD Instinct MI300X VF", "mi300x"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", None),
    ("Tesla T4", None),
])
def test_for_device_maps_reported_names(reported, name):
    spec = dt.DeviceSpec.for_device(reported)
    assert (spec.name if spec else None) == name


def test_a_curve_with_a_shape_axis_interpolates_on_both():
    rows = ((49, ((1e6, 0.2), (1e8, 0.6))), (784, ((1e6, 0.4), (1e8, 0.9))))
    conv = Efficiency(points=((1e6, 0.3), (1e8, 0.8)), by_shape=rows)
    assert conv.at(1e8) == 0.8 and conv.at(1e8, None) == 0.8  # no shape: the curve by size alone
    assert conv.at(1e8, 49) == 0.6 and conv.at(1e6, 784) == 0.4  # on a row
    assert conv.at(1e8, 7) == 0.6 and conv.at(1e10, 5000) == 0.9  # flat beyond the rows and the sizes
    assert conv.at(1e7, 49) == pytest.approx(0.4) and conv.at(1e7, 784) == pytest.approx(0.65)  # along a row
    assert conv.at(1e8, 196) == pytest.approx(0.75)  # halfway between 49 and 784 in log10
    assert conv.at(1e7, 196) == pytest.approx((0.4 + 0.65) / 2)  # both axes at once
    spec = dt.DeviceSpec(name="toy", peak_flops={"float32": 1e11}, memory_bandwidth=1e10, launch_overhead=0,
                         compute_efficiency={"convolution": conv})
    assert spec.efficiency("convolution", flops=1e8, nbytes=None, shape=196) == (pytest.approx(0.75), 1.0)
    with pytest.raises(dt.SpecError, match="shapes must be positive, finite and increase strictly"):
        Efficiency(points=((1e6, 0.3),), by_shape=tuple(reversed(rows)))
    with pytest.raises(dt.SpecError, match="fraction takes a number in \\(0, 1\\], not 2"):
        Efficiency(points=((1e6, 0.3),), by_shape=((49, ((1e6, 2),)),))


def test_spec_json_version_2_round_trips_the_shape_axis_kernels_and_fresh_outputs(tmp_path):
    from dispatchtrace.hardware import FreshOutput

    conv = Efficiency(points=((1e8, 0.8),), by_shape=((49, ((1e8, 0.6),)), (784, ((1e8, 0.9),))))
    spec = dt.DeviceSpec(name="cpu", peak_flops={"float32": 1e11}, memory_bandwidth=5e10, launch_overhead=2e-6,
                         compute_efficiency={"convolution": conv, "matmul": Efficiency.flat(0.9)},
                         kernel_efficiency={"gelu": Efficiency.flat(0.1)},
                         fresh_output=FreshOutput(points=((16e6, 0.0), (64e6, 5e-10))), attention_dropout_fused=False)
    path = tmp_path / "cpu.json"
    spec.save(path)
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["compute_efficiency"]["matmul"] == [[1.0, 0.9]]  # by size alone: as in 1
    assert data["compute_efficiency"]["convolution"]["by_shape"] == [[49.0, [[1e8, 0.6]]], [784.0, [[1e8, 0.9]]]]
    again = dt.DeviceSpec.load(path)
    assert again == spec and again.compute_efficiency["convolution"].at(1e8, 196) == pytest.approx(0.75)
    assert again.efficiency("elementwise", flops=None, nbytes=1e6, kernel="gelu") == (1.0, 0.1)
    assert again.efficiency("elementwise", flops=None, nbytes=1e6, kernel="relu") == (1.0, 1.0)  # none: the class's
    assert again.fresh_seconds(4e6) == 0.0 and again.fresh_seconds(128e6) == pytest.approx(0.064)
    assert "at positions 49" in str(again) and "fresh outputs" in str(again) and "gelu" in str(again)
    assert not again.attention_dropout_fused and "SDPA with dropout runs unfused" in str(again)
    data["compute_efficiency"]["convolution"]["rows"] = []
    path.write_text(json.dumps(data))
    with pytest.raises(dt.SpecError, match="convolution'\\]: a curve with a shape axis takes points and by_shape"):
        dt.DeviceSpec.load(path)


def test_a_version_1_spec_file_still_loads_and_reads_as_before(tmp_path):
    old = {"format": "dispatchtrace-devicespec", "version": 1, "name": "old-cpu", "title": "",
           "peak_flops": {"float32": 9e10}, "memory_bandwidth": 7e10, "launch_overhead": 2.5e-6,
           "compute_efficiency": {"matmul": [[6.5e4, 0.4], [2.1e9, 1.0]], "convolution": [[5e5, 0.2], [1.4e8, 0.97]]},
           "memory_efficiency": {"elementwise": [[2e3, 0.3], [4e7, 0.5]]}, "memory": None, "intra_node": None,
           "inter_node": None, "ranks_per_node": 1, "sources": {}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    spec = dt.DeviceSpec.load(path)
    assert spec.fresh_output is None and not spec.kernel_efficiency and spec.attention_dropout_fused
    assert spec.compute_efficiency["convolution"].by_shape == ()
    # a shape, a kernel name and a new output change nothing on a spec without those axes
    assert spec.efficiency("convolution", flops=1.4e8, nbytes=1e6, shape=49, kernel="convolution") == (0.97, 1.0)
    assert spec.fresh_seconds(1e9) == 0.0
    for name in BUILT_IN:  # the built-in GPU specs have neither: no shape axis, no fresh-page cost
        assert BUILT_IN[name].fresh_output is None
        assert all(not c.by_shape for c in BUILT_IN[name].compute_efficiency.values())
