"""tools/bench/plot.py: a PNG of megamoe-bench's JSON (the config, --against, the floor), and
errors that name what is wrong with the file."""

import importlib.util
import json
import pathlib
import struct

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytest.importorskip("matplotlib", reason="skipped: plot.py needs matplotlib, which is not installed")


def load_plot():
    spec = importlib.util.spec_from_file_location("bench_plot", ROOT / "tools" / "bench" / "plot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_doc(against=True):
    # Rows out of order on purpose: the plot sorts them by bs.
    rows = [{"bs": bs, "total_ms": t, "floor_ms": f} for bs, t, f in ((1024, 1.5, 0.9), (1, 0.1, 0.07), (8, 0.4, 0.35))]
    doc = {"config": "kimi_k3_a8w4", "device": "NVIDIA H200", "path": "hopper", "world": 1, "buckets": rows}
    if against:
        doc["against"] = "kimi_k3_a8w4_with_generic_a8w4_buckets"
        for r in rows:
            r["against_total_ms"] = r["total_ms"] * 1.1
    return doc


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_draws_the_config_the_against_table_and_the_floor(tmp_path, capsys):
    plot = load_plot()
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(bench_doc()))
    assert plot.main([str(src)]) == 0
    out = capsys.readouterr().out
    assert "3 batch sizes; series total_ms, against_total_ms, floor_ms" in out
    assert png_size(tmp_path / "bench.png") == (900, 600)
    _, series = plot.read_bench(src)
    assert series["bs"] == [1, 8, 1024]
    assert series["total_ms"] == [0.1, 0.4, 1.5]
    assert series["against_total_ms"] == pytest.approx([0.11, 0.44, 1.65])


def test_without_against_two_series_and_a_named_output(tmp_path, capsys):
    plot = load_plot()
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(bench_doc(against=False)))
    assert plot.main([str(src), "--out", str(tmp_path / "picture.png"), "--title", "t"]) == 0
    assert "series total_ms, floor_ms" in capsys.readouterr().out
    assert png_size(tmp_path / "picture.png") == (900, 600)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(world=4), "world 4: plot.py draws megamoe-bench --world 1's JSON"),
    (lambda d: d.pop("buckets"), "'buckets' is missing or empty"),
    (lambda d: d["buckets"][1].pop("floor_ms"), "buckets[1].floor_ms = None, expected a positive number"),
    (lambda d: d["buckets"][2].update(against_total_ms=0), "buckets[2].against_total_ms = 0"),
])
def test_a_bad_file_is_named_and_nothing_is_drawn(tmp_path, capsys, edit, message):
    plot = load_plot()
    doc = bench_doc()
    edit(doc)
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(doc))
    assert plot.main([str(src)]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "bench.png").exists()
