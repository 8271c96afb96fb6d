"""A checkpoint's expert tensors handed to the library's checkpoint layouts (the C++
checkpoint_to_halves, src/weights/checkpoint_arrays.cpp, through the extension), which checks each
array's shape against the layout and joins, de-interleaves or transposes them into the library's
own: W1 [E, 2I, ...] as halves, W2 [E, D, ...], biases float32. Here only what is Python's: the
(gate, up) pairs split into their parts, each array a contiguous host copy, dtypes checked, biases
widened to float32."""

import numpy as np

from . import _megamoe
from ._tensors import to_host
from .errors import InputError

BIAS_DTYPES = ("float32", "bfloat16", "float16")
DENSE_DTYPES = ("float32", "bfloat16")


def to_halves(layout, w1, w1_scales, w2, w2_scales, b1, b2, E, D, I):
    """(w1, w1_scales, w2, w2_scales, b1, b2) in the library's layout, numpy arrays (scales and
    biases None where absent; dense weights keep their dtype, bfloat16 as its uint16 bits)."""
    mxfp4 = w1_scales is not None
    parts = []
    if layout == "separate_gate_up":
        parts += _pair("w1", "up", w1, mxfp4)
        if mxfp4:
            parts += _pair("w1_scales", "up_scales", w1_scales, True)
        if isinstance(b1, (tuple, list)):  # (gate_bias, up_bias), each [E, I]
            parts += [(role, name, _bias(name, a)) for role, name, a in _split("b1", "up_b1", b1)]
        elif b1 is not None:
            parts.append(("b1", "b1", _bias("b1", b1)))
    else:
        what = ("one tensor, gate and up interleaved by row as gpt-oss stores them" if layout == "gpt_oss"
                else "one tensor of gate and up rows")
        for name, a in (("w1", w1), ("w1_scales", w1_scales), ("b1", b1)):
            if isinstance(a, (tuple, list)):
                raise InputError(name, f"a pair of {len(a)} tensors",
                                 f"{what}; for gate and up apart pass layout='separate_gate_up'")
        parts.append(("w1", "w1", _weight("w1", w1, mxfp4)))
        if mxfp4:
            parts.append(("w1_scales", "w1_scales", _weight("w1_scales", w1_scales, True)))
        if b1 is not None:
            parts.append(("b1", "b1", _bias("b1", b1)))
    parts.append(("w2", "w2", _weight("w2", w2, mxfp4)))
    if mxfp4:
        parts.append(("w2_scales", "w2_scales", _weight("w2_scales", w2_scales, True)))
    if b2 is not None:
        parts.append(("b2", "b2", _bias("b2", b2)))
    if not mxfp4:  # every dense weight in w1's dtype
        dtypes = {name: d for _, name, (_, d) in ((r, n, a) for r, n, a in parts if r in ("w1", "up", "w2"))}
        first = next(iter(dtypes.values()))
        for name, d in dtypes.items():
            if d != first:
                raise InputError(name, f"dtype {d}", f"{first}, as {next(iter(dtypes))}'s")
    arrays = [(role, name, a if role in ("b1", "up_b1", "b2") else a[0]) for role, name, a in parts]
    if layout != "halves":
        return _megamoe.checkpoint_to_halves(layout, E, D, I, arrays)
    _megamoe.check_checkpoint(layout, E, D, I, arrays)  # the library's own layout: checked, not copied
    given = {role: a for role, _, a in arrays}
    return tuple(given.get(role) for role in ("w1", "w1_scales", "w2", "w2_scales", "b1", "b2"))


def _split(role, second_role, pair):
    """(gate, up) as the parts of two roles, named as the caller gave them."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise InputError(role, f"a {type(pair).__name__}", "a pair (gate, up) with layout='separate_gate_up'")
    return [(role, f"{role}[0] (gate)", pair[0]), (second_role, f"{role}[1] (up)", pair[1])]


def _pair(role, second_role, pair, mxfp4):
    return [(r, name, _weight(name, a, mxfp4)) for r, name, a in _split(role, second_role, pair)]


def _weight(field, array, mxfp4):
    """(contiguous host array, dtype name): bytes for MXFP4, float32 or bfloat16 bits for dense."""
    h, dtype = to_host(array, field)
    allowed = ("uint8",) if mxfp4 else DENSE_DTYPES
    if dtype not in allowed:
        raise InputError(field, f"dtype {dtype}", " or ".join(allowed))
    return np.ascontiguousarray(h), dtype


def _bias(field, array):
    """A bias as a contiguous float32 host array (bfloat16 and float16 widened exactly)."""
    h, dtype = to_host(array, field)
    if dtype not in BIAS_DTYPES:
        raise InputError(field, f"dtype {dtype}", " or ".join(BIAS_DTYPES))
    if dtype == "bfloat16":  # its uint16 bits are a float32's top half
        h = (np.asarray(h, np.uint32) << 16).view(np.float32)
    return np.ascontiguousarray(h, dtype=np.float32)
