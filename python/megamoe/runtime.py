"""megamoe.Runtime: one rank's kernels, workspace and expert-parallel group, shared by every MoE
layer of a model (each layer holds only its weights)."""

from dataclasses import dataclass

from . import _megamoe
from .errors import DroppedRowsError, InputError


@dataclass
class CallErrors:
    """What the kernels found wrong in the calls since the last take_errors()."""

    bad_ids: int = 0            # ids outside [-1, experts): skipped
    first_bad_slot: int = -1    # t * topk + k of the first of them
    bounds_violations: int = 0  # counted by the checked build only (MEGAMOE_BOUNDS_CHECK=1)
    dropped_rows: int = 0       # several ranks: routed rows past the rank's capacity

    def any(self):
        return bool(self.bad_ids or self.bounds_violations or self.dropped_rows)

    def merged(self, later):
        """These errors and `later`'s (taken after them) as one."""
        return CallErrors(self.bad_ids + later.bad_ids,
                          self.first_bad_slot if self.first_bad_slot >= 0 else later.first_bad_slot,
                          self.bounds_violations + later.bounds_violations, self.dropped_rows + later.dropped_rows)


def _device_index(device):
    if isinstance(device, bool) or not isinstance(device, (int, str)) and not hasattr(device, "index"):
        raise InputError("device", repr(device), "a GPU index, 'cuda', 'cuda:N' or a torch.device")
    if isinstance(device, int):
        if device < 0:
            raise InputError("device", repr(device), "a GPU index of 0 or more")
        return device
    if isinstance(device, str):  # "cuda", "cuda:1"
        kind, _, index = device.partition(":")
        if kind != "cuda" or (index and not index.isdigit()):
            raise InputError("device", repr(device), "'cuda' or 'cuda:N'")
        return int(index) if index else 0
    index = getattr(device, "index", None)  # torch.device
    if getattr(device, "type", "cuda") != "cuda":
        raise InputError("device", repr(device), "a CUDA device")
    return 0 if index is None else int(index)


def _torch_all_gather(group):
    import torch.distributed as dist

    def all_gather(mine):
        got = [None] * dist.get_world_size(group)
        dist.all_gather_object(got, bytes(mine), group=group)
        return b"".join(got)

    return all_gather


def _find_nvshmem():
    """MEGAMOE_NVSHMEM_DIR from the nvidia-nvshmem-cu13 wheel where the user set none (the C++
    library looks there first)."""
    import os

    if os.environ.get("MEGAMOE_NVSHMEM_DIR"):
        return
    try:
        import nvidia.nvshmem as wheel
    except ImportError:
        return  # the library says where it looked
    for base in getattr(wheel, "__path__", []):
        if os.path.exists(os.path.join(base, "lib", "libnvshmem_host.so.3")):
            os.environ["MEGAMOE_NVSHMEM_DIR"] = base
            return


def _check_int(name, value, low, high=None, what=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise InputError(name, repr(value), what or (f"an int from {low} to {high}" if high is not None
                                                     else f"an int of {low} or more"))
    return value


class Runtime:
    """One rank's runtime: the kernels, the workspace (sized by max_tokens) and, with a group, the
    expert-parallel group, built from a config (a built-in name such as "kimi_k3_a8w4", or a path
    ending in .json). Every MoE layer of a model can share it: runtime.layer() gives a Layer that
    holds only its own weights, so a model of L layers takes one workspace and L sets of weights
    (workspace_bytes(..., layers=L) states it). Layers sharing a runtime share its workspace: call
    them in order on one stream (as a model's forward does; a CUDA graph may capture several
    layers' calls), not from two streams at once. Over a group, every rank calls the same layers
    in the same order. Layer(config, ...) makes a runtime of its own.

    The arguments are Layer's (see megamoe.Layer); they are checked before the GPU is opened
    (InputError, a ValueError, naming the argument; ConfigError for an unknown config)."""

    def __init__(self, config="kimi_k3_a8w4", max_tokens=8192, device=0, *, path="auto", group=None,
                 transport="ipc", node_size=0, timeout_ms=5000, routed_rows_capacity=0, fp8_resident_weights=True,
                 experts_per_rank=None, redundant_experts=0, shared_experts=None, shared_expert_scale=1.0,
                 strict=False, bucket_table=None):
        _check_int("max_tokens", max_tokens, 1, 32768)  # the largest bucket (kMaxBucket)
        _check_int("timeout_ms", timeout_ms, 1)
        _check_int("routed_rows_capacity", routed_rows_capacity, 0)
        _check_int("redundant_experts", redundant_experts, 0)
        if experts_per_rank is not None:
            _check_int("experts_per_rank", experts_per_rank, 1)
        if shared_experts is not None:
            _check_int("shared_experts", shared_experts, 0)
        if path not in ("auto", "hopper", "tensor_core", "portable"):
            raise InputError("path", repr(path), "'auto', 'hopper', 'tensor_core' or 'portable'")
        if transport not in ("ipc", "nvshmem"):
            raise InputError("transport", repr(transport), "'ipc' (one node) or 'nvshmem' (over nodes), with a group")
        _check_int("node_size", node_size, 0)
        if bucket_table is not None and (not isinstance(bucket_table, str) or not bucket_table):
            raise InputError("bucket_table", repr(bucket_table),
                             "None, 'default' or a card's name as the driver gives it ('NVIDIA H200')")
        if node_size and transport != "nvshmem":
            raise InputError("node_size", repr(node_size), "0 unless transport='nvshmem'")
        self._device = _device_index(device)
        world, rank, all_gather = 1, 0, None
        config = str(config)
        _megamoe.config_info(config)  # ConfigError for a name or file that is not a config, before any GPU
        if group is not None:
            import torch.distributed as dist

            world, rank = dist.get_world_size(group), dist.get_rank(group)
            all_gather = _torch_all_gather(group)
            if node_size and world % node_size:
                raise InputError("node_size", repr(node_size), f"a divisor of the group's {world} ranks")
            if transport == "nvshmem":
                _find_nvshmem()
        elif transport == "nvshmem":
            raise InputError("transport", "'nvshmem' without a group", "a torch.distributed group (group=)")
        else:
            transport = "loopback"
        self._runtime = _megamoe.Runtime(config, int(max_tokens), self._device, path, world, rank, transport,
                                         int(timeout_ms), all_gather, int(routed_rows_capacity),
                                         bool(fp8_resident_weights), int(experts_per_rank or 0),
                                         int(redundant_experts),
                                         -1 if shared_experts is None else int(shared_experts),
                                         float(shared_expert_scale), int(node_size), bucket_table or "")
        self._info = self._runtime.info()
        self._workspace = dict(self._runtime.workspace_bytes())
        self.strict = bool(strict)
        self._held = CallErrors()  # taken by strict's check after a call, given back by take_errors()

    def layer(self):
        """A new Layer of this runtime: it loads its own weights (load_weights) and is called as any
        Layer, through this runtime's workspace."""
        from .layer import Layer

        return Layer._of_runtime(self)

    # --- what the runtime is ---
    config = property(lambda self: self._info["config"])
    path = property(lambda self: self._info["path"], doc="the kernel path running: portable, tensor_core or hopper")
    path_note = property(lambda self: self._info["path_note"],
                         doc="why path 'auto' runs a slower path than the GPU's fastest, and where the path "
                             "runs the model's dims padded, to what and at what cost ('' for neither)")
    bucket_table = property(lambda self: self._info["bucket_table"],
                            doc="the bucket table running: the card it was tuned on, or 'default' for a config "
                                "default naming none (docs/configs.md, 'A table per card')")
    bucket_table_note = property(lambda self: self._info["bucket_table_note"],
                                 doc="which bucket table runs and why: this card's own, the one named, or the "
                                     "default for want of one (then tuned on another card)")
    world = property(lambda self: self._info["world"])
    rank = property(lambda self: self._info["rank"])
    device = property(lambda self: self._device)
    max_tokens = property(lambda self: self._info["max_tokens"])
    experts = property(lambda self: self._info["experts"],
                       doc="expert slots over every rank: the ids a call takes (the model's experts, plus "
                           "redundant_experts)")
    logical_experts = property(lambda self: self._info["logical_experts"], doc="the model's own experts")
    experts_per_rank = property(lambda self: self._info["experts_per_rank"], doc="this rank's slots: experts / world")
    shared_experts = property(lambda self: self._info["shared_experts"],
                              doc="experts every token goes through beside its routed ones, held by every rank")
    shared_expert_scale = property(lambda self: self._info["shared_expert_scale"],
                                   doc="the shared experts' weight in every token's sum")
    model_dim = property(lambda self: self._info["model_dim"])
    inter_dim = property(lambda self: self._info["inter_dim"])
    topk = property(lambda self: self._info["topk"])
    expert_biases = property(lambda self: self._info["expert_biases"],
                             doc="whether the model adds expert biases: load_weights then takes b1 and b2")
    activation = property(lambda self: self._info["activation"], doc="the activation's kind: silu, situv2 or swiglu")
    workspace_bytes = property(lambda self: self._workspace["total"],
                               doc="device bytes of the runtime's workspace, which its layers share (beside "
                                   "each layer's weights)")
    workspace = property(lambda self: dict(self._workspace),
                         doc="workspace_bytes by part: layer, symmetric_region, group_plan, total, and routed_rows "
                             "(the rows this rank holds: routed_rows_capacity, or the worst case)")
    routed_rows_capacity = property(lambda self: self._workspace["routed_rows"],
                                    doc="routed rows this rank holds (the worst case where 0 was asked)")

    def arithmetic(self, tokens):
        """How a call of `tokens` tokens rounds on the running path (see Layer.arithmetic)."""
        return self._runtime.arithmetic(int(tokens))

    def __repr__(self):
        return (f"megamoe.Runtime({self.config!r}, max_tokens={self.max_tokens}, device={self.device}, "
                f"path={self.path!r}, world={self.world}, rank={self.rank})")

    # --- calls of every layer ---
    def prepare(self, tokens):
        """Builds and loads the kernels for calls of `tokens` tokens now rather than at the first
        such call (before capturing one in a graph); every layer of the runtime uses them."""
        self._runtime.prepare(int(tokens))

    def take_errors(self):
        """Waits for the GPU and returns the CallErrors of every call of every layer of this runtime
        since the last take_errors(). Raises PeerTimeoutError when a wait for another rank timed out
        (then every rank calls recover()); with strict, DroppedRowsError (carrying them all) where
        rows were dropped."""
        self._held = self._held.merged(CallErrors(**self._runtime.take_errors()))
        if self.strict and self._held.dropped_rows:
            self._raise_dropped()
        taken, self._held = self._held, CallErrors()
        return taken

    def recover(self):
        """After a PeerTimeoutError: waits until no kernel of the group runs and lets calls go on.
        Every rank of the group calls it."""
        self._runtime.recover()

    def set_serial(self, serial):
        """Several ranks: dispatch, the expert GEMMs and combine as separate launches (every rank
        the same choice), for every layer of the runtime."""
        self._runtime.set_serial(bool(serial))

    def _after_call(self, stream):
        """strict: waits for the call and raises DroppedRowsError for rows it dropped (not while
        `stream` is captured: take_errors() checks those calls)."""
        if self.strict and not self._runtime.capturing(stream):
            self._held = self._held.merged(CallErrors(**self._runtime.take_errors()))
            if self._held.dropped_rows:
                self._raise_dropped()

    def _raise_dropped(self):
        taken, self._held = self._held, CallErrors()
        raise DroppedRowsError(taken.dropped_rows, self.routed_rows_capacity, taken)
