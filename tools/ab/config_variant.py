#!/usr/bin/env python3
"""Writes a variant of a built-in config with some buckets' fields changed, for timing beside the
shipped one (megamoe-bench --config build/variants/NAME.json) and checking it (megamoe-run
--config ... --check) before a change to configs/ is made.

Usage: python3 tools/ab/config_variant.py [--card CARD] BASE NAME BUCKET.FIELD=VALUE ...
  e.g. python3 tools/ab/config_variant.py kimi_k3_a8w4 kimi_s2t48 256.stage2.token_tile=48
Writes build/variants/NAME.json (the file's name and its `name` field agree, as configs must).
The edits go to BASE's default table, or with --card to the table BASE holds for CARD (the GPU's
name as the driver gives it: "NVIDIA H100 80GB HBM3"); the variant holds that table alone, so
that every card runs the edited table.
"""
import json
import pathlib
import sys


def main(argv):
    args = argv[1:]
    card = None
    if args[:1] == ["--card"] and len(args) > 1:
        card, args = args[1], args[2:]
    if len(args) < 3 or any("=" not in a for a in args[2:]):
        sys.exit(__doc__.strip())
    root = pathlib.Path(__file__).resolve().parents[2]
    base, name, edits = args[0], args[1], args[2:]
    config = json.loads((root / "configs" / f"{base}.json").read_text())
    config["name"] = name
    tables = config.pop("card_tables", {})
    if card is not None and card != config.get("card"):  # else the default is that card's
        if card not in tables:
            cards = [f"{config['card']} (the default)"] if "card" in config else []
            sys.exit(f"config_variant: --card {card!r}: {base} holds no table for it "
                     f"(its cards: {', '.join(cards + list(tables)) or 'none named'})")
        config.update(tables[card])
    config.pop("card", None)  # the variant's one table runs on every card
    for edit in edits:
        path, value = edit.split("=", 1)
        bucket, *fields = path.split(".")
        if bucket not in config["buckets"] or not fields:
            sys.exit(f"config_variant: {path}: expected BUCKET.FIELD with BUCKET one of {', '.join(config['buckets'])}")
        node = config["buckets"][bucket]
        for field in fields[:-1]:
            node = node.setdefault(field, {})
        node[fields[-1]] = json.loads(value)
    out = root / "build" / "variants" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(config, indent=1) + "\n")
    print(out)


if __name__ == "__main__":
    main(sys.argv)
