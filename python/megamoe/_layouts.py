"""Checkpoint layouts of the expert weights (docs/layer.md, "Checkpoint layouts") turned into the
library's own: W1 [E, 2I, ...] as halves (each expert's gate rows, then its up rows), b1 alike,
W2 [E, D, ...], biases as float32. Host copies only; the shapes and dtypes of the result are
checked by Layer.load_weights."""

import numpy as np

from ._tensors import HostArray, to_host
from .errors import InputError

LAYOUTS = ("halves", "separate_gate_up", "gpt_oss")
BIAS_DTYPES = ("float32", "bfloat16", "float16")


def to_halves(layout, w1, w1_scales, w2, w2_scales, b1, E, D, I):
    """(w1, w1_scales, w2, w2_scales, b1) in the library's layout; b1 a float32 numpy array or None."""
    if layout == "separate_gate_up":
        return _from_separate(w1, w1_scales, w2, w2_scales, b1, E, I)
    if layout == "gpt_oss":
        return _from_gpt_oss(w1, w1_scales, w2, w2_scales, b1, E, D, I)
    if layout == "halves":
        return _from_halves(w1, w1_scales, w2, w2_scales, b1, E, I)
    raise InputError("layout", repr(layout), " or ".join(repr(name) for name in LAYOUTS))


def bias_host(field, array, shape):
    """A bias as a contiguous float32 host array of `shape` (bfloat16 and float16 widened)."""
    h, dtype = to_host(array, field)
    if tuple(h.shape) != tuple(shape):
        raise InputError(field, f"shape {list(h.shape)}", f"{list(shape)}")
    if dtype not in BIAS_DTYPES:
        raise InputError(field, f"dtype {dtype}", " or ".join(BIAS_DTYPES))
    if dtype == "bfloat16":  # its uint16 bits are a float32's top half
        h = (np.asarray(h, np.uint32) << 16).view(np.float32)
    return np.ascontiguousarray(h, dtype=np.float32)


def _from_halves(w1, w1_scales, w2, w2_scales, b1, E, I):
    for name, a, what in (("w1", w1, "one tensor of gate and up rows"),
                          ("w1_scales", w1_scales, "one tensor of gate and up rows"),
                          ("b1", b1, f"one tensor [{E}, {2 * I}], gate then up")):
        _refuse_pair(name, a, what, "for gate and up apart pass layout='separate_gate_up'")
    shape = tuple(getattr(w1, "shape", ()))
    if len(shape) == 4 and shape[-1] == 16:
        raise InputError("w1", f"shape {list(shape)}", "[E, 2I, D/2] with layout='halves': a 4-D [E, N, K/32, 16] "
                         "tensor is gpt-oss's *_blocks layout (gate and up interleaved by row): pass layout='gpt_oss'")
    return w1, w1_scales, w2, w2_scales, _bias_or_none("b1", b1, (E, 2 * I))


def _from_separate(w1, w1_scales, w2, w2_scales, b1, E, I):
    w1 = join_gate_up("w1", w1, E, I)
    if w1_scales is not None:
        w1_scales = join_gate_up("w1_scales", w1_scales, E, I)
    if isinstance(b1, (tuple, list)):  # (gate_bias, up_bias), each [E, I]
        b1 = join_gate_up("b1", b1, E, I, ndim=2)
    return w1, w1_scales, w2, w2_scales, _bias_or_none("b1", b1, (E, 2 * I))


def _from_gpt_oss(w1, w1_scales, w2, w2_scales, b1, E, D, I):
    for name, a in (("w1", w1), ("w1_scales", w1_scales), ("b1", b1)):
        _refuse_pair(name, a, "one tensor, gate and up interleaved by row as gpt-oss stores them",
                     "for gate and up apart pass layout='separate_gate_up'")
    if w1_scales is not None:  # MXFP4: *_blocks and *_scales as the checkpoint has them
        w1 = _deinterleave(*_blocks_3d("w1", w1, E, 2 * I, D, "gate_up_proj_blocks"))
        w1_scales = _deinterleave(*_shaped("w1_scales", w1_scales, (E, 2 * I, D // 32), "gate_up_proj_scales"))
        w2 = HostArray(*_blocks_3d("w2", w2, E, D, I, "down_proj_blocks"))
    else:  # dense: transformers' GptOssExperts parameters, x @ W, W1's output axis interleaved
        held = "as transformers holds it: [experts, in, out], for dense weights"
        h1, t1 = _shaped("w1", w1, (E, D, 2 * I), f"GptOssExperts.gate_up_proj, {held}")
        h2, t2 = _shaped("w2", w2, (E, I, D), f"GptOssExperts.down_proj, {held}")
        w1 = _deinterleave(h1.transpose(0, 2, 1), t1)
        w2 = HostArray(np.ascontiguousarray(h2.transpose(0, 2, 1)), t2)
    b1 = _bias_or_none("b1", b1, (E, 2 * I))
    if b1 is not None:
        b1 = np.ascontiguousarray(np.concatenate((b1[:, 0::2], b1[:, 1::2]), axis=1))
    return w1, w1_scales, w2, w2_scales, b1


def join_gate_up(field, pair, experts, inter_dim, ndim=3):
    """(gate, up), each [E, I, ...], as one host tensor [E, 2I, ...]: gate rows, then up rows."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise InputError(field, f"a {type(pair).__name__}", "a pair (gate, up) with layout='separate_gate_up'")
    parts = []
    for name, a in zip((f"{field}[0] (gate)", f"{field}[1] (up)"), pair):
        h, dtype = to_host(a, name)
        if h.ndim != ndim or h.shape[0] != experts or h.shape[1] != inter_dim:
            tail = ", ..." if ndim > 2 else ""
            raise InputError(name, f"shape {list(h.shape)}", f"[{experts}, {inter_dim}{tail}]: experts, inter_dim rows")
        parts.append((h, dtype))
    (g, tg), (u, tu) = parts
    if g.shape != u.shape or tg != tu:
        raise InputError(f"{field}[1] (up)", f"shape {list(u.shape)} {tu}", f"gate's: {list(g.shape)} {tg}")
    return HostArray(np.concatenate((g, u), axis=1), tg)


def _refuse_pair(field, array, expected, hint):
    if isinstance(array, (tuple, list)):
        raise InputError(field, f"a pair of {len(array)} tensors", f"{expected}; {hint}")


def _bias_or_none(field, array, shape):
    return None if array is None else bias_host(field, array, shape)


def _deinterleave(h, dtype):
    """Rows 2i (gate i) and 2i+1 (up i) of each expert as halves: the even rows, then the odd."""
    return HostArray(np.concatenate((h[:, 0::2], h[:, 1::2]), axis=1), dtype)


def _blocks_3d(field, array, E, N, K, name):
    """gpt-oss's *_blocks [E, N, K/32, 16], or the same bytes as [E, N, K/2], as [E, N, K/2]."""
    h, dtype = to_host(array, field)
    four, three = (E, N, K // 32, 16), (E, N, K // 2)
    if tuple(h.shape) == four:
        return h.reshape(three), dtype
    if tuple(h.shape) != three:
        raise InputError(field, f"shape {list(h.shape)}",
                         f"{list(four)} ({name}) or {list(three)} with layout='gpt_oss'")
    return h, dtype


def _shaped(field, array, shape, name):
    """A host copy of `array`, refused unless it has gpt-oss's `shape` (name: what it is there)."""
    h, dtype = to_host(array, field)
    if tuple(h.shape) != shape:
        raise InputError(field, f"shape {list(h.shape)}", f"{list(shape)} ({name}) with layout='gpt_oss'")
    return h, dtype
