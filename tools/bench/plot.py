#!/usr/bin/env python3
"""Draws megamoe-bench's JSON (--world 1) as a PNG: time per call against tokens per call on
log-log axes, with the floor of the same run and, where the bench ran with --against, the other
bucket table's times beside the config's.

Usage: python3 tools/bench/plot.py BENCH.json [--out FILE.png] [--title TEXT]
(default out: BENCH.png beside the JSON). Needs matplotlib."""
import argparse
import json
import pathlib
import sys


class BenchFileError(Exception):
    pass


def read_bench(path):
    """The bench's rows as lists, checked: bs, total_ms, floor_ms and, with --against, its times."""
    try:
        doc = json.loads(pathlib.Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BenchFileError(f"{path}: cannot read the bench's JSON ({e})")
    if doc.get("world", 1) != 1:
        raise BenchFileError(f"{path}: world {doc.get('world')}: plot.py draws megamoe-bench --world 1's JSON")
    rows = doc.get("buckets")
    if not isinstance(rows, list) or not rows:
        raise BenchFileError(f"{path}: 'buckets' is missing or empty: expected megamoe-bench --json's rows")
    need = ["bs", "total_ms", "floor_ms"] + (["against_total_ms"] if "against" in doc else [])
    for i, row in enumerate(rows):
        for field in need:
            value = row.get(field)
            if not isinstance(value, (int, float)) or value <= 0:
                raise BenchFileError(f"{path}: buckets[{i}].{field} = {value!r}, expected a positive number")
    rows = sorted(rows, key=lambda r: r["bs"])
    series = {"bs": [r["bs"] for r in rows], "total_ms": [r["total_ms"] for r in rows],
              "floor_ms": [r["floor_ms"] for r in rows]}
    if "against" in doc:
        series["against_total_ms"] = [r["against_total_ms"] for r in rows]
    return doc, series


def plot(doc, series, out, title=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=120)
    bs = series["bs"]
    ax.plot(bs, series["total_ms"], "o-", color="tab:blue", label=doc.get("config", "config"))
    if "against_total_ms" in series:
        ax.plot(bs, series["against_total_ms"], "s--", color="tab:orange", label=doc["against"])
    ax.plot(bs, series["floor_ms"], ":", color="black", label="floor (same run's ceilings)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per call")
    ax.set_ylabel("ms per call (graph replays, median)")
    ax.set_title(title or f"{doc.get('config', '?')} on {doc.get('device', '?')}, {doc.get('path', '?')} path")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    drawn = [k for k in ("total_ms", "against_total_ms", "floor_ms") if k in series]
    return drawn


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench_json")
    parser.add_argument("--out")
    parser.add_argument("--title")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out) if args.out else pathlib.Path(args.bench_json).with_suffix(".png")
    try:
        doc, series = read_bench(args.bench_json)
    except BenchFileError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 1
    drawn = plot(doc, series, out, args.title)
    print(f"wrote {out}: {len(series['bs'])} batch sizes; series {', '.join(drawn)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
