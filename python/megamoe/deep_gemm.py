"""DeepGEMM's fused MegaMoE API on this library, so that an engine calling it runs megamoe:

    import megamoe.deep_gemm as deep_gemm
    buffer = deep_gemm.get_symm_buffer_for_mega_moe(group, num_experts, num_max_tokens_per_rank, num_topk,
                                                    hidden, intermediate_hidden)
    l1, l2 = deep_gemm.transform_weights_for_mega_moe((w1, w1_sf), (w2, w2_sf))
    buffer.x[:n].copy_(x_fp8); buffer.x_sf[:n].copy_(x_sf)          # the caller's inputs, each call
    buffer.topk_idx[:n].copy_(topk_idx); buffer.topk_weights[:n].copy_(topk_weights)
    deep_gemm.fp8_fp4_mega_moe(y, l1, l2, buffer, activation_clamp=limit)   # y bf16 [n, hidden]

The functions, arguments and tensors are DeepGEMM's (deep_gemm/mega: get_symm_buffer_for_mega_moe,
transform_weights_for_mega_moe, fp8_fp4_mega_moe; docs/engines.md gives the source read). Underneath
is a megamoe.Runtime over the group, from a config made of the call's shapes and activation
(written once into megamoe.cache_dir()/deep_gemm/), and one Layer per transformed weight set; the
arithmetic is this library's (y has the bits megamoe.Layer gives on the same inputs), not
DeepGEMM's. What it cannot honour is refused with an InputError naming the argument, the value and
what it accepts. Needs PyTorch.
"""

import json
import os
import weakref

from . import _megamoe
from . import errors as megamoe_errors
from .errors import InputError
from .runtime import Runtime

__all__ = ["SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe",
           "transform_weights_for_mega_moe_sm90_fp4", "fp8_fp4_mega_moe", "mega_moe_config"]


def _torch():
    import torch

    return torch


def mega_moe_config(num_experts, hidden, intermediate_hidden, num_topk, activation_clamp=None):
    """The path of the megamoe config for these shapes and DeepGEMM's SwiGLU with this clamp (gate
    min(g, c), up clamp(u, -c, c), silu(gate) up; SiLU where the clamp is None): the bucket table
    of the built-in config of the same model shape where there is one, else generic_a8w4's (h in
    blocks where the table's static scale does not fit the activation), with every card's table it
    holds. Written once into
    megamoe.cache_dir()/deep_gemm/."""
    shape = (int(num_experts), int(hidden), int(intermediate_hidden), int(num_topk))
    base = "generic_a8w4"
    for name in _megamoe.builtin_configs():
        info = _megamoe.config_info(name)
        if (info["experts"], info["model_dim"], info["inter_dim"], info["topk"]) == shape:
            base = name
            break
    config = json.loads(_megamoe.builtin_config_text(base))
    clamp = None if activation_clamp is None else float(activation_clamp)
    tag = "silu" if clamp is None else f"clamp{clamp:g}".replace(".", "p")
    name = f"deep_gemm_e{shape[0]}_h{shape[1]}_i{shape[2]}_k{shape[3]}_{tag}_from_{base}"
    config["name"] = name
    config["description"] = (f"DeepGEMM MegaMoE's call for {shape[0]} experts, hidden {shape[1]}, intermediate "
                             f"{shape[2]}, top-k {shape[3]}, its SwiGLU clamped at {clamp}; tiles of {base}")
    config["model"] = {"experts": shape[0], "model_dim": shape[1], "inter_dim": shape[2], "topk": shape[3]}
    config["activation"] = {"kind": "silu"} if clamp is None else \
        {"kind": "swiglu", "limit": clamp, "alpha": 1.0, "up_offset": 0.0}
    folder = os.path.join(_megamoe.cache_dir(), "deep_gemm")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".json")
    try:
        _write(path, config)
        _megamoe.config_info(path)
    except megamoe_errors.ConfigError:
        # A static h scale needs the activation's bound (SiLU has none; a large clamp may not fit):
        # h in blocks of 128, and Stage2 over 128 weight rows, which blocks need.
        holders = [config] + list(config.get("card_tables", {}).values())  # every card's table
        for table in [e for h in holders for e in [h.get("bucket_defaults", {})] + list(h.get("buckets", {}).values())]:
            if "h_scale" in table:
                table["h_scale"] = "block"
            if table.get("stage2", {}).get("weight_tile", 0) > 128:
                table["stage2"]["weight_tile"] = 128
        _write(path, config)
        _megamoe.config_info(path)  # ConfigError here, naming the field, for shapes the library cannot run
    return path


def _write(path, config):
    text = json.dumps(config, indent=1, sort_keys=True)
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class SymmBuffer:
    """DeepGEMM's symmetric buffer for a group, as this library holds it: the tensors the caller
    fills before each call, T = num_max_tokens_per_rank: x e4m3 [T, hidden]; x_sf [T, hidden / 128],
    in DeepGEMM's form for the GPU: on Hopper (its SM90 buffer) float32, one scale per 128 values,
    elsewhere int32 of four UE8M0 scales, one per 32 values (scale_form says which:
    "fp32_per_128" or "ue8m0_per_32"); topk_idx int64 [T, num_topk] global ids, -1 empty;
    topk_weights float32 [T, num_topk]. The group's runtime is made at the first call of each
    activation clamp (collective, as the call is)."""

    def __init__(self, group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                 device, scale_form):
        torch = _torch()
        self.group, self.num_experts, self.num_topk = group, num_experts, num_topk
        self.num_max_tokens_per_rank, self.hidden, self.intermediate_hidden = (num_max_tokens_per_rank, hidden,
                                                                              intermediate_hidden)
        self.device, self.scale_form = device, scale_form
        T = num_max_tokens_per_rank
        self.x = torch.zeros(T, hidden, dtype=torch.float8_e4m3fn, device=device)
        self.x_sf = torch.zeros(T, hidden // 128, device=device,
                                dtype=torch.float32 if scale_form == "fp32_per_128" else torch.int32)
        self.topk_idx = torch.full((T, num_topk), -1, dtype=torch.int64, device=device)
        self.topk_weights = torch.zeros(T, num_topk, dtype=torch.float32, device=device)
        self._runtimes = {}  # activation clamp -> (Runtime, {a transformed weight set: its Layer})

    def runtime(self, activation_clamp):
        """The group's runtime for this clamp, made on first use (every rank of the group, together)."""
        key = None if activation_clamp is None else float(activation_clamp)
        if key not in self._runtimes:
            world = 1 if self.group is None else self.group.size()
            config = mega_moe_config(self.num_experts, self.hidden, self.intermediate_hidden, self.num_topk, key)
            runtime = Runtime(config, self.num_max_tokens_per_rank, self.device,
                              group=self.group if world > 1 else None, fp8_resident_weights=False)
            self._runtimes[key] = (runtime, weakref.WeakKeyDictionary())
        return self._runtimes[key]

    def destroy(self):
        """Releases the runtimes and the tensors (DeepGEMM's buffer.destroy())."""
        self._runtimes.clear()
        self.x = self.x_sf = self.topk_idx = self.topk_weights = None


def get_symm_buffer_for_mega_moe(group, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                 intermediate_hidden, use_fp8_dispatch=None, mma_type="fp8xfp4", activation="swiglu"):
    """DeepGEMM's buffer for a fused MegaMoE over `group` (a torch.distributed ProcessGroup, the
    expert-parallel group; None or a group of one: this GPU alone): num_experts global experts
    (rank r holds [r E / W, (r + 1) E / W)), at most num_max_tokens_per_rank tokens a call, top-k
    num_topk, the model's hidden and intermediate sizes. Collective where the group has several ranks."""
    if mma_type != "fp8xfp4":
        raise InputError("mma_type", repr(mma_type), "'fp8xfp4' (fp8 activations, MXFP4 weights)")
    if use_fp8_dispatch not in (None, True):
        raise InputError("use_fp8_dispatch", repr(use_fp8_dispatch), "None or True (the dispatch wire is fp8)")
    if activation != "swiglu":
        raise InputError("activation", repr(activation), "'swiglu'")
    world = 1 if group is None else group.size()
    for field, value, low in (("num_experts", num_experts, world), ("num_max_tokens_per_rank", num_max_tokens_per_rank, 1),
                              ("num_topk", num_topk, 1), ("hidden", hidden, 128),
                              ("intermediate_hidden", intermediate_hidden, 128)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(field, repr(value), f"an int of {low} or more")
    if num_experts % world:
        raise InputError("num_experts", repr(num_experts), f"a multiple of the group's {world} ranks")
    for field, value in (("hidden", hidden), ("intermediate_hidden", intermediate_hidden)):
        if value % 128:
            raise InputError(field, repr(value), "a multiple of 128 (x_sf's words of four 32-value scales)")
    torch = _torch()
    device = torch.device("cuda", torch.cuda.current_device())
    # DeepGEMM's buffer is its SM90 one on Hopper (x scaled per 128 in float32), else per 32 in UE8M0.
    hopper = torch.cuda.get_device_capability(device)[0] == 9
    buffer = SymmBuffer(group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden, device,
                        "fp32_per_128" if hopper else "ue8m0_per_32")
    if world > 1:  # every rank's buffer made before any rank returns, as DeepGEMM's constructor does
        import torch.distributed as dist

        dist.barrier(group=group)
    return buffer


class MegaMoEWeights:
    """Expert weights as transform_weights_for_mega_moe gives them: a rank's experts, W1 as gate
    rows then up rows, MXFP4 with e8m0 scales; loaded into a buffer's runtime at their first call."""

    def __init__(self, w1, w1_scales, w2, w2_scales):
        self.w1, self.w1_scales, self.w2, self.w2_scales = w1, w1_scales, w2, w2_scales


def _e8m0(field, sf, rows, k):
    """Scales as uint8 e8m0 [E, rows, k / 32] from DeepGEMM's forms: uint8 or float8_e8m0fnu
    [E, rows, k / 32]; float32 powers of two [E, rows, k / 32]; int32 [E, rows, k / 128] with four
    e8m0 a word (the first in the low byte), K-major."""
    torch = _torch()
    if sf.dim() != 3 or sf.shape[1] != rows:
        raise InputError(field, f"shape {list(sf.shape)}", f"[E, {rows}, {k // 32}] (or int32 [E, {rows}, {k // 128}])")
    if sf.dtype == torch.int32:
        if sf.shape[2] != k // 128:
            raise InputError(field, f"int32 shape {list(sf.shape)}", f"[E, {rows}, {k // 128}] (four scales a word)")
        return sf.contiguous().view(torch.uint8).reshape(sf.shape[0], rows, k // 32)
    if sf.shape[2] != k // 32:
        raise InputError(field, f"shape {list(sf.shape)}", f"[E, {rows}, {k // 32}]")
    if sf.dtype == torch.uint8:
        return sf
    if getattr(torch, "float8_e8m0fnu", None) is not None and sf.dtype == torch.float8_e8m0fnu:
        return sf.view(torch.uint8)
    if sf.dtype == torch.float32:
        bits = sf.contiguous().view(torch.int32)
        if bool((bits & 0x807FFFFF).any()):
            raise InputError(field, "float32 scales that are not positive powers of two", "e8m0 values")
        return (bits >> 23).to(torch.uint8)
    raise InputError(field, f"dtype {sf.dtype}", "uint8, float8_e8m0fnu, float32 (powers of two) or packed int32")


def transform_weights_for_mega_moe(l1_weights, l2_weights, activation="swiglu"):
    """DeepGEMM's weight transform for fp8 x fp4: l1_weights = (W1 int8 or uint8 [E, 2I, hidden / 2],
    two e2m1 a byte, the even k in the low nibble, rows gate then up; its scales), l2_weights = (W2
    [E, hidden, I / 2]; its scales); scales as uint8, float8_e8m0fnu or float32 powers of two
    [E, N, K / 32], or int32 [E, N, K / 128] of four e8m0 (K-major). Returns (l1, l2) for
    fp8_fp4_mega_moe; the conversion to this library's layout happens on their first call."""
    torch = _torch()
    if activation != "swiglu":
        raise InputError("activation", repr(activation), "'swiglu'")
    for field, pair in (("l1_weights", l1_weights), ("l2_weights", l2_weights)):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InputError(field, f"a {type(pair).__name__}", "a (weights, scales) pair")
    w1, w2 = l1_weights[0], l2_weights[0]
    for field, w in (("l1_weights[0]", w1), ("l2_weights[0]", w2)):
        if w.dtype not in (torch.int8, torch.uint8) or w.dim() != 3:
            raise InputError(field, f"{w.dtype} of {w.dim()} dims", "int8 or uint8 [E, N, K / 2], two e2m1 a byte")
    E, two_i, h_half = w1.shape
    if w2.shape[0] != E or w2.shape[1] != 2 * h_half or w2.shape[2] * 2 * 2 != two_i:
        raise InputError("l2_weights[0]", f"shape {list(w2.shape)}", f"[{E}, {2 * h_half}, {two_i // 4}]")
    s1 = _e8m0("l1_weights[1]", l1_weights[1], two_i, 2 * h_half)
    s2 = _e8m0("l2_weights[1]", l2_weights[1], 2 * h_half, two_i // 2)
    l1 = MegaMoEWeights(w1.view(torch.uint8), s1, w2.view(torch.uint8), s2)
    return l1, l1  # one set holds both matrices; the pair keeps DeepGEMM's call shape


def transform_weights_for_mega_moe_sm90_fp4(l1_weights, l2_weights):
    """DeepGEMM's SM90 pull request's name for the fp8 x fp4 transform (scales float32 powers of
    two [E, N, K / 32]): transform_weights_for_mega_moe, which takes that form among others."""
    return transform_weights_for_mega_moe(l1_weights, l2_weights)


def _dequantize_x(x, x_sf, n, hidden):
    """x [n, hidden] e4m3 with its scales in bfloat16: per-32 e8m0 (int32 words of four), which is
    exact, or float32 per 128 (DeepGEMM's SM90 form), rounded once to bfloat16."""
    torch = _torch()
    if x_sf.dtype == torch.float32:
        blocks = x[:n].float().reshape(n, hidden // 128, 128) * x_sf[:n].unsqueeze(-1)
        return blocks.reshape(n, hidden).to(torch.bfloat16)
    scales = x_sf[:n].contiguous().view(torch.uint8).reshape(n, hidden // 32).to(torch.int32)
    factors = torch.ldexp(torch.ones_like(scales, dtype=torch.float32), scales - 127)
    return (x[:n].float().reshape(n, hidden // 32, 32) * factors.unsqueeze(-1)).reshape(n, hidden).to(torch.bfloat16)


def fp8_fp4_mega_moe(y, l1_weights, l2_weights, sym_buffer, cumulative_local_expert_recv_stats=None,
                     recipe=(1, 1, 32), activation="swiglu", activation_clamp=None, fast_math=True):
    """DeepGEMM's fused call: y[t] = sum_k topk_weights[t, k] W2_e act(W1_e x[t]) for the first
    y.shape[0] tokens of the buffer (its x, x_sf, topk_idx, topk_weights, filled by the caller),
    e = topk_idx[t, k] (global; -1 skipped), act = silu(min(gate, c)) clamp(up, -c, c) with
    c = activation_clamp (no clamp where None). y bfloat16 [n, hidden], written; on the current
    stream. Collective: every rank of the buffer's group calls it, each with its own n (0 allowed)."""
    if tuple(recipe) != (1, 1, 32):
        raise InputError("recipe", repr(recipe), "(1, 1, 32): fp8 x, MXFP4 weights in blocks of 32")
    if activation != "swiglu":
        raise InputError("activation", repr(activation), "'swiglu'")
    if not fast_math:
        raise InputError("fast_math", "False", "True: this library's activations use the fast exp and reciprocal "
                         "(their rounding is bounded in its reference, docs/layer.md)")
    if cumulative_local_expert_recv_stats is not None:
        raise InputError("cumulative_local_expert_recv_stats", "a tensor", "None: the tokens received per local "
                         "expert are not counted by this library")
    if activation_clamp is not None and not activation_clamp >= 0:
        raise InputError("activation_clamp", repr(activation_clamp), "None or a number of 0 or more")
    if not isinstance(sym_buffer, SymmBuffer):
        raise InputError("sym_buffer", f"a {type(sym_buffer).__name__}", "a buffer of get_symm_buffer_for_mega_moe")
    if not isinstance(l1_weights, MegaMoEWeights) or l2_weights is not l1_weights:
        raise InputError("l1_weights, l2_weights", "not transform_weights_for_mega_moe's",
                         "the pair transform_weights_for_mega_moe returned")
    torch = _torch()
    n = y.shape[0] if y.dim() == 2 else -1
    if y.dtype != torch.bfloat16 or y.dim() != 2 or y.shape[1] != sym_buffer.hidden:
        raise InputError("y", f"{y.dtype} {list(y.shape)}", f"bfloat16 [tokens, {sym_buffer.hidden}]")
    if n > sym_buffer.num_max_tokens_per_rank:
        raise InputError("y", f"{n} tokens", f"at most num_max_tokens_per_rank = {sym_buffer.num_max_tokens_per_rank}")
    runtime, layers = sym_buffer.runtime(activation_clamp)
    layer = layers.get(l1_weights)
    if layer is None:  # the first call with these weights: converted and uploaded (not under capture)
        layer = runtime.layer()
        w = l1_weights
        layer.load_weights(w.w1, w.w2, w.w1_scales, w.w2_scales, layout="halves")
        layers[l1_weights] = layer
    x = _dequantize_x(sym_buffer.x, sym_buffer.x_sf, n, sym_buffer.hidden)
    return layer(x, sym_buffer.topk_idx[:n], sym_buffer.topk_weights[:n], out=y)
