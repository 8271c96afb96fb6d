"""megamoe.deep_gemm on a GPU: DeepGEMM's buffer, weight transform and fused call give the bits
megamoe.Layer gives on the same weights and inputs (one GPU, and a group of two processes on
GPU 0), within the exact bar of plain PyTorch fp32 with DeepGEMM's clamped SwiGLU; scales given
packed four to an int32 give the same bits."""

import importlib.util
import os

import pytest

import megamoe
from conftest import ROOT

pytestmark = pytest.mark.gpu
E, H, I, K, CLAMP = 16, 512, 256, 4, 7.0


def load_example():
    spec = importlib.util.spec_from_file_location("moe_block", ROOT / "examples" / "moe_block.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quantize_x(x, form):
    """bf16 [T, H] as DeepGEMM's callers hand it: e4m3 with one power-of-two scale per 32 values,
    four e8m0 scales an int32 word; or (its SM90 buffer) one float32 scale amax / 448 per 128."""
    import torch

    t = x.shape[0]
    if form == "fp32_per_128":
        blocks = x.float().reshape(t, H // 128, 128)
        scale = blocks.abs().amax(-1).clamp_min(1e-30) / 448
        return (blocks / scale.unsqueeze(-1)).to(torch.float8_e4m3fn).reshape(t, H), scale
    blocks = x.float().reshape(t, H // 32, 32)
    e = torch.ceil(torch.log2(blocks.abs().amax(-1).clamp_min(1e-30) / 448)).clamp(-126, 126)
    q = (blocks / torch.exp2(e).unsqueeze(-1)).to(torch.float8_e4m3fn).reshape(t, H)
    return q, (e + 127).to(torch.uint8).reshape(t, H // 32).contiguous().view(torch.int32)


def routing(t, experts, gen):
    import torch

    ids = torch.stack([torch.randperm(experts, device="cuda", generator=gen)[:K] for _ in range(t)])
    ids[0, 1] = -1  # an empty slot
    w = torch.rand(t, K, device="cuda", generator=gen)
    return ids.to(torch.int64), w / w.sum(-1, keepdim=True)


def call(dg, buffer, l1, x, ids, w):
    import torch

    t = x.shape[0]
    q, sf = quantize_x(x, buffer.scale_form)
    buffer.x[:t].copy_(q), buffer.x_sf[:t].copy_(sf)
    buffer.topk_idx[:t].copy_(ids), buffer.topk_weights[:t].copy_(w)
    y = torch.empty(t, H, dtype=torch.bfloat16, device="cuda")
    dg.fp8_fp4_mega_moe(y, l1, l1, buffer, activation_clamp=CLAMP)
    return y, dg._dequantize_x(buffer.x, buffer.x_sf, t, H)


@pytest.mark.parametrize("form", ["device", "ue8m0_per_32", "fp32_per_128"])
def test_one_gpu_same_bits_as_the_layer_and_within_the_bar(form):
    """The buffer as DeepGEMM makes it for this GPU, and each of its two scale forms."""
    import torch
    import megamoe.deep_gemm as dg

    ex = load_example()
    gen = torch.Generator(device="cuda").manual_seed(3)
    info = {"model_dim": H, "inter_dim": I, "activation": "swiglu", "limit": CLAMP, "alpha": 1.0, "up_offset": 0.0}
    w1, w1s, w2, w2s = ex.random_mxfp4(info, E, "cuda", gen)
    buffer = dg.get_symm_buffer_for_mega_moe(None, E, 64, K, H, I)
    if form == "device":
        assert buffer.scale_form == ("fp32_per_128" if torch.cuda.get_device_capability()[0] == 9 else "ue8m0_per_32")
    else:
        buffer = dg.SymmBuffer(None, E, 64, K, H, I, buffer.device, form)
    l1, _ = dg.transform_weights_for_mega_moe((w1, w1s), (w2, w2s))
    x = torch.randn(40, H, device="cuda", generator=gen).to(torch.bfloat16)
    ids, w = routing(40, E, gen)
    y, x_deq = call(dg, buffer, l1, x, ids, w)
    layer = megamoe.Layer(dg.mega_moe_config(E, H, I, K, CLAMP), max_tokens=64, device=0, fp8_resident_weights=False)
    layer.load_weights(w1, w2, w1s, w2s, layout="halves")
    assert torch.equal(y, layer(x_deq, ids.to(torch.int32), w))
    ref = ex.reference_experts(info, x_deq, ids, w, ex.dequantize_mxfp4(w1, w1s), ex.dequantize_mxfp4(w2, w2s))
    assert ex.rel_l2(y, ref) <= 0.06
    # The scales packed four to an int32 word (DeepGEMM's K-major form): the same weights.
    packed = dg.transform_weights_for_mega_moe((w1.view(torch.int8), w1s.contiguous().view(torch.int32)),
                                               (w2, w2s.contiguous().view(torch.int32)))[0]
    assert torch.equal(call(dg, buffer, packed, x, ids, w)[0], y)
    assert not buffer.runtime(CLAMP)[0].take_errors().any()


def _group_rank(rank, world, port, result_dir):
    import torch
    import torch.distributed as dist
    import megamoe.deep_gemm as dg

    ex = load_example()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.cuda.set_device(0)
        gen = torch.Generator(device="cuda").manual_seed(8)  # every rank draws every expert alike
        info = {"model_dim": H, "inter_dim": I}
        w1, w1s, w2, w2s = ex.random_mxfp4(info, E, "cuda", gen)
        lo, hi = rank * E // world, (rank + 1) * E // world
        buffer = dg.get_symm_buffer_for_mega_moe(dist.group.WORLD, E, 64, K, H, I)
        l1, _ = dg.transform_weights_for_mega_moe((w1[lo:hi], w1s[lo:hi]), (w2[lo:hi], w2s[lo:hi]))
        gen = torch.Generator(device="cuda").manual_seed(20 + rank)
        x = torch.randn(24 + 8 * rank, H, device="cuda", generator=gen).to(torch.bfloat16)
        ids, w = routing(x.shape[0], E, gen)
        y, x_deq = call(dg, buffer, l1, x, ids, w)
        layer = megamoe.Layer(dg.mega_moe_config(E, H, I, K, CLAMP), max_tokens=64, device=0,
                              group=dist.group.WORLD, fp8_resident_weights=False)
        layer.load_weights(w1[lo:hi], w2[lo:hi], w1s[lo:hi], w2s[lo:hi], layout="halves")
        same = torch.equal(y, layer(x_deq, ids.to(torch.int32), w))
        with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
            f.write(f"{int(same)}")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_a_group_of_two_processes_same_bits_as_the_layer(tmp_path):
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_group_rank, args=(2, port, str(tmp_path)), nprocs=2, join=True, start_method="spawn")
    assert [(tmp_path / f"rank{r}").read_text() for r in range(2)] == ["1", "1"]
