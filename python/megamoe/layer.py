"""megamoe.Layer: one rank's fused MoE layer (dispatch, the two expert GEMMs with the activation
between them, combine) on a GPU, over the C++ runtime."""

import itertools
import weakref

import numpy as np

from ._checkpoint import to_halves
from ._tensors import describe, to_host
from .errors import InputError
from .runtime import CallErrors, Runtime  # noqa: F401  (CallErrors: megamoe.layer's own name, kept)

_layers = weakref.WeakValueDictionary()  # handle -> Layer, for the torch custom op


def _runtime_property(name):
    """A property of the layer's runtime, read through the layer."""
    return property(lambda self: getattr(self.runtime, name), doc=getattr(Runtime, name).__doc__)
_handles = itertools.count(1)
# Set by torch_ops when torch is importable: calls with torch tensors go through its custom ops.
_torch_tensor = None
_torch_call = None


class Layer:
    """One rank's MoE layer, built from a config (a built-in name such as "kimi_k3_a8w4", or a
    path ending in .json).

    Layer(config, max_tokens, device) is the single-GPU layer (every expert local). With
    group=<torch.distributed process group> it is this process's rank of an expert-parallel
    group over the group's ranks (one process per GPU, memory shared through CUDA IPC): every rank
    creates its Layer together (the ranks meet through the group), rank r owns the global experts
    [r * experts_per_rank, (r + 1) * experts_per_rank) with experts_per_rank = the config's
    model.experts / world (a world that does not divide them raises), and every rank calls the layer for each
    step, with its own tokens (0 allowed). With an NCCL group, call torch.cuda.set_device(device)
    first (the ranks meet through all_gather_object on the group).

    Kernels come from the kernel cache (megamoe.cache_dir()); those missing are compiled when the
    layer is created, with a line of progress each (megamoe.precompile() does it ahead of time).

    path: "auto" (the fastest the GPU runs), "hopper", "tensor_core" or "portable".
    transport (with a group): "ipc" (one node: CUDA IPC) or "nvshmem" (over nodes: the group on
    NVSHMEM, found in MEGAMOE_NVSHMEM_DIR or the nvidia-nvshmem-cu13 wheel; docs/ep.md, "Over
    nodes: NVSHMEM"). node_size: with nvshmem, the ranks of a node (consecutive; 0: the whole
    group is one node); a token's row goes to another node once, by NVSHMEM's puts, and is
    forwarded and its outputs summed there.
    timeout_ms: the bound of every wait for another rank. routed_rows_capacity: rows a rank can
    receive (0: the worst case, world * max_tokens * topk); rows past it are dropped and counted.
    fp8_resident_weights: where a bucket of the config reads an e4m3 copy of the weights (Hopper;
    twice the MXFP4 bytes, made by load_weights), False refuses the copy and runs those buckets on
    the MXFP4 kernels (docs/configs.md, "weights"); fp8_resident_bytes says what the copy takes.
    experts_per_rank: each rank holds this many experts, the model cut to experts_per_rank * world
    (one rank's share of a wider group run on fewer GPUs, for measuring: Kimi-K3 with 112 is a rank
    of EP8); None: model.experts / world.
    redundant_experts: expert slots beyond the model's experts, for load balancing (EPLB; docs/ep.md,
    "Redundant experts"): the group holds logical_experts + redundant_experts slots (world dividing
    them), experts_per_rank a rank, and calls take slot ids. Load each slot with its logical
    expert's weights (replicas the same) and map each route to one of its replicas.
    shared_experts: experts every token goes through beside its routed ones (DeepSeek-V3's and
    Kimi's shared experts; docs/layer.md, "Shared experts"), in the same launches; None: the
    config's model.shared_experts (0 for the built-in configs). Every rank holds them:
    load_weights then takes experts_per_rank + shared_experts experts, the routed ones first.
    shared_expert_scale: their weight in every token's sum (with shared_experts given).
    strict: raise DroppedRowsError for a call whose rows went past routed_rows_capacity. The check
    waits for the call (a host sync after each call; a call under graph capture is checked at the
    next take_errors(), which raises too). Without it, take_errors() counts them (dropped_rows).
    bucket_table: the config's bucket table (docs/configs.md, "A table per card"): None for the one
    tuned on this GPU's card, else the config's default; or a card's name as the driver gives it
    ("NVIDIA H200"), or "default", for that table on any GPU. info["bucket_table"] names the one
    taken and info["bucket_table_note"] says why (a warning where it was tuned on another card).
    workspace_bytes: the device memory the layer took beside its weights (megamoe.workspace_bytes
    states it before creation).

    A model's MoE layers share one runtime: runtime = megamoe.Runtime(config, ...) (the arguments
    above), then runtime.layer() for each layer, each loading its own weights; one workspace and
    one group serve them all (megamoe.Runtime says how they are called). Layer(config, ...) makes
    a runtime of its own (layer.runtime).
    """

    def __init__(self, config="kimi_k3_a8w4", max_tokens=8192, device=0, *, path="auto", group=None,
                 transport="ipc", node_size=0, timeout_ms=5000, routed_rows_capacity=0, fp8_resident_weights=True,
                 experts_per_rank=None, redundant_experts=0, shared_experts=None, shared_expert_scale=1.0,
                 strict=False, bucket_table=None):
        self._bind(Runtime(config, max_tokens, device, path=path, group=group, transport=transport,
                           node_size=node_size, timeout_ms=timeout_ms,
                           routed_rows_capacity=routed_rows_capacity, fp8_resident_weights=fp8_resident_weights,
                           experts_per_rank=experts_per_rank, redundant_experts=redundant_experts,
                           shared_experts=shared_experts, shared_expert_scale=shared_expert_scale, strict=strict,
                           bucket_table=bucket_table))

    @classmethod
    def _of_runtime(cls, runtime):
        layer = cls.__new__(cls)
        layer._bind(runtime)
        return layer

    def _bind(self, runtime):
        self.runtime = runtime  # the kernels, workspace and group this layer runs through (megamoe.Runtime)
        self._weights = None    # set by load_weights
        self.handle = next(_handles)
        _layers[self.handle] = self

    # --- what the layer is: its runtime's, but for its weights ---
    _info = property(lambda self: self.runtime._info)
    _device = property(lambda self: self.runtime._device)
    (config, path, path_note, bucket_table, bucket_table_note, world, rank, device, max_tokens, experts,
     logical_experts, experts_per_rank, shared_experts, shared_expert_scale, model_dim, inter_dim, topk, expert_biases,
     activation, workspace_bytes, workspace, routed_rows_capacity) = (_runtime_property(name) for name in (
        "config", "path", "path_note", "bucket_table", "bucket_table_note", "world", "rank", "device", "max_tokens",
        "experts", "logical_experts", "experts_per_rank", "shared_experts", "shared_expert_scale", "model_dim",
        "inter_dim", "topk", "expert_biases", "activation", "workspace_bytes", "workspace", "routed_rows_capacity"))
    flushed_blocks = property(lambda self: {"w1": self._weights.flushed_w1, "w2": self._weights.flushed_w2}
                              if self._weights is not None else {"w1": 0, "w2": 0},
                              doc="MX blocks of each matrix that the kernels' layout flushed to zero (docs/layer.md)")
    fp8_resident_bytes = property(lambda self: self._weights.resident_bytes if self._weights is not None else 0,
                                  doc="device bytes of the weights' fp8-resident copy (0: none made)")
    weights_bytes = property(lambda self: self._weights.bytes if self._weights is not None else 0,
                             doc="device bytes of this layer's weights (0 before load_weights)")

    @property
    def strict(self):
        """Raise DroppedRowsError after a call that dropped rows (the runtime's setting, for every
        layer of it)."""
        return self.runtime.strict

    @strict.setter
    def strict(self, on):
        self.runtime.strict = bool(on)

    def arithmetic(self, tokens):
        """How a call of `tokens` tokens rounds on the running path (its bucket's scale modes):
        x_block and h_block (values per fp8 scale; x_block == the path's model_dim: one per row),
        h_static (h in one static scale), the GEMMs' accumulation, the combine wire, and model_dim
        and inter_dim as the path runs them (the model's padded with zeros to its multiple): what
        an emulating reference repeats."""
        return self.runtime.arithmetic(tokens)

    def __repr__(self):
        return (f"megamoe.Layer({self.config!r}, max_tokens={self.max_tokens}, device={self.device}, "
                f"path={self.path!r}, world={self.world}, rank={self.rank})")

    # --- weights ---
    def load_weights(self, w1, w2, w1_scales=None, w2_scales=None, *, layout=None, b1=None, b2=None):
        """Loads this rank's expert weights (E = experts_per_rank + shared_experts: the rank's routed
        experts, then the model's shared ones; D = model_dim, I = inter_dim; W1's rows 0..I-1 are
        gate, I..2I-1 up).

        MXFP4, as checkpoints ship them (give the scales): w1 uint8 [E, 2I, D/2] and w1_scales
        uint8 or float8_e8m0fnu [E, 2I, D/32]; w2 [E, D, I/2] and w2_scales [E, D, I/32]; two
        e2m1 values per byte, element 2j in the low nibble.
        Or dense (no scales): w1 [E, 2I, D] and w2 [E, D, I], float32 or bfloat16, quantized to
        MXFP4 here. Host or device tensors of any framework; they are copied.

        b1 [E, 2I] and b2 [E, D]: the expert biases (gpt-oss), float32, bfloat16 or float16 (kept
        as float32): b1 added to GEMM1's outputs before the activation, b2 to GEMM2's before the
        route weight. Both or neither, as the config's model.expert_biases says (expert_biases).

        layout: how the checkpoint stores W1 (docs/layer.md, "Checkpoint layouts"); None (the
        default): "halves", except for a SwiGLU config (gpt-oss), which must name it, since the
        shapes cannot tell halves from gpt-oss's rows interleaved.
        "halves": one tensor, gate rows then up rows (the library's own; transformers' Qwen3-MoE
        gate_up_proj); b1 gate then up.
        "separate_gate_up": w1 = (gate, up), each [E, I, D/2] (dense: [E, I, D]), and w1_scales =
        (gate_scales, up_scales), each [E, I, D/32]: compressed-tensors' mxfp4-pack-quantized, as
        Kimi checkpoints ship them; b1 = (gate_bias, up_bias), each [E, I], or one [E, 2I] tensor,
        gate then up.
        "gpt_oss": gpt-oss's checkpoint, gate and up interleaved by row (row 2i gate i, row 2i+1
        up i): w1 = gate_up_proj_blocks [E, 2I, D/32, 16] (or the same bytes as [E, 2I, D/2]),
        w1_scales = gate_up_proj_scales [E, 2I, D/32], w2 = down_proj_blocks [E, D, I/32, 16] (or
        [E, D, I/2]), w2_scales = down_proj_scales [E, D, I/32], b1 = gate_up_proj_bias [E, 2I]
        (interleaved alike), b2 = down_proj_bias [E, D]. Dense, it takes transformers'
        GptOssExperts parameters as they are: w1 = gate_up_proj [E, D, 2I] (x @ W, the output
        axis interleaved) and w2 = down_proj [E, I, D].
        The shapes cannot tell halves from rows interleaved ([E, 2I, ...] either way), nor, where
        D == I (gpt-oss's own), a dense down_proj [E, I, D] from [E, D, I]: give the checkpoint's
        layout.

        Returns the number of MX blocks the kernels' layout flushed to zero (scales more than 11
        binades below their row's largest; 0 for most checkpoints), and warns with the count of
        each matrix (flushed_blocks has them) where it is not 0."""
        weights = self._upload(self.experts_per_rank + self.shared_experts, False, w1, w2, w1_scales, w2_scales,
                               self._layout(layout), b1, b2)
        self._weights = weights
        _warn_flushed(weights)
        return weights.flushed_blocks

    def stage_experts(self, w1, w2, w1_scales=None, w2_scales=None, *, layout=None, b1=None, b2=None):
        """Experts for replace_experts: any number n of experts, given as load_weights takes them
        (the same formats, layouts and biases, with n for experts_per_rank), converted to the
        layer's layout in device memory of their own (this allocates and waits for the upload).
        Returns the staged experts (.experts, .flushed_blocks, .bytes)."""
        layout = self._layout(layout)
        n = _leading_dim(w1[0] if layout == "separate_gate_up" and isinstance(w1, (tuple, list)) else w1)
        return self._upload(n, True, w1, w2, w1_scales, w2_scales, layout, b1, b2)

    def _layout(self, layout):
        """The checkpoint layout: as given, else halves; a SwiGLU model (gpt-oss) must name it."""
        if layout is not None:
            return layout
        if self.activation == "swiglu":
            raise InputError("layout", "not given", "layout='gpt_oss' for gpt-oss's checkpoint (gate and up "
                             "interleaved by row, as its *_blocks and *_scales ship) or layout='halves' (gate rows, "
                             f"then up rows): for config {self.config!r} the shapes cannot tell them apart")
        return "halves"

    def replace_experts(self, slots, staged, *, stream=None):
        """Copies staged experts into this rank's slots, staged expert i into slots[i] (local
        slots as load_weights took them: 0 .. experts_per_rank - 1 the routed ones, the group's slot
        rank * experts_per_rank + s; then the shared experts, experts_per_rank + j), on
        `stream` (default: torch's current stream on the layer's GPU, else the default stream), in place: no
        allocation and no host sync, ordered against the calls before and after it on that stream;
        graphs captured before read the new weights, and it can be captured itself. Keep `staged`
        alive until the stream has passed the copies. Raises megamoe.Error for a slot out of range
        or named twice, or a count other than staged.experts."""
        if stream is None:
            stream = _current_torch_stream(self._device)
        self.runtime._runtime.replace_experts(self._loaded("replace_experts"), [int(s) for s in slots], staged,
                                              _stream_handle(stream))

    def _loaded(self, what):
        if self._weights is None:
            raise InputError("layer", "no weights", f"load_weights() before {what}")
        return self._weights

    def _upload(self, E, stage, w1, w2, w1_scales, w2_scales, layout, b1, b2):
        D, I = self.model_dim, self.inter_dim
        if (w1_scales is None) != (w2_scales is None):
            raise InputError("w1_scales, w2_scales", "one given", "both (MXFP4) or neither (dense weights)")
        self._check_biases_given(b1, b2)
        try:
            w1, w1_scales, w2, w2_scales, b1, b2 = to_halves(layout, w1, w1_scales, w2, w2_scales, b1, b2, E, D, I)
        except InputError as e:
            if ", the shape of " not in e.value:
                raise
            raise InputError(e.field, e.value, f"{e.expected}; the order is load_weights(w1, w2, w1_scales, "
                             "w2_scales)") from None
        biases = () if b1 is None else (b1, b2)
        if w1_scales is not None:
            return self.runtime._runtime.load_mxfp4(E, stage, w1, w1_scales, w2, w2_scales, *biases)
        load = self.runtime._runtime.load_fp32 if w1.dtype == np.float32 else self.runtime._runtime.load_bf16
        return load(E, stage, w1, w2, *biases)

    def _check_biases_given(self, b1, b2):
        """Both biases or neither, and what the config says (before anything is copied)."""
        if (b1 is None) != (b2 is None):
            raise InputError("b1, b2", f"{'b1' if b2 is None else 'b2'} alone", "both (expert biases) or neither")
        given = b1 is not None
        if given and not self.expert_biases:
            raise InputError("b1, b2", "biases given", f"none: config {self.config!r} has no expert biases "
                             "(model.expert_biases is false)")
        if not given and self.expert_biases:
            raise InputError("b1, b2", "no biases", f"both: config {self.config!r} adds expert biases "
                             "(model.expert_biases is true; gpt-oss's gate_up_proj_bias and down_proj_bias)")

    # --- calls ---
    def __call__(self, x, topk_ids, topk_weights, *, out=None, stream=None):
        """y[t] = sum_k topk_weights[t, k] * FFN_{topk_ids[t, k]}(x[t]).

        x bfloat16 [T, D], contiguous, 16-byte aligned, on the layer's GPU; topk_ids int32
        [T, topk] (global expert ids; -1 is an empty slot; torch int64 is converted); topk_weights
        float32 [T, topk] (torch bfloat16/float16 are converted). T may be 0 and at most
        max_tokens. Returns y bfloat16 [T, D], or writes `out` and returns it.

        Runs on the caller's stream: for torch tensors torch.cuda.current_stream(); otherwise
        `stream` (a CUstream as an int, or an object with .ptr or __cuda_stream__), else CuPy's
        current stream for CuPy arrays, else the default stream. Launches only: no host sync, so a
        call can be captured in a CUDA graph (call prepare(T) or one call of that size first).
        Ids out of range are skipped and counted: see take_errors()."""
        if _torch_tensor is not None and isinstance(x, _torch_tensor):
            return _torch_call(self, x, topk_ids, topk_weights, out)
        return self._call_arrays(x, topk_ids, topk_weights, out, stream)

    forward = __call__

    def _call_arrays(self, x, topk_ids, topk_weights, out, stream):
        xi, ii, wi = describe(x, "x"), describe(topk_ids, "topk_ids"), describe(topk_weights, "topk_weights")
        tokens = self._check_call(xi, ii, wi)
        if out is None:
            out = _empty_like(x, xi)
        yi = describe(out, "out")
        self._check_out(xi, yi)
        if stream is None:
            stream = _framework_stream(x)
        handle = _stream_handle(stream)
        self._launch(xi.ptr, ii.ptr, wi.ptr, yi.ptr, tokens, handle)
        return out

    def _launch(self, x, ids, weights, y, tokens, stream):
        """The call's launches on `stream` (addresses checked), then strict's check."""
        self.runtime._runtime.forward(self._loaded("the first call"), x, ids, weights, y, tokens, stream)
        self.runtime._after_call(stream)

    def _check_call(self, xi, ii, wi, int_ids=("int32",), weight_dtypes=("float32",)):
        D, K = self.model_dim, self.topk
        if len(xi.shape) != 2 or xi.shape[1] != D:
            raise InputError("x", f"shape {list(xi.shape)}", f"[tokens, {D}]")
        T = xi.shape[0]
        for name, info, shape, dtypes in (("x", xi, (T, D), ("bfloat16", "uint16")),
                                          ("topk_ids", ii, (T, K), int_ids),
                                          ("topk_weights", wi, (T, K), weight_dtypes)):
            _check(name, info.shape, info.dtype, shape, dtypes)
            if not info.contiguous():
                raise InputError(name, f"strides {list(info.strides)}", "a contiguous (row-major) tensor")
            if info.device != "cuda" or info.device_id not in (-1, self._device):
                raise InputError(name, f"on {_where(info)}", f"on cuda:{self._device}")
        if T > 0 and xi.ptr % 16:
            raise InputError("x", f"address {xi.ptr:#x}", "16-byte aligned")
        if T > self.max_tokens:
            raise InputError("x", f"{T} tokens", f"at most max_tokens = {self.max_tokens}")
        return T

    def _check_out(self, xi, yi):
        _check("out", yi.shape, yi.dtype, xi.shape, ("bfloat16", "uint16"))
        if not yi.contiguous():
            raise InputError("out", f"strides {list(yi.strides)}", "a contiguous (row-major) tensor")
        if yi.device != "cuda" or yi.device_id not in (-1, self._device):
            raise InputError("out", f"on {_where(yi)}", f"on cuda:{self._device}")
        if xi.shape[0] > 0 and yi.ptr % 16:
            raise InputError("out", f"address {yi.ptr:#x}", "16-byte aligned")

    def prepare(self, tokens):
        """Builds and loads the kernels for calls of `tokens` tokens now rather than at the first
        such call (before capturing one in a graph); every layer of the runtime shares them."""
        self.runtime.prepare(tokens)

    def take_errors(self):
        """Waits for the GPU and returns the CallErrors gathered since the last take_errors(): the
        runtime's, so those of every layer sharing it (Runtime.take_errors). Raises
        PeerTimeoutError when a wait for another rank timed out (then every rank calls recover());
        with strict, DroppedRowsError (carrying them all) where rows were dropped."""
        return self.runtime.take_errors()

    def recover(self):
        """After a PeerTimeoutError: waits until no kernel of the group runs and lets calls go on.
        Every rank of the group calls it."""
        self.runtime.recover()

    def set_serial(self, serial):
        """Several ranks: dispatch, the expert GEMMs and combine as separate launches (every rank
        the same choice); the runtime's setting, for every layer of it."""
        self.runtime.set_serial(serial)


def _warn_flushed(weights):
    """A line per matrix whose MX blocks the kernels' layout flushed to zero."""
    import warnings

    for name, n in (("w1", getattr(weights, "flushed_w1", 0)), ("w2", getattr(weights, "flushed_w2", 0))):
        if n:
            warnings.warn(f"megamoe: load_weights: {n} MX block(s) of {name} flushed to zero: their scales lie more "
                          "than 11 binades below their row's largest, so each value was under 2^-11 of the row's "
                          "largest (docs/layer.md, \"Weights\")", stacklevel=3)


def _check(field, shape, dtype, expected_shape, dtypes):
    if tuple(shape) != tuple(expected_shape):
        raise InputError(field, f"shape {list(shape)}", f"{list(expected_shape)}")
    if dtype not in dtypes:
        raise InputError(field, f"dtype {dtype}", " or ".join(dtypes))


def _leading_dim(a):
    shape = getattr(a, "shape", None)
    if not shape:
        raise InputError("w1", f"a {type(a).__name__}", "an array of experts [n, ...]")
    return int(shape[0])


def _current_torch_stream(device):
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return 0
    return torch.cuda.current_stream(device).cuda_stream


def _where(info):
    return info.device if info.device == "cpu" or info.device_id < 0 else f"{info.device}:{info.device_id}"


def _empty_like(x, xi):
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy.empty(xi.shape, dtype=x.dtype)
    raise InputError("out", "None for a " + type(x).__name__, "an output array (megamoe allocates for torch and CuPy)")


def _framework_stream(x):
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    return 0


def _stream_handle(stream):
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    if hasattr(stream, "ptr"):
        return int(stream.ptr)
    if hasattr(stream, "cuda_stream"):
        return int(stream.cuda_stream)
    raise InputError("stream", f"a {type(stream).__name__}", "an int (CUstream), or an object with .ptr or __cuda_stream__")
