"""megamoe.deep_gemm without a GPU: the config made from DeepGEMM's call shapes and clamp, and the
arguments it cannot honour refused, each naming the argument and what it accepts."""

import pytest

import megamoe
import megamoe.deep_gemm as deep_gemm


def test_the_config_takes_the_same_model_shapes_table_and_the_calls_swiglu(tmp_path, monkeypatch):
    monkeypatch.setenv("MEGAMOE_CACHE_DIR", str(tmp_path))
    path = deep_gemm.mega_moe_config(896, 3584, 3072, 16, activation_clamp=7.0)
    info = megamoe.config_info(path)
    assert (info["experts"], info["model_dim"], info["inter_dim"], info["topk"]) == (896, 3584, 3072, 16)
    assert info["activation"] == "swiglu" and info["limit"] == 7.0 and info["alpha"] == 1.0 and info["up_offset"] == 0
    assert "kimi_k3_a8w4" in info["name"]  # the built-in model of this shape lends its tuned table
    assert info["buckets"] == megamoe.config_info("kimi_k3_a8w4")["buckets"]
    assert path.startswith(str(tmp_path))
    plain = megamoe.config_info(deep_gemm.mega_moe_config(64, 1024, 512, 4))  # no clamp, no such model
    assert plain["activation"] == "silu" and "generic_a8w4" in plain["name"]
    assert deep_gemm.mega_moe_config(64, 1024, 512, 4) == deep_gemm.mega_moe_config(64, 1024, 512, 4)


@pytest.mark.parametrize("kwargs,field,expected", [
    ({"mma_type": "bf16xbf16"}, "mma_type", "'fp8xfp4'"),
    ({"use_fp8_dispatch": False}, "use_fp8_dispatch", "None or True"),
    ({"activation": "silu"}, "activation", "'swiglu'"),
    ({"hidden": 1000}, "hidden", "a multiple of 128"),
    ({"num_topk": 0}, "num_topk", "1 or more"),
])
def test_buffer_arguments_it_cannot_honour_are_named(kwargs, field, expected):
    args = dict(group=None, num_experts=64, num_max_tokens_per_rank=128, num_topk=4, hidden=1024,
                intermediate_hidden=512)
    args.update(kwargs)
    with pytest.raises(megamoe.InputError) as e:
        deep_gemm.get_symm_buffer_for_mega_moe(**args)
    assert e.value.field == field and expected in e.value.expected, str(e.value)


@pytest.mark.parametrize("kwargs,field,expected", [
    ({"recipe": (1, 1, 128)}, "recipe", "(1, 1, 32)"),
    ({"activation": "gelu"}, "activation", "'swiglu'"),
    ({"fast_math": False}, "fast_math", "True"),
    ({"cumulative_local_expert_recv_stats": object()}, "cumulative_local_expert_recv_stats", "None"),
    ({"activation_clamp": -1.0}, "activation_clamp", "0 or more"),
])
def test_call_arguments_it_cannot_honour_are_named(kwargs, field, expected):
    with pytest.raises(megamoe.InputError) as e:
        deep_gemm.fp8_fp4_mega_moe(None, None, None, None, **kwargs)
    assert e.value.field == field and expected in e.value.expected, str(e.value)
