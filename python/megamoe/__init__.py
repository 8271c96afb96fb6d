"""megamoe: a fused expert-parallel Mixture-of-Experts layer (dispatch, two expert GEMMs with the
activation between them, combine), generated and compiled at run time for the GPU at hand.

    import megamoe
    layer = megamoe.Layer("kimi_k3_a8w4", max_tokens=8192, device=0)
    layer.load_weights(w1, w2, w1_scales, w2_scales)   # MXFP4 checkpoint tensors (or dense ones)
    y = layer(x, topk_ids, topk_weights)               # on the current stream, no host sync
    errors = layer.take_errors()

Tensors come through DLPack (torch, CuPy, JAX, ...) or __cuda_array_interface__. With PyTorch
importable, calls with torch tensors go through the custom ops megamoe::forward and
megamoe::forward_out, which torch.compile traces without a graph break.
"""

import importlib.util as _util
import os as _os
import sys as _sys


def _preload_nvrtc():
    # NVRTC from a CUDA 13 wheel (nvidia-cuda-nvrtc, which CUDA PyTorch brings), where the
    # extension's run path (the toolkit's folder) has none: loaded first, it serves the extension.
    import ctypes
    import glob

    try:
        import nvidia
    except ImportError:
        return
    for base in getattr(nvidia, "__path__", []):
        for sub in ("cu13/lib", "cuda_nvrtc/lib"):
            for lib in sorted(glob.glob(_os.path.join(base, sub, "libnvrtc.so.13*"))):
                try:
                    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                    return
                except OSError:
                    pass


try:
    from . import _megamoe
except ImportError as _e:
    if "libnvrtc" not in str(_e):
        raise
    _preload_nvrtc()
    from . import _megamoe

import numpy as _np

from ._tensors import to_host as _to_host
from .errors import (CompileError, ConfigError, DeviceError, DroppedRowsError, Error, InputError, NoGpuError,
                     PeerTimeoutError)
from .layer import Layer
from .runtime import CallErrors, Runtime

__version__ = _megamoe.version()
__all__ = ["Layer", "Runtime", "CallErrors", "precompile", "tune", "workspace_bytes", "cache_dir", "configs", "config_info",
           "gpu_available", "quantize_mxfp4", "dequantize_mxfp4", "Error", "ConfigError", "CompileError",
           "DeviceError", "NoGpuError", "PeerTimeoutError", "DroppedRowsError", "InputError"]


def configs():
    """The built-in config names."""
    return list(_megamoe.builtin_configs())


def config_info(config):
    """A config's model shape, activation, formats and buckets, as a dict (a built-in name or a
    path ending in .json; MEGAMOE_CONFIG_DIR/NAME.json comes first); bucket_tables: the cards it
    holds a table for, its default's first ("default" where that names no card). ConfigError when
    it is bad."""
    return _megamoe.config_info(str(config))


def cache_dir():
    """The kernel cache: $MEGAMOE_CACHE_DIR, else $XDG_CACHE_HOME/megamoe, else ~/.cache/megamoe
    (read once per process, at the first kernel built)."""
    return _megamoe.cache_dir()


def gpu_available():
    """(True, "") where a CUDA GPU and driver are present, else (False, why)."""
    ok, why = _megamoe.gpu_available()
    return bool(ok), why


def workspace_bytes(config, *, max_tokens=8192, world=1, path="auto", arch="sm_90a", routed_rows_capacity=0,
                    fp8_resident_weights=True, experts_per_rank=None, redundant_experts=0, shared_experts=None,
                    shared_expert_scale=1.0, layers=1, transport="ipc", node_size=0, bucket_table=None):
    """The device memory one rank of Runtime(config, max_tokens, ..., world, routed_rows_capacity,
    redundant_experts, shared_experts, ...) takes, before it is created (no GPU needed), as a dict
    of bytes: layer (routing, x and h in fp8, the combine wire), symmetric_region and group_plan
    (several ranks: what peers write, this rank's plan of a call), total (the workspace, one per
    runtime whatever its layers); routed_rows (the rows a rank holds); weights (one layer's expert
    weights on this rank, in the path's layout with the fp8-resident copy where a bucket reads
    it); layers and model_total: the workspace and `layers` layers' weights through one runtime.
    path "auto" resolves as it would on `arch`'s GPU; transport "nvshmem" over nodes of node_size
    ranks (fewer than world) adds that transport's relay, staging areas and outbox (docs/ep.md).
    bucket_table: the table whose buckets size the weights' fp8-resident copy (None: the config's
    default; no GPU here names the card: name it for that card's bytes). A created layer's own: Layer.workspace_bytes,
    Layer.weights_bytes. Raises megamoe.Error for options a Layer would refuse."""
    if transport not in ("ipc", "nvshmem"):
        raise InputError("transport", repr(transport), "'ipc' or 'nvshmem'")
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise InputError("layers", repr(layers), "an int of 1 or more (the MoE layers sharing the runtime)")
    if isinstance(node_size, bool) or not isinstance(node_size, int) or node_size < 0:
        raise InputError("node_size", repr(node_size), "an int of 0 or more (the ranks of a node)")
    if node_size and (transport != "nvshmem" or int(world) % node_size):
        raise InputError("node_size", repr(node_size), f"0, or with transport='nvshmem' a divisor of world={world}")
    d = dict(_megamoe.workspace_bytes(str(config), int(max_tokens), int(world), path, str(arch),
                                      int(routed_rows_capacity), bool(fp8_resident_weights),
                                      int(experts_per_rank or 0), int(redundant_experts),
                                      -1 if shared_experts is None else int(shared_experts),
                                      float(shared_expert_scale), transport, node_size, bucket_table or ""))
    d["layers"] = layers
    d["model_total"] = d["total"] + layers * d["weights"]
    return d


def precompile(config, buckets=None, *, arch=None, path="auto", world=1, jobs=None, shared_experts=None,
               bucket_table=None, progress=True):
    """Compiles the kernels of a config's buckets (all when None) into the kernel cache, through the
    run-time build path, so that a Layer finds them there. Needs no GPU. arch: the target
    (default sm_90a); path: "auto" (what that arch runs), "hopper", "tensor_core" or "portable";
    world: 1 for the single-GPU layer, more for a rank of an expert-parallel group; shared_experts:
    as Layer(..., shared_experts=) takes it (None: the config's); bucket_table: the table of one card
    (its name as the driver gives it, or "default"; None: every table the config holds, so that the
    cache serves whichever card loads it; docs/configs.md, "A table per card"). Prints a line
    per kernel unless progress=False (or calls progress(line) when it is callable).

    Returns a list of dicts (name, key, result "compiled" | "hit" | "failed", seconds, error,
    buckets). Raises CompileError naming the first kernel that failed, after all were tried."""
    if progress is True:
        def progress(line):
            print(line, file=_sys.stderr, flush=True)
    elif progress is False:
        progress = None
    results = _megamoe.precompile(str(config), [int(b) for b in (buckets or [])], arch or "", path, int(world),
                                  int(jobs or 0), -1 if shared_experts is None else int(shared_experts),
                                  bucket_table or "", progress)
    failed = [r for r in results if r["result"] == "failed"]
    if failed:
        first = failed[0]
        raise CompileError(f"megamoe: precompile: {len(failed)} of {len(results)} kernel(s) failed; "
                           f"first {first['name']}:\n{first['error']}", kernel_name=first["name"], key=first["key"])
    return results


def tune(config, out, *, start=None, buckets=None, minutes=None, journal=None, pairs=10, min_gain=0.005,
         fp8_resident=True, fp8_wire=True, search_modes=True, modes=None, seed=123, jobs=None, world=1,
         transport="loopback", bucket_table=None, progress=True):
    """A tuned bucket table for a config's model on GPU 0, as megamoe-tune makes it (docs/tools.md):
    writes `out` (NAME.json, a config named NAME that megamoe.Layer(out) takes: the config's bucket
    tables with the tuned one as this GPU's, docs/configs.md, "A table per card"), NAME.report.txt
    and the journal NAME.journal.jsonl beside it. bucket_table: the config's table to start from (a card's
    name or "default"; None: this GPU's own, else the default). start: another config whose table to start from
    (default the config's own); buckets: the table keys to time (default 1 to 8192); minutes: a
    bound on the search; journal: another journal path (a run with the same journal resumes);
    pairs, min_gain: replays per comparison and the least gain that replaces an incumbent;
    fp8_resident, fp8_wire, search_modes=False: leave those knobs as the start has them; modes:
    "x=row,h=static,wire=bf16" to take those table-wide modes instead of searching them; world
    (2 to 16): also search each bucket's dispatch knobs on that many ranks of this process, over
    transport "loopback" (every rank on GPU 0) or "peer" (rank r on GPU r). Prints its progress
    unless progress=False (or calls progress(line) when it is callable).

    Returns a dict: config (the path), name, modes, rows (per bucket: bucket, rows_per_expert,
    start, tuned, runner_up, start_ms, tuned_ms, runner_up_ms, timed, pruned, note),
    dispatch_rows (world above 1, per bucket: bucket, tokens, start, tuned, runner_up, start_ms,
    tuned_ms, runner_up_ms, timed, note), report (its text), seconds, compile_seconds, kernels_compiled, cut_short. Raises NoGpuError without a GPU,
    ConfigError or megamoe.Error naming what is wrong, and what the progress callback raises."""
    if progress is True:
        def progress(line):
            print(line, file=_sys.stderr, flush=True)
    elif progress is False:
        progress = None
    if minutes is not None and not minutes > 0:
        raise ValueError(f"megamoe.tune: minutes = {minutes!r}, expected a number above 0 (or None: no bound)")
    if not (isinstance(world, int) and 1 <= world <= 32):
        raise ValueError(f"megamoe.tune: world = {world!r}, expected an int from 1 to 32")
    if transport not in ("loopback", "peer"):
        raise ValueError(f"megamoe.tune: transport = {transport!r}, expected 'loopback' or 'peer'")
    # Loopback ranks' streams on queues of their own; the driver reads it at the first CUDA call, so a
    # process that used CUDA before keeps its value (the group then warns where it is too low).
    _os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    return _megamoe.tune(str(config), str(out), str(start or ""), [int(b) for b in (buckets or [])],
                         float(minutes or 0), str(journal or ""), int(pairs), float(min_gain), bool(fp8_resident),
                         bool(fp8_wire), bool(search_modes), str(modes or ""), int(seed), int(jobs or 0), world,
                         transport, str(bucket_table or ""), progress)


def quantize_mxfp4(values):
    """MXFP4 of float32 or bfloat16 values along the last axis (a multiple of 32), as the library
    quantizes weights: (packed uint8 [..., K/2], e8m0 scales uint8 [..., K/32]), numpy arrays.
    A block's scale is 2^(floor(log2(amax)) - 2); values round to the nearest e2m1 (ties to
    even) and saturate at 6."""
    host, _ = _to_host(values, "values")
    return _megamoe.quantize_mxfp4(_np.ascontiguousarray(host))


def dequantize_mxfp4(packed, scales):
    """float32 values of MXFP4 (packed uint8 [..., K/2], scales uint8 [..., K/32]), a numpy array."""
    p, _ = _to_host(packed, "packed")
    s, _ = _to_host(scales, "scales")
    return _megamoe.dequantize_mxfp4(_np.ascontiguousarray(p), _np.ascontiguousarray(s))


# The torch custom ops, where torch is importable (MEGAMOE_NO_TORCH=1 leaves them out).
if _os.environ.get("MEGAMOE_NO_TORCH") != "1" and _util.find_spec("torch") is not None:
    from . import torch_ops  # noqa: F401
