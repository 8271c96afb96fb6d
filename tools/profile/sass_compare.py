#!/usr/bin/env python3
"""Compares the SASS of two kernel caches kernel by kernel (e.g. before and after a refactor).

For each kernel name found in both (the entry folder's name less its hash; --rename OLD=NEW maps
renamed families), prints whether the instruction text is identical and, where not, the
instruction counts, the opcode counts that differ, and the registers and stack frame of each.
Needs cuobjdump (and nvdisasm) on PATH.

usage: sass_compare.py CACHE_A/v1 CACHE_B/v1 [--rename stage1_wgmma=stage1_hopper ...]
"""
import collections
import os
import re
import subprocess
import sys


def kernels(root):
    out = {}
    for entry in os.listdir(root):
        if entry.startswith("megamoe_") and os.path.exists(os.path.join(root, entry, "kernel.cubin")):
            out[entry.rsplit("_", 1)[0]] = os.path.join(root, entry, "kernel.cubin")
    return out


def sass(cubin):
    text = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True, check=True).stdout
    return [m.group(1).strip() for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+([^;]*;)", text)]


def resources(cubin):
    text = subprocess.run(["cuobjdump", "-res-usage", cubin], capture_output=True, text=True, check=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def opcodes(instrs):
    return collections.Counter(i.split()[0] if not i.startswith("@") else i.split()[1] for i in instrs)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--rename")]
    renames = [tuple(v.split("=", 1)) for a, v in zip(argv[1:], argv[2:]) if a == "--rename"]
    args = [a for a in args if "=" not in a]
    if len(args) != 2:
        print(__doc__)
        return 2
    a, b = kernels(args[0]), kernels(args[1])
    identical = 0
    for name in sorted(a):
        other = name
        for old, new in renames:
            other = other.replace(old, new)
        if other not in b:
            print(f"{name}: not in the second cache")
            continue
        ia, ib = sass(a[name]), sass(b[other])
        if ia == ib:
            identical += 1
            continue
        ra, rb = resources(a[name]), resources(b[other])
        ca, cb = opcodes(ia), opcodes(ib)
        delta = {op: cb[op] - ca[op] for op in set(ca) | set(cb) if cb[op] != ca[op]}
        print(f"{name}: {len(ia)} -> {len(ib)} instructions, regs {ra[0]} -> {rb[0]}, stack {ra[1]} -> {rb[1]}; "
              f"opcodes changed: {dict(sorted(delta.items())) or 'none (order and registers only)'}")
    print(f"{identical} of {len(a)} kernels identical")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
