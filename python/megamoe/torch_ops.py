"""The layer as PyTorch custom ops, so that torch.compile traces through a call without a graph
break: megamoe::forward(x, topk_ids, topk_weights, layer) -> y and
megamoe::forward_out(x, topk_ids, topk_weights, out, layer), each with a fake (meta)
implementation. `layer` is a Layer's handle (Layer.handle); Layer.__call__ calls them for torch
tensors."""

import torch

from . import layer as _layer_module
from ._tensors import TensorInfo
from .errors import InputError


def _info(t):
    return TensorInfo(t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype).replace("torch.", ""),
                      t.device.type, -1 if t.device.index is None else t.device.index)


def _layer(handle):
    layer = _layer_module._layers.get(handle)
    if layer is None:
        raise InputError("layer", f"handle {handle}", "the handle of a live megamoe.Layer")
    return layer


def _run(layer, x, topk_ids, topk_weights, out):
    layer._check_call(_info(x), _info(topk_ids), _info(topk_weights), int_ids=("int32", "int64"),
                      weight_dtypes=("float32", "bfloat16", "float16"))
    layer._check_out(_info(x), _info(out))
    # Conversions run on the current stream: no host sync, capturable.
    if topk_ids.dtype != torch.int32:
        topk_ids = topk_ids.to(torch.int32)
    if topk_weights.dtype != torch.float32:
        topk_weights = topk_weights.to(torch.float32)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    layer._launch(x.data_ptr(), topk_ids.data_ptr(), topk_weights.data_ptr(), out.data_ptr(), x.shape[0], stream)


@torch.library.custom_op("megamoe::forward", mutates_args=())
def forward(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, layer: int) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _run(_layer(layer), x, topk_ids, topk_weights, out)
    return out


@forward.register_fake
def _forward_fake(x, topk_ids, topk_weights, layer):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("megamoe::forward_out", mutates_args=("out",))
def forward_out(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, out: torch.Tensor,
                layer: int) -> None:
    _run(_layer(layer), x, topk_ids, topk_weights, out)


@forward_out.register_fake
def _forward_out_fake(x, topk_ids, topk_weights, out, layer):
    return None


def call(layer, x, topk_ids, topk_weights, out):
    """Layer.__call__ for torch tensors."""
    if out is None:
        return torch.ops.megamoe.forward(x, topk_ids, topk_weights, layer.handle)
    torch.ops.megamoe.forward_out(x, topk_ids, topk_weights, out, layer.handle)
    return out


_layer_module._torch_tensor = torch.Tensor
_layer_module._torch_call = call
