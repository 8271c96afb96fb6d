"""What megamoe reads of the arrays it is given, whatever their framework: address, shape,
strides, dtype and device, from __dlpack__ (torch, CuPy, JAX, numpy, ...) or, where that is all an
array has, from __cuda_array_interface__; and host copies of weights for quantization."""

from dataclasses import dataclass

import numpy as np

from . import _megamoe
from .errors import InputError

# __cuda_array_interface__ type strings; bfloat16 has none, so its bits come as uint16 ("<u2").
_CAI_DTYPES = {"<f4": "float32", "<f2": "float16", "<i4": "int32", "<i8": "int64", "|u1": "uint8",
               "<u1": "uint8", "<u2": "uint16", "|i1": "int8"}
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "int8": 1}


@dataclass(frozen=True)
class TensorInfo:
    ptr: int
    shape: tuple
    strides: tuple  # in elements
    dtype: str      # "float32", "bfloat16", "int32", "uint8", ...
    device: str     # "cpu", "cuda", ...
    device_id: int

    def contiguous(self):
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True


def describe(array, field):
    """TensorInfo of any array; InputError naming `field` when it is none."""
    if hasattr(array, "__dlpack__") or _has_buffer(array):
        try:
            return TensorInfo(*_megamoe.tensor_info(array))
        except TypeError as e:
            raise InputError(field, f"a {type(array).__name__} that DLPack could not import ({e})",
                             "an array with __dlpack__ or __cuda_array_interface__") from None
    cai = getattr(array, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(cai, field)
    raise InputError(field, f"a {type(array).__name__}", "an array with __dlpack__ or __cuda_array_interface__")


def _has_buffer(array):
    try:
        memoryview(array)
        return True
    except TypeError:
        return False


def _from_cai(cai, field):
    typestr = cai["typestr"]
    if typestr not in _CAI_DTYPES:
        raise InputError(field, f"__cuda_array_interface__ typestr {typestr!r}", f"one of {sorted(_CAI_DTYPES)}")
    dtype = _CAI_DTYPES[typestr]
    shape = tuple(int(s) for s in cai["shape"])
    if cai.get("strides") is None:
        strides, step = [], 1
        for s in reversed(shape):
            strides.append(step)
            step *= s
        strides = tuple(reversed(strides))
    else:
        size = _ITEMSIZE[dtype]
        if any(s % size for s in cai["strides"]):
            raise InputError(field, f"strides {cai['strides']} bytes", f"multiples of the item size {size}")
        strides = tuple(int(s) // size for s in cai["strides"])
    # The interface does not name the device: -1, and the layer's device is assumed.
    return TensorInfo(int(cai["data"][0]), shape, strides, dtype, "cuda", -1)


class HostArray:
    """A host array made here (weights joined from a checkpoint's parts) with the dtype name
    to_host gave its parts: bfloat16 stays named so though its bits are uint16."""

    def __init__(self, array, dtype):
        self.array, self.dtype, self.shape = array, dtype, array.shape


def to_host(array, field):
    """(numpy array, dtype name) on the host: bfloat16 as its uint16 bits, e8m0 as uint8."""
    if isinstance(array, HostArray):
        return array.array, array.dtype
    mod = type(array).__module__.split(".")[0]
    if mod == "torch":
        import torch

        t = array.detach()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).cpu().numpy().view(np.uint16), "bfloat16"
        if t.dtype == getattr(torch, "float8_e8m0fnu", None):
            return t.view(torch.uint8).cpu().numpy(), "uint8"
        return t.cpu().numpy(), str(t.dtype).replace("torch.", "")
    if mod == "cupy":
        array = array.get()
    if not isinstance(array, np.ndarray):
        info = describe(array, field)
        if info.device != "cpu":
            raise InputError(field, f"an array on {info.device}", "a host array, a torch tensor or a CuPy array")
        array = np.from_dlpack(array)
    if array.dtype.name == "bfloat16":  # ml_dtypes
        return array.view(np.uint16), "bfloat16"
    return array, array.dtype.name
