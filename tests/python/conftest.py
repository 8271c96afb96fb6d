"""pytest setup for the Python package's tests: the `gpu` marker (those tests need a CUDA GPU and
a CUDA PyTorch, and are skipped with the reason said where either is missing) and the paths the
tests share."""

import os
import pathlib
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMALL_CONFIG = str(ROOT / "tests" / "python" / "configs" / "small_a8w4.json")
SMALL_FP8RES_CONFIG = str(ROOT / "tests" / "python" / "configs" / "small_a8w4_fp8res.json")  # the same, fp8-resident

# Never the user's kernel cache: a cache of the tests' own unless the caller names one.
os.environ.setdefault("MEGAMOE_CACHE_DIR", tempfile.mkdtemp(prefix="megamoe-pytest-cache-"))


def gpu_skip_reason():
    import megamoe

    ok, why = megamoe.gpu_available()
    if not ok:
        return f"skipped: no GPU ({why})"
    try:
        import torch
    except ImportError:
        return "skipped: the GPU tests need PyTorch, which is not installed"
    if not torch.cuda.is_available():
        return "skipped: PyTorch has no CUDA here"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_skip_reason()
    if reason is None:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_report_header(config):
    reason = gpu_skip_reason()
    return "GPU tests: " + (reason if reason else "a GPU is present, running them")


def load_gpt_oss_checkpoint(experts, ckpt):
    """A gpt-oss checkpoint (blocks, e8m0 scales, biases) into transformers' GptOssExperts, through
    transformers' own MXFP4 dequantizer: gate_up_proj [E, D, 2I] and down_proj [E, I, D], fp32."""
    import torch
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    with torch.no_grad():
        experts.gate_up_proj.copy_(convert_moe_packed_tensors(ckpt["gate_up_proj_blocks"], ckpt["gate_up_proj_scales"],
                                                              dtype=torch.float32))
        experts.down_proj.copy_(convert_moe_packed_tensors(ckpt["down_proj_blocks"], ckpt["down_proj_scales"],
                                                           dtype=torch.float32))
        experts.gate_up_proj_bias.copy_(ckpt["gate_up_proj_bias"].float())
        experts.down_proj_bias.copy_(ckpt["down_proj_bias"].float())
