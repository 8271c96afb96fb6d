"""load_weights() on gpt-oss's checkpoint layout and with expert biases: what reaches the C++
runtime (a recorder stands in for it, no GPU needed) against the same weights given as halves,
and the refusals."""

import json
import pathlib

import numpy as np
import pytest

import megamoe
from conftest import SMALL_CONFIG, load_gpt_oss_checkpoint
from megamoe._tensors import HostArray
from test_inputs import offline_layer

E, D, I = 8, 512, 256


@pytest.fixture
def biased_config(tmp_path):
    """The small config with model.expert_biases true (a config file is named as its name)."""
    cfg = json.loads(pathlib.Path(SMALL_CONFIG).read_text())
    cfg["model"]["expert_biases"] = True
    path = tmp_path / "small_a8w4.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def interleave(gate, up):
    """gpt-oss's rows from the halves: row 2i gate i, row 2i+1 up i (axis 1)."""
    out = np.empty((gate.shape[0], 2 * gate.shape[1]) + gate.shape[2:], gate.dtype)
    for i in range(gate.shape[1]):
        out[:, 2 * i], out[:, 2 * i + 1] = gate[:, i], up[:, i]
    return out


def random_checkpoint(seed):
    """Halves of an MXFP4 checkpoint with biases: gate and up parts, W2, b1 parts, b2."""
    rng = np.random.default_rng(seed)
    u8 = lambda *shape: rng.integers(0, 256, shape, dtype=np.uint8)  # noqa: E731
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    return dict(gate=u8(E, I, D // 2), up=u8(E, I, D // 2), gate_s=u8(E, I, D // 32), up_s=u8(E, I, D // 32),
                w2=u8(E, D, I // 2), w2s=u8(E, D, I // 32), gate_b=f32(E, I), up_b=f32(E, I), b2=f32(E, D))


def recorded(layer):
    (call,) = layer.runtime._runtime.calls
    return call


def assert_same_call(a, b):
    assert a[0] == b[0] and len(a) == len(b)
    for x, y in zip(a[1:], b[1:]):
        assert x.dtype == y.dtype and x.flags.c_contiguous
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("four_d", [True, False])
def test_gpt_oss_mxfp4_uploads_the_bytes_of_its_halves(biased_config, four_d):
    c = random_checkpoint(1)
    halves = offline_layer(config=biased_config)
    halves.load_weights(np.concatenate((c["gate"], c["up"]), 1), c["w2"], np.concatenate((c["gate_s"], c["up_s"]), 1),
                        c["w2s"], b1=np.concatenate((c["gate_b"], c["up_b"]), 1), b2=c["b2"])
    blocks = interleave(c["gate"], c["up"])
    down = c["w2"]
    if four_d:  # gpt-oss's *_blocks: the same bytes, 16 a block of 32 values
        blocks, down = blocks.reshape(E, 2 * I, D // 32, 16), down.reshape(E, D, I // 32, 16)
    gpt = offline_layer(config=biased_config)
    gpt.load_weights(blocks, down, interleave(c["gate_s"], c["up_s"]), c["w2s"], layout="gpt_oss",
                     b1=interleave(c["gate_b"], c["up_b"]), b2=c["b2"])
    got, want = recorded(gpt), recorded(halves)
    assert got[0] == "load_mxfp4" and len(got) == 7  # four weight tensors, then b1 and b2
    assert_same_call(got, want)
    # Each expert's W1: its gate rows, then its up rows, with their scales and biases alike.
    _, w1, w1s, w2, w2s, b1, b2 = got
    for e in (0, E - 1):
        np.testing.assert_array_equal(w1[e, :I], c["gate"][e])
        np.testing.assert_array_equal(w1[e, I:], c["up"][e])
        np.testing.assert_array_equal(w1s[e, I:], c["up_s"][e])
        np.testing.assert_array_equal(b1[e, :I], c["gate_b"][e])
        np.testing.assert_array_equal(b1[e, I:], c["up_b"][e])
    assert w2.shape == (E, D, I // 2) and b2.dtype == np.float32
    np.testing.assert_array_equal(b2, c["b2"])


def test_gpt_oss_without_biases_uploads_none():
    c = random_checkpoint(2)
    layer = offline_layer()  # expert_biases false
    layer.load_weights(interleave(c["gate"], c["up"]), c["w2"], interleave(c["gate_s"], c["up_s"]), c["w2s"],
                       layout="gpt_oss")
    name, w1, *rest = recorded(layer)
    assert name == "load_mxfp4" and len(rest) == 3
    np.testing.assert_array_equal(w1, np.concatenate((c["gate"], c["up"]), 1))


def test_dense_gpt_oss_takes_transformers_parameters_as_they_are(biased_config):
    """transformers' GptOssExperts: gate_up_proj [E, D, 2I] (x @ W, output axis interleaved),
    down_proj [E, I, D]."""
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((E, 2 * I, D), dtype=np.float32)  # halves, [out, in]
    w2 = rng.standard_normal((E, D, I), dtype=np.float32)
    b1, b2 = rng.standard_normal((E, 2 * I), dtype=np.float32), rng.standard_normal((E, D), dtype=np.float32)
    gate_up_proj = interleave(w1[:, :I], w1[:, I:]).transpose(0, 2, 1)
    down_proj = w2.transpose(0, 2, 1)
    layer = offline_layer(config=biased_config)
    layer.load_weights(gate_up_proj, down_proj, layout="gpt_oss", b1=interleave(b1[:, :I], b1[:, I:]), b2=b2)
    halves = offline_layer(config=biased_config)
    halves.load_weights(w1, w2, b1=b1, b2=b2)
    assert recorded(layer)[0] == "load_fp32"
    assert_same_call(recorded(layer), recorded(halves))


def test_biases_of_halves_and_of_gate_and_up_apart_land_gate_first(biased_config):
    c = random_checkpoint(4)
    b1 = np.concatenate((c["gate_b"], c["up_b"]), 1)
    w1, w1s = np.concatenate((c["gate"], c["up"]), 1), np.concatenate((c["gate_s"], c["up_s"]), 1)
    calls = []
    for layout, w1_arg, w1s_arg, b1_arg in (("halves", w1, w1s, b1),
                                            ("separate_gate_up", (c["gate"], c["up"]), (c["gate_s"], c["up_s"]),
                                             (c["gate_b"], c["up_b"])),
                                            ("separate_gate_up", (c["gate"], c["up"]), (c["gate_s"], c["up_s"]), b1)):
        layer = offline_layer(config=biased_config)
        layer.load_weights(w1_arg, c["w2"], w1s_arg, c["w2s"], layout=layout, b1=b1_arg, b2=c["b2"])
        calls.append(recorded(layer))
    for call in calls:
        np.testing.assert_array_equal(call[5], b1)
        np.testing.assert_array_equal(call[6], c["b2"])
        assert_same_call(call, calls[0])


def test_bfloat16_and_float16_biases_are_widened_exactly(biased_config):
    rng = np.random.default_rng(5)
    f = rng.standard_normal((E, 2 * I)).astype(np.float32)
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)  # bf16, truncated
    as_float = (bits.astype(np.uint32) << 16).view(np.float32)
    b2 = rng.standard_normal((E, D)).astype(np.float16)
    w1, w2 = np.zeros((E, 2 * I, D), np.float32), np.zeros((E, D, I), np.float32)
    layer = offline_layer(config=biased_config)
    layer.load_weights(w1, w2, b1=HostArray(bits, "bfloat16"), b2=b2)
    _, _, _, b1_got, b2_got = recorded(layer)
    assert b1_got.dtype == np.float32 and b2_got.dtype == np.float32
    np.testing.assert_array_equal(b1_got, as_float)
    np.testing.assert_array_equal(b2_got, b2.astype(np.float32))


def test_torch_bfloat16_biases_are_widened_exactly(biased_config):
    torch = pytest.importorskip("torch", reason="skipped: PyTorch is not installed here")
    b1 = torch.randn(E, 2 * I).bfloat16()
    b2 = torch.randn(E, D).half()
    layer = offline_layer(config=biased_config)
    layer.load_weights(torch.zeros(E, 2 * I, D), torch.zeros(E, D, I), b1=b1, b2=b2)
    _, _, _, b1_got, b2_got = recorded(layer)
    np.testing.assert_array_equal(b1_got, b1.float().numpy())
    np.testing.assert_array_equal(b2_got, b2.float().numpy())


def test_the_config_says_whether_biases_are_taken(biased_config):
    assert megamoe.config_info(biased_config)["expert_biases"] is True
    assert megamoe.config_info(SMALL_CONFIG)["expert_biases"] is False
    assert offline_layer(config=biased_config).expert_biases and not offline_layer().expert_biases
    w1, w2 = np.zeros((E, 2 * I, D), np.float32), np.zeros((E, D, I), np.float32)
    b1, b2 = np.zeros((E, 2 * I), np.float32), np.zeros((E, D), np.float32)
    layer = offline_layer(config=biased_config)
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(w1, w2)
    assert e.value.field == "b1, b2" and "model.expert_biases is true" in e.value.expected
    layer = offline_layer()
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(w1, w2, b1=b1, b2=b2)
    assert e.value.field == "b1, b2" and "model.expert_biases is false" in e.value.expected
    assert not layer.runtime._runtime.calls


def mxfp4_args(**over):
    args = dict(w1=np.zeros((E, 2 * I, D // 2), np.uint8), w2=np.zeros((E, D, I // 2), np.uint8),
                w1_scales=np.zeros((E, 2 * I, D // 32), np.uint8), w2_scales=np.zeros((E, D, I // 32), np.uint8),
                b1=np.zeros((E, 2 * I), np.float32), b2=np.zeros((E, D), np.float32))
    args.update(over)
    return args


@pytest.mark.parametrize("layout,over,field,expected", [
    ("halves", dict(b2=None), "b1, b2", "both (expert biases) or neither"),
    ("gpt_oss", dict(b1=None), "b1, b2", "both (expert biases) or neither"),
    ("gpt_oss", dict(b1=np.zeros((E, I), np.float32)), "b1", f"[{E}, {2 * I}]"),
    ("halves", dict(b2=np.zeros((E, I), np.float32)), "b2", f"[{E}, {D}]"),
    ("halves", dict(b1=np.zeros((E, 2 * I), np.float64)), "b1", "float32 or bfloat16 or float16"),
    ("gpt_oss", dict(b2=np.zeros((E, D), np.int32)), "b2", "float32 or bfloat16 or float16"),
    ("halves", dict(b1=(np.zeros((E, I), np.float32),) * 2), "b1", "layout='separate_gate_up'"),
    ("separate_gate_up", dict(w1=(np.zeros((E, I, D // 2), np.uint8),) * 2,
                              w1_scales=(np.zeros((E, I, D // 32), np.uint8),) * 2,
                              b1=(np.zeros((E, 2 * I), np.float32),) * 2), "b1[0] (gate)", f"[{E}, {I}]"),
    ("gpt_oss", dict(w1=(np.zeros((E, I, D // 2), np.uint8),) * 2), "w1", "interleaved by row"),
    ("gpt_oss", dict(w1=np.zeros((E, 2 * I, D // 32, 8), np.uint8)), "w1", "gate_up_proj_blocks"),
    ("gpt_oss", dict(w2=np.zeros((E, I, D // 32, 16), np.uint8)), "w2", "down_proj_blocks"),
    ("gpt_oss", dict(w1_scales=np.zeros((E, 2 * I, D // 16), np.uint8)), "w1_scales", f"[{E}, {2 * I}, {D // 32}]"),
    ("gpt_oss", dict(w1_scales=np.zeros(7, np.uint8)), "w1_scales", f"[{E}, {2 * I}, {D // 32}]"),
    ("gpt_oss", dict(w1=np.zeros((E, I, D), np.float32), w2=np.zeros((E, I, D), np.float32), w1_scales=None,
                     w2_scales=None), "w1", "GptOssExperts.gate_up_proj"),
    ("gpt_oss", dict(w1=np.zeros((E, D, 2 * I), np.float32), w2=np.zeros((E, D, I), np.float32), w1_scales=None,
                     w2_scales=None), "w2", "GptOssExperts.down_proj"),
    ("halves", dict(w1=np.zeros((E, 2 * I, D // 32, 16), np.uint8)), "w1", "layout='gpt_oss'"),
    ("gpt-oss", {}, "layout", "'gpt_oss'"),
])
def test_a_bad_bias_or_gpt_oss_tensor_is_named(biased_config, layout, over, field, expected):
    layer = offline_layer(config=biased_config)
    with pytest.raises(megamoe.InputError) as e:
        layer.load_weights(**mxfp4_args(**over), layout=layout)
    assert e.value.field == field and expected in e.value.expected, str(e.value)
    assert not layer.runtime._runtime.calls  # nothing uploaded


def test_what_gpt_oss_uploads_computes_what_transformers_gpt_oss_experts_compute(biased_config):
    """The halves and biases load_weights makes of a gpt-oss checkpoint, dequantized and run in
    fp32 as the layer runs them (gate = W1[:I] x + b1[:I], up = W1[I:] x + b1[I:], gpt-oss's
    SwiGLU, W2 h + b2), against transformers' GptOssExperts holding the same checkpoint through
    transformers' own MXFP4 dequantizer."""
    torch = pytest.importorskip("torch", reason="skipped: PyTorch is not installed here")
    pytest.importorskip("transformers", reason="skipped: transformers is not installed here")
    try:
        import transformers.integrations.mxfp4  # noqa: F401 (load_gpt_oss_checkpoint's dequantizer)
        from transformers.models.gpt_oss.configuration_gpt_oss import GptOssConfig
        from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts
    except ImportError as e:
        pytest.skip(f"skipped: this transformers has no gpt-oss experts or MXFP4 dequantizer ({e})")
    gen = torch.Generator().manual_seed(6)
    ckpt = {"gate_up_proj_blocks": torch.randint(0, 256, (E, 2 * I, D // 32, 16), dtype=torch.uint8, generator=gen),
            "gate_up_proj_scales": torch.randint(116, 122, (E, 2 * I, D // 32), dtype=torch.uint8, generator=gen),
            "gate_up_proj_bias": torch.randn(E, 2 * I, generator=gen).bfloat16(),
            "down_proj_blocks": torch.randint(0, 256, (E, D, I // 32, 16), dtype=torch.uint8, generator=gen),
            "down_proj_scales": torch.randint(116, 122, (E, D, I // 32), dtype=torch.uint8, generator=gen),
            "down_proj_bias": torch.randn(E, D, generator=gen).bfloat16()}
    layer = offline_layer(config=biased_config)
    layer.load_weights(ckpt["gate_up_proj_blocks"], ckpt["down_proj_blocks"], ckpt["gate_up_proj_scales"],
                       ckpt["down_proj_scales"], layout="gpt_oss", b1=ckpt["gate_up_proj_bias"],
                       b2=ckpt["down_proj_bias"])
    _, w1, w1s, w2, w2s, b1, b2 = recorded(layer)
    w1, w2 = (torch.from_numpy(megamoe.dequantize_mxfp4(p, s)) for p, s in ((w1, w1s), (w2, w2s)))
    b1, b2 = torch.from_numpy(b1), torch.from_numpy(b2)

    experts = GptOssExperts(GptOssConfig(hidden_size=D, intermediate_size=I, num_local_experts=E,
                                         num_experts_per_tok=4, num_hidden_layers=1, experts_implementation="eager"))
    limit, alpha = experts.limit, experts.alpha
    tokens, K = 16, 4
    x = torch.randn(tokens, D, generator=gen)
    ids = torch.stack([torch.randperm(E, generator=gen)[:K] for _ in range(tokens)])
    weights = torch.softmax(torch.randn(tokens, K, generator=gen), dim=-1)
    load_gpt_oss_checkpoint(experts, ckpt)
    with torch.no_grad():
        ref = experts(x, ids, weights)
        y = torch.zeros_like(x)
        for t in range(tokens):
            for k in range(K):
                e = int(ids[t, k])
                h = w1[e] @ x[t] + b1[e]
                gate, up = h[:I].clamp(max=limit), h[I:].clamp(-limit, limit)
                out = w2[e] @ ((up + 1) * gate * torch.sigmoid(alpha * gate)) + b2[e]
                y[t] += weights[t, k] * out
    assert ((y - ref).norm() / ref.norm()).item() < 1e-5
