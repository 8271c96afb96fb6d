"""Exceptions of megamoe. The C++ library's errors arrive as the classes of the same names, with
the C++ message and the fields each carries; InputError, for a tensor of the wrong shape, dtype,
device or layout, is raised here before a call, or by the C++ checkpoint layouts (the same fields)."""

__all__ = ["Error", "ConfigError", "CompileError", "DeviceError", "NoGpuError", "PeerTimeoutError", "DroppedRowsError",
           "InputError"]


class Error(RuntimeError):
    """Any error of megamoe (megamoe::Error in C++)."""


class ConfigError(Error):
    """A config that breaks the schema: the file, the JSON path, the value and what was expected."""

    def __init__(self, message, file="", json_path="", value="", expected=""):
        super().__init__(message)
        self.file, self.json_path, self.value, self.expected = file, json_path, value, expected


class CompileError(Error):
    """A kernel that did not compile: its name, cache key, compiler options and log, and the path
    where its rendered source was saved."""

    def __init__(self, message, kernel_name="", key="", options=(), log="", source_path=""):
        super().__init__(message)
        self.kernel_name, self.key, self.options = kernel_name, key, list(options)
        self.log, self.source_path = log, source_path


class DeviceError(Error):
    """A GPU driver or device failure."""


class NoGpuError(DeviceError):
    """No GPU driver or no GPU device on this machine."""


class PeerTimeoutError(Error):
    """A wait for another rank of an expert-parallel group that did not end within timeout_ms:
    this rank, the peer it waited for and the phase of the call. Every rank then calls
    Layer.recover() before its next call."""

    def __init__(self, message, rank=-1, peer=-1, phase="", timeout_ms=0):
        super().__init__(message)
        self.rank, self.peer, self.phase, self.timeout_ms = rank, peer, phase, timeout_ms


class DroppedRowsError(Error):
    """A Layer created with strict=True found routed rows past this rank's routed_rows_capacity:
    dropped, so their tokens' outputs lack them. dropped_rows counts them; capacity is the
    rank's; errors is the whole CallErrors taken (take_errors() was called for it)."""

    def __init__(self, dropped_rows, capacity, errors):
        super().__init__(f"megamoe: {dropped_rows} routed row(s) past this rank's routed_rows_capacity = {capacity} "
                         "were dropped (their tokens' outputs lack them); raise routed_rows_capacity (0: the worst "
                         "case) or route more evenly")
        self.dropped_rows, self.capacity, self.errors = dropped_rows, capacity, errors


class InputError(Error, ValueError):
    """An argument of the wrong shape, dtype, device or layout: names the argument (field), what
    it was (value) and what was expected."""

    def __init__(self, field, value, expected):
        super().__init__(f"megamoe: {field}: {value}, expected {expected}")
        self.field, self.value, self.expected = field, value, expected
