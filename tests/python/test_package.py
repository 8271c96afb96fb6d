"""The package without a GPU: import, configs, errors as Python classes, precompile into a
temporary cache."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import megamoe
from conftest import ROOT, SMALL_CONFIG


def test_version_is_the_cmake_project_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert megamoe.__version__ == re.search(r"project\(megamoe VERSION ([0-9.]+)", cmake).group(1)


def test_builtin_configs_are_listed():
    assert {"kimi_k3_a8w4", "generic_a8w4", "deepseek_v3_a8w4", "kimi_k2_a8w4", "qwen3_235b_a8w4"} <= set(megamoe.configs())


def test_kimi_config_matches_the_spec():
    info = megamoe.config_info("kimi_k3_a8w4")
    # The default tuned on an H200 names that card; the H100's table beside it.
    assert info["bucket_tables"] == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    assert (info["experts"], info["model_dim"], info["inter_dim"], info["topk"]) == (896, 3584, 3072, 16)
    assert info["bucket_keys_experts_per_rank"] == 112  # the table is tuned where a rank holds EP8's share
    assert info["activation"] == "situv2" and info["beta"] == 4.0 and info["linear_beta"] == 25.0
    assert info["weights_format"] == "mxfp4" and info["activations_format"] == "fp8_e4m3"
    assert info["buckets"] == [2**i for i in range(16)]


def test_a_config_file_is_read_by_path():
    info = megamoe.config_info(SMALL_CONFIG)
    assert info["name"] == "small_a8w4" and info["experts"] == 8 and info["source"] == SMALL_CONFIG


def test_swiglu_parameters_are_read(tmp_path):
    cfg = json.loads(pathlib.Path(SMALL_CONFIG).read_text())
    cfg["activation"] = {"kind": "swiglu", "limit": 7.0, "alpha": 1.702, "up_offset": 1.0}
    path = tmp_path / "small_a8w4.json"  # a config file is named as its name
    path.write_text(json.dumps(cfg))
    info = megamoe.config_info(str(path))
    assert info["activation"] == "swiglu" and info["limit"] == 7.0 and info["up_offset"] == 1.0
    assert info["alpha"] == pytest.approx(1.702)
    del cfg["activation"]["alpha"], cfg["activation"]["up_offset"]  # the clamped SwiGLU's defaults
    path.write_text(json.dumps(cfg))
    info = megamoe.config_info(str(path))
    assert info["alpha"] == 1.0 and info["up_offset"] == 0.0


def test_an_unknown_config_is_named_with_the_builtin_ones():
    with pytest.raises(megamoe.Error) as e:
        megamoe.config_info("no_such_config")
    assert "no_such_config" in str(e.value) and "kimi_k3_a8w4" in str(e.value)


def test_a_bad_field_is_named_with_its_value(tmp_path):
    cfg = json.loads(pathlib.Path(SMALL_CONFIG).read_text())
    cfg["model"]["experts"] = -3
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(megamoe.ConfigError) as e:
        megamoe.config_info(str(path))
    err = e.value
    assert err.file == str(path)
    assert err.json_path == "$.model.experts" and err.value == "-3" and err.expected
    assert "experts" in str(err) and "-3" in str(err)


def test_no_gpu_raises_no_gpu_error():
    ok, why = megamoe.gpu_available()
    if ok:
        pytest.skip("skipped: a GPU is present (this test is for machines without one)")
    assert why
    with pytest.raises(megamoe.NoGpuError) as e:
        megamoe.Layer(SMALL_CONFIG, max_tokens=16)
    assert isinstance(e.value, megamoe.DeviceError) and str(e.value)


def test_cache_dir_follows_the_environment():
    assert megamoe.cache_dir() == os.environ["MEGAMOE_CACHE_DIR"]


def _precompile(cache, *args):
    code = ("import json, megamoe; r = megamoe.precompile(%r, [1], path='portable', progress=True); "
            "print(json.dumps(r))" % SMALL_CONFIG)
    env = dict(os.environ, MEGAMOE_CACHE_DIR=str(cache))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr


def test_precompile_fills_a_temporary_cache_and_a_second_run_hits(tmp_path):
    cache = tmp_path / "cache"
    first, progress = _precompile(cache)
    assert first, "no kernels planned"
    assert all(r["result"] == "compiled" and r["buckets"] == [1] and not r["error"] for r in first)
    # One progress line per kernel, and one published entry (with its manifest) per key.
    assert len([l for l in progress.splitlines() if l.startswith("[")]) == len(first)
    manifests = list(cache.rglob("manifest.json"))
    assert len(manifests) == len({r["key"] for r in first})
    second, _ = _precompile(cache)
    assert [r["key"] for r in second] == [r["key"] for r in first]
    assert all(r["result"] == "hit" for r in second)


def test_tune_names_a_bad_output_and_needs_a_gpu(tmp_path):
    with pytest.raises(megamoe.Error) as e:
        megamoe.tune(SMALL_CONFIG, tmp_path / "Not-A-Name.json", progress=False)
    assert "expected NAME.json with NAME of [a-z0-9_]" in str(e.value)
    with pytest.raises(megamoe.Error) as e:
        megamoe.tune(SMALL_CONFIG, tmp_path / "t.json", modes="x=col", progress=False)
    assert "part 'x=col'" in str(e.value)
    with pytest.raises(ValueError, match="world = 33, expected an int from 1 to 32"):
        megamoe.tune(SMALL_CONFIG, tmp_path / "t.json", world=33, progress=False)
    with pytest.raises(ValueError, match="transport = 'ipc', expected 'loopback' or 'peer'"):
        megamoe.tune(SMALL_CONFIG, tmp_path / "t.json", world=2, transport="ipc", progress=False)
    with pytest.raises(megamoe.Error) as e:  # 8 experts over 3 ranks
        megamoe.tune(SMALL_CONFIG, tmp_path / "t.json", world=3, progress=False)
    assert "is not a multiple of world = 3" in str(e.value)
    if megamoe.gpu_available():
        return
    with pytest.raises(megamoe.NoGpuError):
        megamoe.tune(SMALL_CONFIG, tmp_path / "t.json", buckets=[1], progress=False)
    assert not (tmp_path / "t.json").exists()


def test_precompile_with_shared_experts_adds_the_kernel_that_routes_to_them():
    plain = megamoe.precompile(SMALL_CONFIG, [1], path="portable", progress=False)
    shared = megamoe.precompile(SMALL_CONFIG, [1], path="portable", shared_experts=1, progress=False)
    assert [r["name"] for r in shared] == ["megamoe_shared_routes"] + [r["name"] for r in plain]
    assert all(r["result"] in ("compiled", "hit") for r in shared)


def test_precompile_rejects_a_size_that_is_no_bucket():
    with pytest.raises(megamoe.Error) as e:
        megamoe.precompile(SMALL_CONFIG, [3], progress=False)
    assert "3" in str(e.value)


def test_workspace_bytes_before_creation_follows_the_options():
    # Kimi-K3 EP8, 8192 tokens a rank, Hopper: the symmetric region is the same at any capacity;
    # the routed rows follow routed_rows_capacity (docs/ep.md's table).
    worst = megamoe.workspace_bytes("kimi_k3_a8w4", max_tokens=8192, world=8, path="hopper")
    twice = megamoe.workspace_bytes("kimi_k3_a8w4", max_tokens=8192, world=8, path="hopper",
                                    routed_rows_capacity=2 * 8192 * 16)
    assert worst["routed_rows"] == 8 * 8192 * 16 and twice["routed_rows"] == 2 * 8192 * 16
    assert worst["symmetric_region"] == twice["symmetric_region"] > 0
    for w in (worst, twice):
        assert w["total"] == w["layer"] + w["symmetric_region"] + w["group_plan"]
    # Each routed row holds x and h in fp8 with a scale byte per 8 values, and its token, slot and weight.
    assert worst["layer"] - twice["layer"] == 6 * 8192 * 16 * ((3584 + 3584 // 8) + (3072 + 3072 // 8) + 12)
    assert megamoe.workspace_bytes("kimi_k3_a8w4", path="auto", arch="sm_90a") == \
        megamoe.workspace_bytes("kimi_k3_a8w4", path="hopper")
    one = megamoe.workspace_bytes("kimi_k3_a8w4", max_tokens=1024, path="hopper")
    assert one["symmetric_region"] == one["group_plan"] == 0 and one["routed_rows"] == 1024 * 16


def test_workspace_bytes_with_shared_experts():
    # One shared expert: every token one more routed row of its own rank, and the call's widened
    # ids and weights; the config names none of its own.
    assert megamoe.config_info("kimi_k3_a8w4")["shared_experts"] == 0
    plain = megamoe.workspace_bytes("kimi_k3_a8w4", max_tokens=1024, world=8, path="hopper")
    shared = megamoe.workspace_bytes("kimi_k3_a8w4", max_tokens=1024, world=8, path="hopper", shared_experts=1)
    assert shared["routed_rows"] == plain["routed_rows"] + 1024 == 8 * 1024 * 16 + 1024
    assert shared["total"] > plain["total"]
    with pytest.raises(megamoe.Error, match="shared_experts = 17"):
        megamoe.workspace_bytes("kimi_k3_a8w4", path="hopper", shared_experts=17)
    with pytest.raises(megamoe.Error, match="shared_expert_scale = nan"):
        megamoe.workspace_bytes("kimi_k3_a8w4", path="hopper", shared_experts=1, shared_expert_scale=float("nan"))


def test_workspace_bytes_names_a_bad_option():
    with pytest.raises(megamoe.Error, match="RuntimeOptions.max_tokens = 0"):
        megamoe.workspace_bytes("kimi_k3_a8w4", max_tokens=0, path="hopper")
    with pytest.raises(megamoe.Error, match="redundant_experts = 60: 896 logical experts"):
        megamoe.workspace_bytes("kimi_k3_a8w4", world=8, path="hopper", redundant_experts=60)
    with pytest.raises(megamoe.Error, match="no arch"):
        megamoe.workspace_bytes("kimi_k3_a8w4", path="auto", arch="")


def test_dropped_rows_error_names_the_count_and_the_capacity():
    errors = megamoe.CallErrors(bad_ids=2, first_bad_slot=7, dropped_rows=5)
    e = megamoe.DroppedRowsError(5, 300, errors)
    assert isinstance(e, megamoe.Error) and e.dropped_rows == 5 and e.capacity == 300 and e.errors is errors
    assert "5 routed row(s)" in str(e) and "routed_rows_capacity = 300" in str(e)
    merged = megamoe.CallErrors(1, -1, 0, 3).merged(errors)
    assert merged == megamoe.CallErrors(bad_ids=3, first_bad_slot=7, bounds_violations=0, dropped_rows=8)


def test_workspace_bytes_states_a_model_of_many_layers_through_one_runtime():
    one = megamoe.workspace_bytes("qwen3_235b_a8w4", world=8, path="hopper")
    many = megamoe.workspace_bytes("qwen3_235b_a8w4", world=8, path="hopper", layers=94)
    assert many["total"] == one["total"]  # one workspace whatever the layers
    # 16 experts a rank of 4096 x 1536 in MXFP4 (17/32 of a byte a value) at least, a layer.
    assert one["weights"] >= 16 * 3 * 4096 * 1536 * 17 // 32
    assert many["layers"] == 94 and many["model_total"] == one["total"] + 94 * one["weights"]
    without_copy = megamoe.workspace_bytes("kimi_k3_a8w4", experts_per_rank=112, path="hopper",
                                           fp8_resident_weights=False)
    with_copy = megamoe.workspace_bytes("kimi_k3_a8w4", experts_per_rank=112, path="hopper")
    assert with_copy["weights"] > without_copy["weights"]  # Kimi-K3's table reads the fp8-resident copy
    with pytest.raises(megamoe.InputError, match="layers"):
        megamoe.workspace_bytes("kimi_k3_a8w4", path="hopper", layers=0)


def test_workspace_bytes_of_the_nvshmem_transport_over_nodes_adds_its_relay_staging_and_outbox():
    args = dict(world=8, max_tokens=1024, path="hopper", routed_rows_capacity=32768)
    ipc = megamoe.workspace_bytes("kimi_k3_a8w4", **args)
    one_node = megamoe.workspace_bytes("kimi_k3_a8w4", transport="nvshmem", **args)
    assert one_node == ipc  # one node: load and store, as ipc
    shmem = megamoe.workspace_bytes("kimi_k3_a8w4", transport="nvshmem", node_size=4, **args)
    # The outbox alone: a bf16 wire row (2 x 3584 bytes) and its scales for each routed row.
    assert shmem["symmetric_region"] >= ipc["symmetric_region"] + 32768 * (2 * 3584 + 3584 // 32)
    # The call's gateway rows (a source's row each) and each source's forwarding count.
    assert shmem["group_plan"] == ipc["group_plan"] + 8 * 1024 * 4 + 8 * 4 and shmem["layer"] == ipc["layer"]
    with pytest.raises(megamoe.InputError, match="node_size"):
        megamoe.workspace_bytes("kimi_k3_a8w4", node_size=3, transport="nvshmem", **args)
    with pytest.raises(megamoe.InputError, match="transport"):
        megamoe.workspace_bytes("kimi_k3_a8w4", world=8, path="hopper", transport="tcp")


def _two_card_config(tmp_path):
    """Kimi-K3's config with its table as the H200's and an H100 table whose 1024 bucket reads MXFP4."""
    config = json.loads((ROOT / "configs" / "kimi_k3_a8w4.json").read_text())
    config["name"] = "two_cards"
    config["card"] = "NVIDIA H200"
    config["card_tables"] = {"NVIDIA H100 80GB HBM3": {
        "bucket_defaults": config["bucket_defaults"],
        "buckets": {"1024": {"stage1": {"token_tile": 128}, "weights": "mxfp4"}}}}
    path = tmp_path / "two_cards.json"
    path.write_text(json.dumps(config))
    assert megamoe.config_info(str(path))["bucket_tables"] == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    return str(path)


def test_a_table_per_card_sizes_the_weights_and_names_a_missing_card(tmp_path):
    path = _two_card_config(tmp_path)
    # The H200 table's 1024 bucket reads the fp8-resident copy, the H100 one's does not.
    h200 = megamoe.workspace_bytes(path, max_tokens=1024, path="hopper", experts_per_rank=112)
    h100 = megamoe.workspace_bytes(path, max_tokens=1024, path="hopper", experts_per_rank=112,
                                   bucket_table="NVIDIA H100 80GB HBM3")
    assert h200["weights"] > h100["weights"]
    assert megamoe.workspace_bytes(path, max_tokens=1024, path="hopper", experts_per_rank=112,
                                   bucket_table="default") == h200
    with pytest.raises(megamoe.Error, match="no bucket table for 'NVIDIA A100'"):
        megamoe.workspace_bytes(path, path="hopper", bucket_table="NVIDIA A100")
    with pytest.raises(megamoe.Error, match=r"NVIDIA H200 \(the default\); NVIDIA H100 80GB HBM3"):
        megamoe.precompile(path, [1024], path="hopper", bucket_table="NVIDIA A100", progress=False)
    with pytest.raises(megamoe.InputError, match="bucket_table"):
        megamoe.Layer(path, bucket_table=7)
