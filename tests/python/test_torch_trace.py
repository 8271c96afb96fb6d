"""The torch custom ops without a GPU (where PyTorch is installed; skipped, and said so, where it
is not): their schema and fake implementations, and torch.compile(fullgraph=True) tracing the
example block into one graph that calls megamoe::forward. The layer's runtime is a recorder
(test_inputs.py): nothing runs on a GPU."""

import importlib.util

import pytest

torch = pytest.importorskip("torch", reason="skipped: PyTorch is not installed here")

import megamoe  # noqa: E402
from conftest import ROOT  # noqa: E402
from test_inputs import offline_layer  # noqa: E402


@pytest.fixture
def layer():
    layer = offline_layer()
    layer.handle = 10_000 + id(layer) % 10_000
    megamoe.layer._layers[layer.handle] = layer
    return layer


def test_the_ops_schemas_and_fake_implementations(layer):
    from torch.library import opcheck

    meta = dict(device="meta")
    x = torch.empty(5, layer.model_dim, dtype=torch.bfloat16, **meta)
    ids = torch.empty(5, layer.topk, dtype=torch.int32, **meta)
    w = torch.empty(5, layer.topk, **meta)
    checks = ("test_schema", "test_faketensor")
    assert set(opcheck(torch.ops.megamoe.forward.default, (x, ids, w, layer.handle), test_utils=checks).values()) == {"SUCCESS"}
    args = (x, ids, w, torch.empty_like(x), layer.handle)
    assert set(opcheck(torch.ops.megamoe.forward_out.default, args, test_utils=checks).values()) == {"SUCCESS"}


def test_torch_compile_traces_the_example_block_into_one_graph(layer):
    spec = importlib.util.spec_from_file_location("moe_block", ROOT / "examples" / "moe_block.py")
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    block = ex.MoEBlock(layer, torch.randn(layer.experts_per_rank, layer.model_dim))
    compiled = torch.compile(block, fullgraph=True, backend=backend)
    # The graph is traced whole (a break would raise here), then run: the real op refuses host tensors.
    with pytest.raises(megamoe.InputError) as e:
        compiled(torch.randn(6, layer.model_dim).to(torch.bfloat16))
    assert e.value.field == "x" and "cuda" in e.value.expected
    assert len(graphs) == 1 and "torch.ops.megamoe.forward" in graphs[0].code
