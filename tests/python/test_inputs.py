"""The checks a call's and load_weights()'s arguments get before anything reaches the GPU, and
what reaches it: run on a Layer whose C++ runtime is replaced by a recorder (no GPU needed)."""

import numpy as np
import pytest

import megamoe
from conftest import SMALL_CONFIG


class FakeWeights:
    """What the C++ runtime's loads return: a layer's weights, as the recorder made them."""

    flushed_blocks, resident_bytes, bytes = 0, 0, 0


class Recorder:
    """Stands in for the C++ runtime: records what the layer would launch or upload."""

    def __init__(self):
        self.calls = []
        self.loads = []  # (experts, stage) of each upload

    def forward(self, weights, *args):
        assert isinstance(weights, FakeWeights)  # the layer's own weights go with each call
        self.calls.append(("forward",) + args)

    def _load(self, name, experts, stage, arrays):
        self.calls.append((name,) + arrays)
        self.loads.append((experts, stage))
        return FakeWeights()

    def load_mxfp4(self, experts, stage, *arrays):
        return self._load("load_mxfp4", experts, stage, arrays)

    def load_fp32(self, experts, stage, *arrays):
        return self._load("load_fp32", experts, stage, arrays)

    def load_bf16(self, experts, stage, *arrays):
        return self._load("load_bf16", experts, stage, arrays)

    def replace_experts(self, weights, slots, staged, stream):
        self.calls.append(("replace_experts", slots, staged, stream))


def offline_runtime(max_tokens=64, config=SMALL_CONFIG):
    info = megamoe.config_info(config)
    rt = megamoe.Runtime.__new__(megamoe.Runtime)
    rt._info = dict(info, config=info["name"], path="portable", world=1, rank=0, max_tokens=max_tokens,
                    experts_per_rank=info["experts"])  # world 1: every expert
    rt._device = 0
    rt._runtime = Recorder()
    rt._workspace = {"routed_rows": 0, "total": 0}
    rt.strict, rt._held = False, megamoe.CallErrors()
    return rt


def offline_layer(max_tokens=64, config=SMALL_CONFIG):
    layer = offline_runtime(max_tokens, config).layer()
    layer._weights = FakeWeights()
    return layer


class CudaArray:
    """A device array known only through __cuda_array_interface__ (as Numba's or older
    libraries' are); its address is made up: nothing dereferences it here."""

    def __init__(self, shape, typestr, ptr=0x7F0000000000, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


E, D, I, K = 8, 512, 256, 4


def call_args(tokens=5, **over):
    args = {"x": CudaArray((tokens, D), "<u2", 0x7F0000001000), "topk_ids": CudaArray((tokens, K), "<i4", 0x7F0000002000),
            "topk_weights": CudaArray((tokens, K), "<f4", 0x7F0000003000), "out": CudaArray((tokens, D), "<u2", 0x7F0000004000)}
    args.update(over)
    return args


def test_a_good_call_launches_with_the_arrays_addresses_tokens_and_stream():
    layer = offline_layer()
    a = call_args()
    y = layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"], stream=1234)
    assert y is a["out"]
    assert layer.runtime._runtime.calls == [("forward", 0x7F0000001000, 0x7F0000002000, 0x7F0000003000, 0x7F0000004000, 5, 1234)]


class Stream:
    ptr = 777


def test_a_stream_object_with_ptr_is_read():
    layer = offline_layer()
    a = call_args()
    layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"], stream=Stream())
    assert layer.runtime._runtime.calls[0][-1] == 777


def test_zero_tokens_are_a_call():
    layer = offline_layer()
    a = call_args(tokens=0)
    layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"])
    assert layer.runtime._runtime.calls[0][5] == 0


@pytest.mark.parametrize("field,array,expected", [
    ("x", CudaArray((5, 256), "<u2"), "[tokens, 512]"),
    ("x", CudaArray((5, D), "<f4"), "bfloat16 or uint16"),
    ("topk_ids", CudaArray((5, 3), "<i4"), "[5, 4]"),
    ("topk_ids", CudaArray((5, K), "<i8"), "int32"),
    ("topk_weights", CudaArray((4, K), "<f4"), "[5, 4]"),
    ("topk_weights", CudaArray((5, K), "<f2"), "float32"),
    ("topk_weights", CudaArray((5, K), "<f4", strides=(32, 4)), "contiguous"),
    ("x", CudaArray((5, D), "<u2", ptr=0x7F0000001008), "16-byte aligned"),
    ("out", CudaArray((5, 511), "<u2"), "[5, 512]"),
    ("out", CudaArray((5, D), "<u2", ptr=0x7F0000004002), "16-byte aligned"),
])
def test_a_bad_argument_is_named_with_what_was_expected(field, array, expected):
    layer = offline_layer()
    a = call_args(**{field: array})
    with pytest.raises(megamoe.InputError) as e:
        layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"])
    assert e.value.field == field and expected in e.value.expected, str(e.value)
    assert isinstance(e.value, ValueError) and field in str(e.value)
    assert layer.runtime._runtime.calls == []


def test_more_tokens_than_max_tokens_are_refused():
    layer = offline_layer(max_tokens=4)
    a = call_args(tokens=5)
    with pytest.raises(megamoe.InputError) as e:
        layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"])
    assert "max_tokens = 4" in e.value.expected


def test_host_arrays_are_refused_for_a_call():
    layer = offline_layer()
    x = np.zeros((5, D), np.uint16)
    a = call_args()
    with pytest.raises(megamoe.InputError) as e:
        layer(x, a["topk_ids"], a["topk_weights"], out=a["out"])
    assert e.value.field == "x" and "cuda:0" in e.value.expected


def test_no_out_for_an_array_megamoe_cannot_allocate_is_named():
    layer = offline_layer()
    a = call_args()
    with pytest.raises(megamoe.InputError) as e:
        layer(a["x"], a["topk_ids"], a["topk_weights"])
    assert e.value.field == "out"


def random_mxfp4_bytes(rng, n):
    """Random MXFP4 checkpoint bytes of n experts: w1, w1_scales, w2, w2_scales."""
    return tuple(rng.integers(0, 256, shape, dtype=np.uint8)
                 for shape in ((n, 2 * I, D // 2), (n, 2 * I, D // 32), (n, D, I // 2), (n, D, I // 32)))


def test_mxfp4_weights_are_checked_then_uploaded_as_they_are():
    layer = offline_layer()
    w1, w1s, w2, w2s = random_mxfp4_bytes(np.random.default_rng(0), E)
    layer.load_weights(w1, w2, w1s, w2s)
    (name, *got), = layer.runtime._runtime.calls
    assert name == "load_mxfp4"
    for a, b in zip(got, (w1, w1s, w2, w2s)):
        np.testing.assert_array_equal(a, b)


def test_gate_and_up_apart_are_joined_gate_rows_first():
    """layout='separate_gate_up' (compressed-tensors): each expert's W1 is its gate rows, then its
    up rows, with their scales alike; W2 as given."""
    layer = offline_layer()
    rng = np.random.default_rng(1)
    gate, up = (rng.integers(0, 256, (E, I, D // 2), dtype=np.uint8) for _ in range(2))
    gate_s, up_s = (rng.integers(0, 256, (E, I, D // 32), dtype=np.uint8) for _ in range(2))
    w2 = rng.integers(0, 256, (E, D, I // 2), dtype=np.uint8)
    w2s = rng.integers(0, 256, (E, D, I // 32), dtype=np.uint8)
    layer.load_weights((gate, up), w2, (gate_s, up_s), w2s, layout="separate_gate_up")
    (name, w1, w1s, got_w2, got_w2s), = layer.runtime._runtime.calls
    assert name == "load_mxfp4"
    for e in range(E):
        np.testing.assert_array_equal(w1[e, :I], gate[e])
        np.testing.assert_array_equal(w1[e, I:], up[e])
        np.testing.assert_array_equal(w1s[e, :I], gate_s[e])
        np.testing.assert_array_equal(w1s[e, I:], up_s[e])
    np.testing.assert_array_equal(got_w2, w2)
    np.testing.assert_array_equal(got_w2s, w2s)
    # Dense halves apart too, bfloat16 kept as its bits.
    layer = offline_layer()
    g, u = rng.standard_normal((E, I, D), dtype=np.float32), rng.standard_normal((E, I, D), dtype=np.float32)
    layer.load_weights((g, u), rng.standard_normal((E, D, I), dtype=np.float32), layout="separate_gate_up")
    (name, w1, _), = layer.runtime._runtime.calls
    assert name == "load_fp32"
    np.testing.assert_array_equal(w1, np.concatenate((g, u), axis=1))


def test_layout_mistakes_the_shapes_show_are_named():
    layer = offline_layer()
    gate = np.zeros((E, I, D // 2), np.uint8)
    w2, w2s = np.zeros((E, D, I // 2), np.uint8), np.zeros((E, D, I // 32), np.uint8)
    scales = np.zeros((E, I, D // 32), np.uint8)
    with pytest.raises(megamoe.InputError) as e:  # a pair without the layout
        layer.load_weights((gate, gate), w2, (scales, scales), w2s)
    assert e.value.field == "w1" and "separate_gate_up" in e.value.expected
    with pytest.raises(megamoe.InputError) as e:  # one tensor with it
        layer.load_weights(np.zeros((E, 2 * I, D // 2), np.uint8), w2, (scales, scales), w2s, layout="separate_gate_up")
    assert e.value.field == "w1"
    with pytest.raises(megamoe.InputError) as e:  # halves passed as the gate: 2I rows
        layer.load_weights((np.zeros((E, 2 * I, D // 2), np.uint8), gate), w2, (scales, scales), w2s,
                           layout="separate_gate_up")
    assert e.value.field == "w1[0] (gate)" and str(I) in e.value.expected
    with pytest.raises(megamoe.InputError) as e:  # up unlike gate
        layer.load_weights((gate, np.zeros((E, I, D // 2 + 1), np.uint8)), w2, (scales, scales), w2s,
                           layout="separate_gate_up")
    assert e.value.field == "w1[1] (up)"
    with pytest.raises(megamoe.InputError) as e:  # gpt-oss's 4-D blocks
        layer.load_weights(np.zeros((E, 2 * I, D // 32, 16), np.uint8), w2, np.zeros((E, 2 * I, D // 32), np.uint8), w2s)
    assert e.value.field == "w1" and "gpt-oss" in e.value.expected and "layout='gpt_oss'" in e.value.expected
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(gate, w2, scales, w2s, layout="interleaved")
    assert e.value.field == "layout" and "'interleaved'" in e.value.value
    assert not layer.runtime._runtime.calls  # nothing uploaded


@pytest.mark.parametrize("field,index,shape", [
    ("w1", 0, (E, 2 * I, D // 2 + 1)), ("w1_scales", 2, (E, 2 * I, D // 16)),
    ("w2", 1, (E + 1, D, I // 2)), ("w2_scales", 3, (E, I, D // 32)),
])
def test_a_wrong_mxfp4_shape_is_named(field, index, shape):
    layer = offline_layer()
    arrays = [np.zeros((E, 2 * I, D // 2), np.uint8), np.zeros((E, D, I // 2), np.uint8),
              np.zeros((E, 2 * I, D // 32), np.uint8), np.zeros((E, D, I // 32), np.uint8)]
    arrays[index] = np.zeros(shape, np.uint8)
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(*arrays)
    assert e.value.field == field and str(list(shape)) in e.value.value


def test_a_wrong_mxfp4_dtype_is_named():
    layer = offline_layer()
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(np.zeros((E, 2 * I, D // 2), np.int8), np.zeros((E, D, I // 2), np.uint8),
                           np.zeros((E, 2 * I, D // 32), np.uint8), np.zeros((E, D, I // 32), np.uint8))
    assert e.value.field == "w1" and "int8" in e.value.value


def test_one_scale_tensor_alone_is_refused():
    layer = offline_layer()
    with pytest.raises(megamoe.InputError):
        layer.load_weights(np.zeros(1), np.zeros(1), w1_scales=np.zeros(1))


def test_dense_fp32_weights_are_uploaded_for_quantization():
    layer = offline_layer()
    w1, w2 = np.ones((E, 2 * I, D), np.float32), np.ones((E, D, I), np.float32)
    layer.load_weights(w1, w2)
    assert [c[0] for c in layer.runtime._runtime.calls] == ["load_fp32"]


@pytest.mark.parametrize("w1_dtype,w2_dtype,field", [(np.uint16, np.uint16, "w1"), (np.float32, np.float16, "w2"),
                                                      (np.float64, np.float64, "w1")])
def test_dense_weights_of_another_dtype_are_named(w1_dtype, w2_dtype, field):
    layer = offline_layer()
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(np.ones((E, 2 * I, D), w1_dtype), np.ones((E, D, I), w2_dtype))
    assert e.value.field == field and "dtype" in e.value.value
    assert layer.runtime._runtime.calls == []


def test_staged_experts_are_checked_as_weights_are_and_uploaded_for_their_count():
    layer = offline_layer()
    rng = np.random.default_rng(4)
    n = 3
    w1, w1s, w2, w2s = random_mxfp4_bytes(rng, n)
    layer.stage_experts(w1, w2, w1s, w2s)
    (name, *got), = layer.runtime._runtime.calls
    assert name == "load_mxfp4" and layer.runtime._runtime.loads == [(n, True)]
    for a, b in zip(got, (w1, w1s, w2, w2s)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(megamoe.InputError, match="w2: shape"):  # a count that differs from w1's is named
        layer.stage_experts(w1, w2[:2], w1s, w2s)
    layer.load_weights(rng.standard_normal((E, 2 * I, D), dtype=np.float32),
                       rng.standard_normal((E, D, I), dtype=np.float32))
    assert layer.runtime._runtime.loads[-1] == (E, False)
    layer.replace_experts([2, 0, 5], "staged", stream=99)
    assert layer.runtime._runtime.calls[-1] == ("replace_experts", [2, 0, 5], "staged", 99)


class ErrorsRecorder(Recorder):
    """A runtime whose calls drop rows: take_errors() gives what `pending` holds, then clears it."""

    def __init__(self, capturing=False):
        super().__init__()
        self.capturing_now, self.pending = capturing, {}

    def forward(self, weights, *args):
        super().forward(weights, *args)
        self.pending = {"bad_ids": 1, "first_bad_slot": 6, "bounds_violations": 0, "dropped_rows": 40}

    def capturing(self, stream):
        return self.capturing_now

    def take_errors(self):
        taken, self.pending = self.pending, {}
        return {"bad_ids": 0, "first_bad_slot": -1, "bounds_violations": 0, "dropped_rows": 0, **taken}


def test_strict_raises_after_a_call_that_dropped_rows_and_keeps_every_error():
    layer = offline_layer()
    layer.runtime._runtime, layer.strict = ErrorsRecorder(), True
    layer.runtime._workspace = {"routed_rows": 300}
    a = call_args()
    with pytest.raises(megamoe.DroppedRowsError) as e:
        layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"], stream=5)
    assert e.value.dropped_rows == 40 and e.value.capacity == 300
    assert e.value.errors == megamoe.CallErrors(bad_ids=1, first_bad_slot=6, dropped_rows=40)
    assert layer.take_errors() == megamoe.CallErrors()  # given with the exception, not twice


def test_strict_under_capture_leaves_the_check_to_take_errors():
    layer = offline_layer()
    layer.runtime._runtime, layer.strict = ErrorsRecorder(capturing=True), True
    layer.runtime._workspace = {"routed_rows": 300}
    a = call_args()
    layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"], stream=5)  # no sync, no raise while captured
    with pytest.raises(megamoe.DroppedRowsError, match="40 routed row"):
        layer.take_errors()
    layer.strict = False
    layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"], stream=5)
    assert layer.take_errors() == megamoe.CallErrors(bad_ids=1, first_bad_slot=6, dropped_rows=40)  # counted only


def test_layers_of_one_runtime_each_call_with_their_own_weights():
    rt = offline_runtime()
    seen = []
    rt._runtime.forward = lambda weights, *args: seen.append((weights, args[-2]))
    first, second = rt.layer(), rt.layer()
    assert first.runtime is second.runtime is rt and first.handle != second.handle
    rng = np.random.default_rng(3)
    for layer in (first, second):
        layer.load_weights(rng.standard_normal((E, 2 * I, D), dtype=np.float32),
                           rng.standard_normal((E, D, I), dtype=np.float32))
    assert first._weights is not second._weights
    a = call_args()
    second(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"], stream=1)
    first(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"], stream=1)
    assert seen == [(second._weights, 5), (first._weights, 5)]
    first.strict = True  # the runtime's setting: every layer of it
    assert second.strict and rt.strict


def test_a_layer_without_weights_is_refused_before_any_launch():
    layer = offline_runtime().layer()
    a = call_args()
    with pytest.raises(megamoe.InputError, match="load_weights.. before the first call") as e:
        layer(a["x"], a["topk_ids"], a["topk_weights"], out=a["out"])
    assert e.value.field == "layer"
    assert layer.runtime._runtime.calls == []


@pytest.mark.parametrize("args,field,expected", [
    ({"max_tokens": 0}, "max_tokens", "from 1 to 32768"),
    ({"max_tokens": 40000}, "max_tokens", "from 1 to 32768"),
    ({"max_tokens": 8.5}, "max_tokens", "an int"),
    ({"device": -1}, "device", "0 or more"),
    ({"device": "cpu"}, "device", "'cuda'"),
    ({"timeout_ms": 0}, "timeout_ms", "1 or more"),
    ({"routed_rows_capacity": -5}, "routed_rows_capacity", "0 or more"),
    ({"experts_per_rank": 0}, "experts_per_rank", "1 or more"),
    ({"path": "fast"}, "path", "'hopper'"),
])
def test_runtime_arguments_are_checked_before_a_gpu_is_opened(args, field, expected):
    for make in (megamoe.Runtime, megamoe.Layer):
        with pytest.raises(megamoe.InputError) as e:
            make(SMALL_CONFIG, **args)
        assert e.value.field == field and expected in e.value.expected, str(e.value)


def test_an_unknown_config_is_a_config_error_before_a_gpu_is_opened():
    with pytest.raises(megamoe.ConfigError, match="no_such_model"):
        megamoe.Layer("no_such_model")


def test_a_swiglu_model_must_name_its_checkpoint_layout():
    """gpt-oss's blocks flattened to [E, 2I, D/2] look like halves: the layout must be named."""
    layer = offline_layer(config="gpt_oss_20b_a8w4")
    E2, D2, I2 = layer.experts_per_rank, layer.model_dim, layer.inter_dim
    w1 = np.zeros((E2, 2 * I2, D2 // 2), np.uint8)
    w2 = np.zeros((E2, D2, I2 // 2), np.uint8)
    s1, s2 = np.zeros((E2, 2 * I2, D2 // 32), np.uint8), np.zeros((E2, D2, I2 // 32), np.uint8)
    b1, b2 = np.zeros((E2, 2 * I2), np.float32), np.zeros((E2, D2), np.float32)
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(w1, w2, s1, s2, b1=b1, b2=b2)
    assert e.value.field == "layout" and "layout='gpt_oss'" in e.value.expected
    assert layer.runtime._runtime.calls == []  # nothing uploaded
    layer.load_weights(w1, w2, s1, s2, layout="halves", b1=b1, b2=b2)
    assert [c[0] for c in layer.runtime._runtime.calls] == ["load_mxfp4"]


@pytest.mark.parametrize("order", ["scales_first", "w1_scales_second"])
def test_mxfp4_tensors_in_the_wrong_order_are_named_with_the_order(order):
    layer = offline_layer()
    rng = np.random.default_rng(4)
    w1, w1s = rng.integers(0, 255, (E, 2 * I, D // 2), np.uint8), rng.integers(0, 255, (E, 2 * I, D // 32), np.uint8)
    w2, w2s = rng.integers(0, 255, (E, D, I // 2), np.uint8), rng.integers(0, 255, (E, D, I // 32), np.uint8)
    args = (w1s, w2s, w1, w2) if order == "scales_first" else (w1, w1s, w2, w2s)
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(*args)
    assert "load_weights(w1, w2, w1_scales, w2_scales)" in e.value.expected, str(e.value)
    assert "the shape of" in e.value.value
    assert layer.runtime._runtime.calls == []


def test_flushed_blocks_are_counted_per_matrix_and_warned():
    layer = offline_layer()

    class Flushed:
        flushed_blocks, flushed_w1, flushed_w2, resident_bytes, bytes = 3, 3, 0, 0, 0

    layer.runtime._runtime.load_fp32 = lambda *args: Flushed()
    rng = np.random.default_rng(5)
    with pytest.warns(UserWarning, match="3 MX block.s. of w1 flushed to zero"):
        assert layer.load_weights(rng.standard_normal((E, 2 * I, D), dtype=np.float32),
                                  rng.standard_normal((E, D, I), dtype=np.float32)) == 3
    assert layer.flushed_blocks == {"w1": 3, "w2": 0}


def test_blocks_and_scales_swapped_are_named_with_gate_and_up_apart_too():
    layer = offline_layer()
    gate, scales = np.zeros((E, I, D // 2), np.uint8), np.zeros((E, I, D // 32), np.uint8)
    w2, w2s = np.zeros((E, D, I // 2), np.uint8), np.zeros((E, D, I // 32), np.uint8)
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights((gate, gate), w2s, (scales, scales), w2, layout="separate_gate_up")
    assert e.value.field == "w2" and "the shape of w2_scales" in e.value.value
    assert "load_weights(w1, w2, w1_scales, w2_scales)" in e.value.expected
    assert not layer.runtime._runtime.calls
