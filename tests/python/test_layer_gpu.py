"""The layer on a GPU through PyTorch: against the plain-PyTorch fp32 block of
examples/moe_block.py and against transformers' Qwen3-MoE block and gpt-oss experts within the C++
check's bar, out= and streams, graph capture and replay, torch.compile(fullgraph=True), no host
sync inside a call, errors, and a group of two processes."""

import importlib.util
import json
import os
import pathlib
import socket
import sys

import pytest

import megamoe
from conftest import ROOT, SMALL_CONFIG, SMALL_FP8RES_CONFIG, load_gpt_oss_checkpoint

pytestmark = pytest.mark.gpu
EXACT_BAR = 0.06  # relL2 against the exact reference, as megamoe-run --check


def load_example():
    spec = importlib.util.spec_from_file_location("moe_block", ROOT / "examples" / "moe_block.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ex():
    return load_example()


@pytest.fixture(scope="module")
def small(ex):
    """The small config's layer with random MXFP4 weights, and those weights in fp32."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(11)
    layer = megamoe.Layer(SMALL_CONFIG, max_tokens=256, device=0)
    info = megamoe.config_info(SMALL_CONFIG)
    w1, w1s, w2, w2s = ex.random_mxfp4(info, layer.experts_per_rank, "cuda", gen)
    assert layer.load_weights(w1, w2, w1s, w2s) == 0
    return layer, info, ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s)


def inputs(layer, tokens, seed, experts=None):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    experts = experts or layer.experts_per_rank * layer.world
    x = torch.randn(tokens, layer.model_dim, device="cuda", generator=gen).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(experts, device="cuda", generator=gen)[: layer.topk] for _ in range(tokens)])
    ids = ids.reshape(tokens, layer.topk).to(torch.int32)
    w = torch.rand(tokens, layer.topk, device="cuda", generator=gen)
    return x, ids, w / w.sum(-1, keepdim=True)


@pytest.mark.parametrize("tokens", [1, 7, 64, 256])
def test_forward_matches_plain_pytorch_fp32(small, ex, tokens):
    layer, info, w1f, w2f = small
    x, ids, w = inputs(layer, tokens, seed=tokens)
    y = layer(x, ids, w)
    ref = ex.reference_experts(info, x, ids, w, w1f, w2f)
    assert y.dtype.is_floating_point and y.shape == x.shape
    assert ex.rel_l2(y, ref) <= EXACT_BAR
    assert not layer.take_errors().any()


def test_tune_writes_a_config_that_a_layer_runs_within_the_bar(ex, tmp_path):
    """megamoe.tune on the small config from generic_a8w4's table at two buckets: the config it
    writes loads, serves a layer, and that layer matches plain PyTorch fp32."""
    import torch

    lines = []
    out = tmp_path / "small_tuned.json"
    r = megamoe.tune(SMALL_CONFIG, out, start="generic_a8w4", buckets=[1, 64], pairs=4, progress=lines.append)
    assert r["config"] == str(out) and r["name"] == "small_tuned"
    assert [row["bucket"] for row in r["rows"]] == [1, 64]
    assert all(row["tuned_ms"] > 0 and row["start_ms"] > 0 and row["timed"] > 0 for row in r["rows"])
    assert any(l.startswith("clock: ") for l in lines), lines
    assert (tmp_path / "small_tuned.report.txt").read_text() == r["report"]
    gen = torch.Generator(device="cuda").manual_seed(5)
    layer = megamoe.Layer(str(out), max_tokens=64, device=0)
    info = megamoe.config_info(str(out))
    # The tuned table is this card's, beside the small config's own (which names no card).
    assert layer.bucket_table == torch.cuda.get_device_name(0), layer.bucket_table_note
    assert info["bucket_tables"] == ["default", layer.bucket_table]
    w1, w1s, w2, w2s = ex.random_mxfp4(info, layer.experts_per_rank, "cuda", gen)
    layer.load_weights(w1, w2, w1s, w2s)
    for tokens in (1, 64):
        x, ids, w = inputs(layer, tokens, seed=tokens)
        ref = ex.reference_experts(info, x, ids, w, ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s))
        assert ex.rel_l2(layer(x, ids, w), ref) <= EXACT_BAR
    assert not layer.take_errors().any()


def test_tune_over_two_loopback_ranks_reports_the_dispatch_knobs(tmp_path):
    """megamoe.tune(world=2) on the small config (8 experts, keyed at 8 a rank): bucket 64 is
    taken by 32 tokens a rank at world 2, and its dispatch knobs are timed there."""
    r = megamoe.tune(SMALL_CONFIG, tmp_path / "small_ep.json", buckets=[64], pairs=3, search_modes=False,
                     fp8_wire=False, fp8_resident=False, world=2, progress=False)
    (row,) = r["dispatch_rows"]
    assert row["bucket"] == 64 and row["tokens"] == 32
    assert row["timed"] > 0 and row["tuned_ms"] > 0 and row["start_ms"] > 0
    assert row["tuned"].startswith("dispatch ")
    assert "dispatch over 2 ranks (loopback)" in r["report"]


def test_tune_raises_what_its_progress_callback_raises(tmp_path):
    class Stop(Exception):
        pass

    seen = []

    def progress(line):
        seen.append(line)
        if len(seen) == 3:
            raise Stop(line)

    with pytest.raises(Stop):
        megamoe.tune(SMALL_CONFIG, tmp_path / "t.json", start="generic_a8w4", buckets=[1], pairs=3, progress=progress)
    assert len(seen) == 3  # nothing more reached the callback once it raised
    assert not (tmp_path / "t.json").exists()


def test_int64_ids_and_bf16_weights_are_converted(small, ex):
    layer, info, w1f, w2f = small
    x, ids, w = inputs(layer, 32, seed=3)
    y = layer(x, ids.long(), w.bfloat16())
    ref = ex.reference_experts(info, x, ids, w.bfloat16().float(), w1f, w2f)
    assert ex.rel_l2(y, ref) <= EXACT_BAR


def test_out_and_a_side_stream(small, ex):
    import torch

    layer, info, w1f, w2f = small
    x, ids, w = inputs(layer, 48, seed=4)
    out = torch.full_like(x, float("nan"))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = layer(x, ids, w, out=out)
    torch.cuda.current_stream().wait_stream(side)
    assert got is out and not torch.isnan(out).any()
    assert ex.rel_l2(out, ex.reference_experts(info, x, ids, w, w1f, w2f)) <= EXACT_BAR


class DLPackOnly:
    """An array known only through __dlpack__, as other frameworks' are."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


class CudaArrayOnly:
    """An array known only through __cuda_array_interface__ (bf16 as its uint16 bits)."""

    def __init__(self, tensor):
        import torch

        self.tensor = tensor.view(torch.uint16) if tensor.dtype == torch.bfloat16 else tensor
        self.__cuda_array_interface__ = self.tensor.__cuda_array_interface__


@pytest.mark.parametrize("wrap", [DLPackOnly, CudaArrayOnly])
def test_arrays_of_other_frameworks_with_an_explicit_stream(small, ex, wrap):
    import torch

    layer, info, w1f, w2f = small
    x, ids, w = inputs(layer, 20, seed=16)
    out = torch.full_like(x, float("nan"))
    stream = torch.cuda.current_stream()
    got = layer(wrap(x), wrap(ids), wrap(w), out=wrap(out), stream=stream.cuda_stream)
    assert isinstance(got, wrap)
    stream.synchronize()
    assert ex.rel_l2(out, ex.reference_experts(info, x, ids, w, w1f, w2f)) <= EXACT_BAR


def test_zero_tokens(small):
    import torch

    layer = small[0]
    x = torch.empty(0, layer.model_dim, dtype=torch.bfloat16, device="cuda")
    ids = torch.empty(0, layer.topk, dtype=torch.int32, device="cuda")
    y = layer(x, ids, torch.empty(0, layer.topk, device="cuda"))
    assert y.shape == (0, layer.model_dim)


def test_bad_ids_are_skipped_and_counted(small, ex):
    layer, info, w1f, w2f = small
    x, ids, w = inputs(layer, 16, seed=5)
    ids[3, 1] = 1000
    ids[9, 0] = -7
    ids[4, 2] = -1  # an empty slot: not an error
    y = layer(x, ids, w)
    errors = layer.take_errors()
    assert errors.bad_ids == 2 and errors.first_bad_slot == 3 * layer.topk + 1
    assert ex.rel_l2(y, ex.reference_experts(info, x, ids, w, w1f, w2f)) <= EXACT_BAR


def test_workspace_bytes_is_what_was_stated_before_creation(small):
    layer = small[0]
    stated = megamoe.workspace_bytes(SMALL_CONFIG, max_tokens=256, path=layer.path)
    assert layer.workspace == {k: stated[k] for k in layer.workspace} and layer.workspace_bytes == stated["total"] > 0
    assert layer.weights_bytes == stated["weights"] > 0 and stated["model_total"] == stated["total"] + stated["weights"]
    assert layer.routed_rows_capacity == 256 * layer.topk
    assert layer.bucket_table == "default" and "names no card" in layer.bucket_table_note


def test_experts_replaced_in_place_mid_stream_and_under_a_graph(ex):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(12)
    info = megamoe.config_info(SMALL_CONFIG)
    layer = megamoe.Layer(SMALL_CONFIG, max_tokens=64, device=0)
    w1, w1s, w2, w2s = ex.random_mxfp4(info, 8, "cuda", gen)
    n1, n1s, n2, n2s = ex.random_mxfp4(info, 2, "cuda", gen)  # two new experts
    layer.load_weights(w1, w2, w1s, w2s)
    staged = layer.stage_experts(n1, n2, n1s, n2s)
    assert staged.experts == 2
    slots = [6, 1]
    after = [t.clone() for t in (w1, w1s, w2, w2s)]
    for t, new in zip(after, (n1, n1s, n2, n2s)):
        t[slots] = new
    before_f = ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s)
    after_f = ex.dequantize_mxfp4(after[0], after[1]), ex.dequantize_mxfp4(after[2], after[3])

    layer.prepare(32)
    first, second = inputs(layer, 32, seed=40), inputs(layer, 32, seed=41)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # captured while the slots hold the old experts
        y_graph = layer(*second)
    y1 = layer(*first)
    layer.replace_experts(slots, staged)  # on the current stream, between two calls, no sync
    y2 = layer(*second)
    torch.cuda.synchronize()
    assert ex.rel_l2(y1, ex.reference_experts(info, *first, *before_f)) <= EXACT_BAR
    ref2 = ex.reference_experts(info, *second, *after_f)
    assert ex.rel_l2(y2, ref2) <= EXACT_BAR
    assert ex.rel_l2(y2, ex.reference_experts(info, *second, *before_f)) > EXACT_BAR  # the slots did change
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y_graph, y2)  # the graph reads the new weights
    with pytest.raises(megamoe.Error, match="slots\\[1\\] = 8, expected 0..7"):
        layer.replace_experts([0, 8], staged)
    with pytest.raises(megamoe.Error, match="both 3"):
        layer.replace_experts([3, 3], staged)
    assert not layer.take_errors().any()


def test_redundant_slots_take_slot_ids_against_the_reference_over_logical_experts(ex):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(13)
    info = megamoe.config_info(SMALL_CONFIG)
    layer = megamoe.Layer(SMALL_CONFIG, max_tokens=64, device=0, redundant_experts=3)
    assert (layer.experts, layer.logical_experts, layer.experts_per_rank) == (11, 8, 11)
    w1, w1s, w2, w2s = ex.random_mxfp4(info, 8, "cuda", gen)
    placement = torch.tensor([5, 0, 1, 0, 2, 3, 0, 4, 5, 6, 7], device="cuda")  # expert 0 thrice, 5 twice
    layer.load_weights(w1[placement], w2[placement], w1s[placement], w2s[placement])
    x, ids, w = inputs(layer, 48, seed=60, experts=8)  # logical ids
    replicas = {e: [s for s in range(11) if int(placement[s]) == e] for e in range(8)}
    slot_ids = torch.tensor([[replicas[int(e)][(t + k) % len(replicas[int(e)])] for k, e in enumerate(row)]
                             for t, row in enumerate(ids.tolist())], dtype=torch.int32, device="cuda")
    y = layer(x, slot_ids, w)
    ref = ex.reference_experts(info, x, ids, w, ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s))
    assert ex.rel_l2(y, ref) <= EXACT_BAR
    assert not layer.take_errors().any()


@pytest.mark.parametrize("tokens", [1, 64, 256])
def test_shared_experts_in_the_call_match_plain_pytorch_fp32(ex, tokens):
    """Two shared experts of weight 0.5 beside the routed ones: the reference adds them to every
    token as two more slots; a bad id is counted at its own slot, and a graph replays the call."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(17)
    info = megamoe.config_info(SMALL_CONFIG)
    layer = megamoe.Layer(SMALL_CONFIG, max_tokens=256, device=0, shared_experts=2, shared_expert_scale=0.5)
    assert (layer.shared_experts, layer.shared_expert_scale, layer.experts_per_rank) == (2, 0.5, 8)
    w1, w1s, w2, w2s = ex.random_mxfp4(info, 8 + 2, "cuda", gen)  # the routed experts, then the shared ones
    layer.load_weights(w1, w2, w1s, w2s)
    x, ids, w = inputs(layer, tokens, seed=70 + tokens)
    y = layer(x, ids, w)
    wide_ids = torch.cat([ids, torch.tensor([8, 9], dtype=torch.int32, device="cuda").expand(tokens, 2)], dim=1)
    wide_w = torch.cat([w, torch.full((tokens, 2), 0.5, device="cuda")], dim=1)
    w1f, w2f = ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s)
    ref = ex.reference_experts(info, x, wide_ids, wide_w, w1f, w2f)
    assert ex.rel_l2(y, ref) <= EXACT_BAR
    assert ex.rel_l2(y, ex.reference_experts(info, x, ids, w, w1f, w2f)) > EXACT_BAR  # they do count
    assert not layer.take_errors().any()
    if tokens > 1:  # a bad id: skipped, counted, its slot named as the caller numbers it
        bad = ids.clone()
        bad[1, 2] = 99
        layer(x, bad, w)
        errors = layer.take_errors()
        assert (errors.bad_ids, errors.first_bad_slot) == (1, 1 * layer.topk + 2)


def test_shared_experts_match_transformers_deepseek_v3_moe(ex, tmp_path):
    """Against code that others wrote: transformers' DeepSeek-V3 MoE block (its sigmoid router
    with the group top-k, SiLU experts and one shared expert added to every token, in fp32) holding
    the same dequantized MXFP4 weights, fed the same bf16 x; the layer takes the block's routing."""
    import torch

    pytest.importorskip("transformers", reason="skipped: transformers is not installed here")
    try:
        from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE
    except ImportError as e:
        pytest.skip(f"skipped: this transformers has no DeepSeek-V3 MoE block ({e})")
    cfg = json.loads(pathlib.Path(SMALL_CONFIG).read_text())
    cfg["activation"] = {"kind": "silu"}
    cfg["name"] = "small_silu_shared"
    cfg["model"]["shared_experts"] = 1  # named by the config itself
    path = tmp_path / "small_silu_shared.json"  # a config file is named as its name
    path.write_text(json.dumps(cfg))
    layer = megamoe.Layer(str(path), max_tokens=256, device=0)
    info = megamoe.config_info(str(path))
    assert info["shared_experts"] == 1 and layer.shared_experts == 1
    E, D, I, K = layer.experts_per_rank, layer.model_dim, layer.inter_dim, layer.topk
    gen = torch.Generator(device="cuda").manual_seed(43)
    w1, w1s, w2, w2s = ex.random_mxfp4(info, E + 1, "cuda", gen)
    layer.load_weights(w1, w2, w1s, w2s)
    w1f, w2f = ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s)
    hf = DeepseekV3Config(hidden_size=D, moe_intermediate_size=I, n_routed_experts=E, n_shared_experts=1,
                          num_experts_per_tok=K, n_group=1, topk_group=1, norm_topk_prob=True,
                          routed_scaling_factor=2.5, hidden_act="silu", experts_implementation="eager")
    block = DeepseekV3MoE(hf).to(device="cuda", dtype=torch.float32)
    with torch.no_grad():
        experts = block.experts
        if isinstance(experts, torch.nn.ModuleList):  # one MLP an expert
            for e, mlp in enumerate(experts):
                mlp.gate_proj.weight.copy_(w1f[e, :I]), mlp.up_proj.weight.copy_(w1f[e, I:])
                mlp.down_proj.weight.copy_(w2f[e])
        else:  # the experts' tensors fused, [E, 2I, D] and [E, D, I] or transposed
            gu, dn = experts.gate_up_proj, experts.down_proj
            gu.copy_(w1f[:E] if gu.shape == (E, 2 * I, D) else w1f[:E].transpose(1, 2))
            dn.copy_(w2f[:E] if dn.shape == (E, D, I) else w2f[:E].transpose(1, 2))
        shared = block.shared_experts
        shared.gate_proj.weight.copy_(w1f[E, :I]), shared.up_proj.weight.copy_(w1f[E, I:])
        shared.down_proj.weight.copy_(w2f[E])
        block.gate.weight.copy_(torch.randn(E, D, device="cuda", generator=gen) * 0.05)
        for tokens in (1, 37, 256):
            x = torch.randn(tokens, D, device="cuda", generator=gen).to(torch.bfloat16)
            ref = block(x.float()[None])[0]
            routed = block.gate(x.float())
            ids = next(t for t in routed if not t.dtype.is_floating_point)
            weights = next(t for t in routed if t.dtype.is_floating_point and t.shape == ids.shape)
            y = layer(x, ids.to(torch.int32), weights.float())
            err = ex.rel_l2(y, ref)
            print(f"DeepSeek-V3 MoE block with a shared expert (transformers), {tokens} tokens: relL2 {err:.3e}")
            assert err <= EXACT_BAR
    assert not layer.take_errors().any()


def test_graph_capture_and_replay_on_new_inputs(small):
    import torch

    layer = small[0]
    x, ids, w = inputs(layer, 40, seed=6)
    layer.prepare(40)
    layer(x, ids, w)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y_static = layer(x, ids, w)
    for seed in (7, 8):
        x2, ids2, w2 = inputs(layer, 40, seed=seed)
        x.copy_(x2), ids.copy_(ids2), w.copy_(w2)
        graph.replay()
        eager = layer(x2, ids2, w2)
        torch.cuda.synchronize()
        assert torch.equal(y_static, eager)


def test_layers_of_one_runtime_chained_in_one_graph_each_against_its_reference(ex):
    """A model's MoE layers through one Runtime: three layers with their own weights, chained as a
    model runs them (each layer's output, RMS-normalised, the next one's input), captured in one CUDA graph and
    replayed on new inputs; each layer's output against plain PyTorch fp32 of its own weights on
    the input it got. One workspace: the runtime's, whatever its layers."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(41)
    info = megamoe.config_info(SMALL_CONFIG)
    runtime = megamoe.Runtime(SMALL_CONFIG, max_tokens=128, device=0)
    layers, dense = [], []
    for _ in range(3):
        layer = runtime.layer()
        w1, w1s, w2, w2s = ex.random_mxfp4(info, layer.experts_per_rank, "cuda", gen)
        layer.load_weights(w1, w2, w1s, w2s)
        layers.append(layer)
        dense.append((ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s)))
    assert all(l.runtime is runtime for l in layers)
    stated = megamoe.workspace_bytes(SMALL_CONFIG, max_tokens=128, path=runtime.path, layers=3)
    assert runtime.workspace_bytes == stated["total"]
    assert all(l.weights_bytes == stated["weights"] for l in layers)
    assert stated["model_total"] == stated["total"] + 3 * stated["weights"]
    tokens = 48
    x0, _, _ = inputs(layers[0], tokens, seed=1)
    routes = [inputs(layers[0], tokens, seed=10 + l)[1:] for l in range(3)]
    runtime.prepare(tokens)
    torch.cuda.synchronize()
    def rms_norm(h):  # between two MoE layers, as a model's block normalises its hidden state
        h = h.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ins, outs = [x0], []
        for layer, (ids, w) in zip(layers, routes):
            outs.append(layer(ins[-1], ids, w))
            ins.append(rms_norm(outs[-1]))
    for seed in (2, 3):
        x0.copy_(inputs(layers[0], tokens, seed=seed)[0])
        for y in outs:
            y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for l, ((ids, w), (w1f, w2f)) in enumerate(zip(routes, dense)):
            ref = ex.reference_experts(info, ins[l], ids, w, w1f, w2f)
            err = ex.rel_l2(outs[l], ref)
            assert err <= EXACT_BAR, f"layer {l}, replay seed {seed}: relL2 {err}"
            other = ex.rel_l2(outs[l], ex.reference_experts(info, ins[l], ids, w, *dense[(l + 1) % 3]))
            assert other > 0.5, f"layer {l} matches another layer's weights (relL2 {other})"
    assert not runtime.take_errors().any()


@pytest.mark.parametrize("config", ["gpt_oss_20b_a8w4", "kimi_k3_a8w4"])
def test_the_example_block_checks_itself_on_every_activation(config, monkeypatch):
    """examples/moe_block.py against its own plain-PyTorch reference: gpt-oss's SwiGLU (alpha, up
    offset, clamps) with expert biases, and Kimi-K3's SiTUv2."""
    ex = load_example()
    args = ["moe_block.py", "--config", config, "--tokens", "1,37"]
    if config == "kimi_k3_a8w4":
        args += ["--experts-per-rank", "32"]
    monkeypatch.setattr(sys, "argv", args)
    assert ex.main() == 0


@pytest.mark.parametrize("graph", [False, True])
def test_the_example_model_of_several_layers_through_one_runtime(graph, monkeypatch):
    """examples/moe_model.py: three MoE blocks with a residual stream and RMS norms through one
    runtime, each block against its plain-PyTorch fp32 twin, eagerly and as one captured graph."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    spec = importlib.util.spec_from_file_location("moe_model", ROOT / "examples" / "moe_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = ["moe_model.py", "--config", SMALL_CONFIG, "--experts-per-rank", "8", "--layers", "3", "--tokens", "1,48"]
    monkeypatch.setattr(sys, "argv", args + (["--graph"] if graph else []))
    assert module.main() == 0


def test_no_host_sync_inside_a_call(small):
    import torch

    layer = small[0]
    x, ids, w = inputs(layer, 64, seed=9)
    layer(x, ids, w)  # kernels loaded
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        layer(x, ids.long(), w.half())
        layer(x, ids, w, out=torch.empty_like(x))
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_torch_compile_fullgraph_over_the_example_block(small, ex):
    import torch

    layer, info, w1f, w2f = small
    gen = torch.Generator(device="cuda").manual_seed(12)
    router = torch.randn(layer.experts_per_rank, layer.model_dim, device="cuda", generator=gen) * 0.05
    block = ex.MoEBlock(layer, router)
    compiled = torch.compile(block, fullgraph=True)
    for tokens in (8, 100):
        x = torch.randn(tokens, layer.model_dim, device="cuda", generator=gen).to(torch.bfloat16)
        y = compiled(x)
        assert ex.rel_l2(y, ex.reference_block(block, info, x, w1f, w2f)) <= EXACT_BAR


def test_the_fake_op_gives_shape_and_dtype_without_running(small):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    layer = small[0]
    with FakeTensorMode():
        x = torch.empty(5, layer.model_dim, dtype=torch.bfloat16, device="cuda")
        y = torch.ops.megamoe.forward(x, torch.empty(5, layer.topk, dtype=torch.int32, device="cuda"),
                                      torch.empty(5, layer.topk, device="cuda"), layer.handle)
        assert y.shape == x.shape and y.dtype == torch.bfloat16


def test_wrong_torch_arguments_are_named(small):
    import torch

    layer = small[0]
    x, ids, w = inputs(layer, 4, seed=10)
    for args, field in (((x.float(), ids, w), "x"), ((x, ids[:, :2].contiguous(), w), "topk_ids"),
                        ((x.cpu(), ids, w), "x"), ((x, ids, w.t()), "topk_weights")):
        with pytest.raises(megamoe.InputError) as e:
            layer(*args)
        assert e.value.field == field, str(e.value)


def test_dense_bf16_weights_are_quantized_as_the_host_quantizer_does(ex):
    import numpy as np
    import torch

    layer = megamoe.Layer(SMALL_CONFIG, max_tokens=16, device=0)
    info = megamoe.config_info(SMALL_CONFIG)
    E, D, I = layer.experts_per_rank, layer.model_dim, layer.inter_dim
    gen = torch.Generator().manual_seed(13)
    w1 = (torch.randn(E, 2 * I, D, generator=gen) * 0.05).bfloat16()
    w2 = (torch.randn(E, D, I, generator=gen) * 0.05).bfloat16()
    layer.load_weights(w1, w2)
    p1, s1 = megamoe.quantize_mxfp4(w1)
    p2, s2 = megamoe.quantize_mxfp4(w2)
    w1f = ex.dequantize_mxfp4(torch.from_numpy(p1).cuda(), torch.from_numpy(s1).cuda())
    w2f = ex.dequantize_mxfp4(torch.from_numpy(p2).cuda(), torch.from_numpy(s2).cuda())
    x, ids, w = inputs(layer, 16, seed=14)
    assert ex.rel_l2(layer(x, ids, w), ex.reference_experts(info, x, ids, w, w1f, w2f)) <= EXACT_BAR
    assert np.array_equal(megamoe.dequantize_mxfp4(p1, s1), w1f.cpu().numpy())


def test_fp8_resident_weights_give_the_mxfp4_bits_and_can_be_refused(small, ex):
    import torch

    layer, info, _, _ = small
    E, D, I = layer.experts_per_rank, layer.model_dim, layer.inter_dim
    gen = torch.Generator(device="cuda").manual_seed(11)  # the small fixture's weights
    weights = ex.random_mxfp4(info, E, "cuda", gen)
    resident = megamoe.Layer(SMALL_FP8RES_CONFIG, max_tokens=256, device=0)
    refused = megamoe.Layer(SMALL_FP8RES_CONFIG, max_tokens=256, device=0, fp8_resident_weights=False)
    for other in (resident, refused):
        assert other.fp8_resident_bytes == 0  # nothing before the weights
        other.load_weights(weights[0], weights[2], weights[1], weights[3])
    if resident.path != "hopper":
        pytest.skip(f"the fp8-resident kernels are Hopper kernels; this GPU runs the {resident.path} path")
    assert resident.fp8_resident_bytes == E * (2 * I * D + D * I)  # e4m3: a byte a value
    assert refused.fp8_resident_bytes == 0 and layer.fp8_resident_bytes == 0
    for tokens in (1, 40, 256):
        x, ids, w = inputs(layer, tokens, seed=tokens + 300)
        y = layer(x, ids, w)
        assert torch.equal(resident(x, ids, w).view(torch.int16), y.view(torch.int16))
        assert torch.equal(refused(x, ids, w).view(torch.int16), y.view(torch.int16))


def test_kimi_k3_layer_matches_plain_pytorch_fp32(ex):
    import torch

    # One rank's share of EP8 (112 of the 896 experts) at world 1: the per-rank work on one GPU.
    layer = megamoe.Layer("kimi_k3_a8w4", max_tokens=128, device=0, experts_per_rank=112)
    assert (layer.experts, layer.experts_per_rank) == (112, 112)
    info = megamoe.config_info("kimi_k3_a8w4")
    gen = torch.Generator(device="cuda").manual_seed(15)
    w1, w1s, w2, w2s = ex.random_mxfp4(info, layer.experts_per_rank, "cuda", gen)
    layer.load_weights(w1, w2, w1s, w2s)
    w1f, w2f = ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s)
    for tokens in (1, 128):
        x, ids, w = inputs(layer, tokens, seed=tokens + 100)
        assert ex.rel_l2(layer(x, ids, w), ex.reference_experts(info, x, ids, w, w1f, w2f)) <= EXACT_BAR
    assert not layer.take_errors().any()


def test_layer_matches_transformers_qwen3_moe_block(ex, tmp_path):
    """Against code that others wrote: transformers' Qwen3-MoE sparse block (its router's softmax
    top-k renormalised, SiLU experts with gate and up as halves of one tensor, in fp32) holding the
    same dequantized MXFP4 weights, fed the same bf16 x; the layer takes the block's routing."""
    import torch

    pytest.importorskip("transformers", reason="skipped: transformers is not installed here")
    from transformers.models.qwen3_moe.configuration_qwen3_moe import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    cfg = json.loads(pathlib.Path(SMALL_CONFIG).read_text())
    cfg["activation"] = {"kind": "silu"}
    path = tmp_path / "small_a8w4.json"  # a config file is named as its name
    path.write_text(json.dumps(cfg))
    layer = megamoe.Layer(str(path), max_tokens=256, device=0)
    info = megamoe.config_info(str(path))
    E, D, I, K = layer.experts_per_rank, layer.model_dim, layer.inter_dim, layer.topk
    gen = torch.Generator(device="cuda").manual_seed(41)
    w1, w1s, w2, w2s = ex.random_mxfp4(info, E, "cuda", gen)
    layer.load_weights(w1, w2, w1s, w2s)
    hf = Qwen3MoeConfig(hidden_size=D, moe_intermediate_size=I, num_experts=E, num_experts_per_tok=K,
                        norm_topk_prob=True, hidden_act="silu", experts_implementation="eager")
    block = Qwen3MoeSparseMoeBlock(hf).to(device="cuda", dtype=torch.float32)
    with torch.no_grad():
        block.experts.gate_up_proj.copy_(ex.dequantize_mxfp4(w1, w1s))
        block.experts.down_proj.copy_(ex.dequantize_mxfp4(w2, w2s))
        block.gate.weight.copy_(torch.randn(E, D, device="cuda", generator=gen) * 0.05)
        for tokens in (1, 37, 256):
            x = torch.randn(tokens, D, device="cuda", generator=gen).to(torch.bfloat16)
            ref = block(x.float()[None])[0]
            _, scores, ids = block.gate(x.float())
            y = layer(x, ids.to(torch.int32), scores.float())
            err = ex.rel_l2(y, ref)
            print(f"Qwen3-MoE block (transformers), {tokens} tokens: relL2 {err:.3e}")
            assert err <= EXACT_BAR
    assert not layer.take_errors().any()


def random_gpt_oss_experts(experts, model_dim, inter_dim, gen):
    """gpt-oss's expert tensors as its checkpoints store them, drawn at random: e2m1 codes uniform;
    e8m0 scales over 2^-11..2^-6, six binades within a row as trained weights have; biases bf16,
    gate_up_proj_bias of deviation 3 (so that gate and up pass gpt-oss's clamp at 7 in a few
    percent of the rows) and down_proj_bias 2 (a third of the outputs' size, so that a lost or
    misplaced one shows)."""
    import torch

    def blocks_and_scales(rows, k):
        blocks = torch.randint(0, 256, (experts, rows, k // 32, 16), dtype=torch.uint8, device="cuda", generator=gen)
        scales = torch.randint(116, 122, (experts, rows, k // 32), dtype=torch.uint8, device="cuda", generator=gen)
        return blocks, scales

    gate_up, gate_up_scales = blocks_and_scales(2 * inter_dim, model_dim)
    down, down_scales = blocks_and_scales(model_dim, inter_dim)
    def bias(deviation, *shape):
        return (torch.randn(*shape, device="cuda", generator=gen) * deviation).to(torch.bfloat16)

    return {"gate_up_proj_blocks": gate_up, "gate_up_proj_scales": gate_up_scales,
            "gate_up_proj_bias": bias(3.0, experts, 2 * inter_dim), "down_proj_blocks": down,
            "down_proj_scales": down_scales, "down_proj_bias": bias(2.0, experts, model_dim)}


def test_layer_matches_transformers_gpt_oss_experts(ex):
    """Against code that others wrote: transformers' gpt-oss experts (GptOssExperts, eager, fp32:
    biases, the clamped SwiGLU with alpha 1.702 and up + 1, gate and up interleaved by row) holding
    a random gpt-oss checkpoint as transformers' own MXFP4 dequantizer makes it, routed as
    GptOssTopKRouter routes (top-k of the logits, softmax over the k) and fed the same bf16 x as
    fp32; the layer loads the same checkpoint tensors with layout="gpt_oss"."""
    import torch

    pytest.importorskip("transformers", reason="skipped: transformers is not installed here")
    try:
        import transformers.integrations.mxfp4  # noqa: F401 (load_gpt_oss_checkpoint's dequantizer)
        from transformers.models.gpt_oss.configuration_gpt_oss import GptOssConfig
        from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts, GptOssTopKRouter
    except ImportError as e:
        pytest.skip(f"skipped: this transformers has no gpt-oss experts or MXFP4 dequantizer ({e})")

    # 8 of gpt-oss-20b's 32 experts (its shape, activation and buckets): 0.8 GB of fp32 weights
    # in transformers' experts rather than 3.2.
    layer = megamoe.Layer("gpt_oss_20b_a8w4", max_tokens=256, device=0, experts_per_rank=8)
    E, D, I, K = layer.experts_per_rank, layer.model_dim, layer.inter_dim, layer.topk
    assert layer.expert_biases
    gen = torch.Generator(device="cuda").manual_seed(51)
    ckpt = random_gpt_oss_experts(E, D, I, gen)
    flushed = layer.load_weights(ckpt["gate_up_proj_blocks"], ckpt["down_proj_blocks"], ckpt["gate_up_proj_scales"],
                                 ckpt["down_proj_scales"], layout="gpt_oss", b1=ckpt["gate_up_proj_bias"],
                                 b2=ckpt["down_proj_bias"])
    assert flushed == 0

    hf = GptOssConfig(hidden_size=D, intermediate_size=I, num_local_experts=E, num_experts_per_tok=K,
                      num_hidden_layers=1, experts_implementation="eager")
    with torch.device("cuda"):
        experts, router = GptOssExperts(hf), GptOssTopKRouter(hf)
    # The config's activation is the one transformers' experts compute.
    info = megamoe.config_info("gpt_oss_20b_a8w4")
    assert info["activation"] == "swiglu" and info["up_offset"] == 1.0
    assert info["limit"] == pytest.approx(experts.limit) and info["alpha"] == pytest.approx(experts.alpha)
    load_gpt_oss_checkpoint(experts, ckpt)
    with torch.no_grad():
        router.weight.copy_(torch.randn(E, D, device="cuda", generator=gen) * 0.05)
        router.bias.copy_(torch.randn(E, device="cuda", generator=gen) * 0.1)
        for tokens in (1, 37, 256):
            x = torch.randn(tokens, D, device="cuda", generator=gen).to(torch.bfloat16)
            _, scores, ids = router(x.float())  # scores [T, K]: softmax over each token's top-k logits
            ref = experts(x.float(), ids, scores)
            y = layer(x, ids.to(torch.int32), scores.float())
            err = ex.rel_l2(y, ref)
            print(f"gpt-oss experts (transformers), {tokens} tokens: relL2 {err:.3e}")
            assert err <= EXACT_BAR
        # Each bias weighs in: without it transformers' output moves well past the bar, so a bias
        # lost or misplaced by the layer would fail above.
        for bias in (experts.gate_up_proj_bias, experts.down_proj_bias):
            kept = bias.clone()
            bias.zero_()
            assert ex.rel_l2(experts(x.float(), ids, scores), ref) > 2 * EXACT_BAR
            bias.copy_(kept)
    assert not layer.take_errors().any()


def _group_rank(rank, world, port, result_dir, **transport):
    """One process of a two-rank group on GPU 0 (ipc between two processes on one GPU, or as given)."""
    import torch
    import torch.distributed as dist

    ex = load_example()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.cuda.set_device(0)
        layer = megamoe.Layer(SMALL_CONFIG, max_tokens=64, device=0, group=dist.group.WORLD, timeout_ms=20000,
                              **transport)
        info = megamoe.config_info(SMALL_CONFIG)
        # Every rank draws every rank's weights from one seed and loads its own slice.
        gen = torch.Generator(device="cuda").manual_seed(21)
        w1, w1s, w2, w2s = ex.random_mxfp4(info, layer.experts_per_rank * world, "cuda", gen)
        e0, e1 = rank * layer.experts_per_rank, (rank + 1) * layer.experts_per_rank
        layer.load_weights(w1[e0:e1], w2[e0:e1], w1s[e0:e1], w2s[e0:e1])
        x, ids, w = inputs(layer, 24 + 8 * rank, seed=30 + rank)
        y = layer(x, ids, w)
        errors = layer.take_errors()
        ref = ex.reference_experts(info, x, ids, w, ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s))
        err = ex.rel_l2(y, ref)
        with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
            f.write(f"{err} {int(errors.any())}")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _layers_rank(rank, world, port, result_dir):
    """One process of a two-rank group whose one Runtime serves two layers, called in turn."""
    import torch
    import torch.distributed as dist

    ex = load_example()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.cuda.set_device(0)
        runtime = megamoe.Runtime(SMALL_CONFIG, max_tokens=64, device=0, group=dist.group.WORLD, timeout_ms=20000)
        info = megamoe.config_info(SMALL_CONFIG)
        gen = torch.Generator(device="cuda").manual_seed(22)  # every rank draws every layer's weights alike
        layers, dense = [], []
        for _ in range(2):
            layer = runtime.layer()
            w1, w1s, w2, w2s = ex.random_mxfp4(info, layer.experts_per_rank * world, "cuda", gen)
            e0, e1 = rank * layer.experts_per_rank, (rank + 1) * layer.experts_per_rank
            layer.load_weights(w1[e0:e1], w2[e0:e1], w1s[e0:e1], w2s[e0:e1])
            layers.append(layer)
            dense.append((ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s)))
        errs = []
        for call, l in enumerate((0, 1, 0)):  # layer 0, layer 1, layer 0: three calls of the group, no sync
            x, ids, w = inputs(layers[l], 16 + 8 * rank, seed=50 + 10 * call + rank)
            y = layers[l](x, ids, w)
            errs.append((y, ex.reference_experts(info, x, ids, w, *dense[l])))
        errors = runtime.take_errors()
        with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
            f.write(" ".join(str(ex.rel_l2(y, ref)) for y, ref in errs) + f" {int(errors.any())}")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_a_group_of_two_processes_serves_two_layers_through_one_runtime(tmp_path):
    results = [text.split() for text in _two_ranks(_layers_rank, tmp_path)]
    for rank, values in enumerate(results):
        *errs, errors = values
        assert len(errs) == 3 and all(float(e) <= EXACT_BAR for e in errs) and errors == "0", \
            f"rank {rank}: relL2 per call {errs}, errors {errors}; both: {results}"


def _two_ranks(rank_fn, tmp_path):
    """Runs rank_fn(rank, 2, port, result_dir) in two spawned processes; returns each rank's file."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(rank_fn, args=(2, port, str(tmp_path)), nprocs=2, join=True, start_method="spawn")
    return [(tmp_path / f"rank{rank}").read_text() for rank in range(2)]


def test_a_group_of_two_processes_through_torch_distributed(tmp_path):
    results = [text.split() for text in _two_ranks(_group_rank, tmp_path)]
    for rank, (err, errors) in enumerate(results):
        assert float(err) <= EXACT_BAR and errors == "0", f"rank {rank}: relL2 {err}, errors {errors}; both: {results}"


def _nvshmem_rank(rank, world, port, result_dir):
    _group_rank(rank, world, port, result_dir, transport="nvshmem", node_size=1)


def test_a_group_of_two_processes_on_nvshmem_every_peer_by_puts(tmp_path):
    """The nvshmem transport from torch.distributed: two processes on GPU 0, nodes of one rank (so
    every row, count and flag between them goes by NVSHMEM's puts), each rank against plain PyTorch."""
    results = [text.split() for text in _two_ranks(_nvshmem_rank, tmp_path)]
    for rank, (err, errors) in enumerate(results):
        assert float(err) <= EXACT_BAR and errors == "0", f"rank {rank}: relL2 {err}, errors {errors}; both: {results}"


def _strict_rank(rank, world, port, result_dir):
    """One process of a two-rank group whose rank 0 gets more rows than its capacity, strict."""
    import torch
    import torch.distributed as dist

    ex = load_example()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.cuda.set_device(0)
        layer = megamoe.Layer(SMALL_CONFIG, max_tokens=64, device=0, group=dist.group.WORLD, timeout_ms=20000,
                              routed_rows_capacity=40, strict=True)
        stated = megamoe.workspace_bytes(SMALL_CONFIG, max_tokens=64, world=2, path=layer.path,
                                         routed_rows_capacity=40)
        info = megamoe.config_info(SMALL_CONFIG)
        gen = torch.Generator(device="cuda").manual_seed(21)
        w1, w1s, w2, w2s = ex.random_mxfp4(info, layer.experts_per_rank, "cuda", gen)
        layer.load_weights(w1, w2, w1s, w2s)
        x, _, w = inputs(layer, 32, seed=50 + rank)
        # Every slot of both ranks to rank 0's experts: 2 x 32 x 4 rows for a capacity of 40.
        ids = torch.stack([torch.randperm(layer.experts_per_rank, device="cuda")[: layer.topk] for _ in range(32)])
        outcome = "none"
        try:
            layer(x, ids.to(torch.int32), w)
            outcome = "no error"
        except megamoe.DroppedRowsError as e:
            outcome = f"dropped {e.dropped_rows} capacity {e.capacity}"
        with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
            f.write(f"{int(layer.workspace == {k: stated[k] for k in layer.workspace})}|{outcome}")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_strict_raises_for_rows_past_the_capacity_and_the_workspace_is_as_stated(tmp_path):
    results = [text.split("|") for text in _two_ranks(_strict_rank, tmp_path)]
    assert results[0] == ["1", "dropped 216 capacity 40"], results  # 256 rows sent to rank 0, 40 kept
    assert results[1] == ["1", "no error"], results
