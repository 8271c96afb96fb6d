#!/usr/bin/env python3
"""Summarises an Nsight Compute source page (`ncu -i REPORT --page source --csv --print-source
sass`) of one kernel by region: the SASS is cut at every SETMAXREG and EXIT, so a warp-specialised
kernel falls apart into its roles (consumers' main loop and stash, producer, storers). Per region:
its share of the stall samples, the top stall reasons, warp instructions executed, and the
instruction kinds that name it (QGMMA: wgmma; UBLKCP: bulk copies; MUFU: the activation; STG:
global stores), and where its samples sit by instruction class (CLASSES: a warp waiting on an
mbarrier for its stage's data or its buffer, wgmma, the integer pipe that does the MXFP4
conversion and the addresses, the float pipe that does the promotion and the activation, memory
instructions, the uniform datapath and branches). Then the hottest instructions.
Usage: ncu_source_regions.py SOURCE.csv [--top N]"""
import csv
import sys
from collections import Counter

MARKS = ("QGMMA", "UBLKCP", "MUFU", "F2FP", "STG", "SYNCS.ARRIVE")
CLASSES = ("wait", "wgmma", "int", "float", "mem", "ctl")
INT_OPS = {"LOP3", "PRMT", "IMAD", "SHF", "IADD3", "VIADD", "LEA", "ISETP", "SEL", "MOV", "IMNMX", "VIMNMX",
           "I2F", "I2FP", "F2I", "IABS", "POPC", "FLO", "BREV", "PLOP3", "P2R", "R2P", "SGXT", "BMSK", "IADD"}
FLOAT_OPS = {"FFMA", "FMUL", "FADD", "FMNMX", "FSETP", "FSEL", "FCHK", "FRND", "MUFU", "F2FP", "F2F", "HFMA2",
             "HADD2", "HMUL2", "HMNMX2", "FSWZADD", "DADD", "DMUL", "DFMA"}
MEM_OPS = {"LDS", "LDSM", "LDG", "LDC", "LD", "LDL", "STS", "STG", "ST", "STL", "STSM", "ATOM", "ATOMS", "ATOMG", "RED",
           "REDUX", "UBLKCP", "UBLKRED", "UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "SYNCS", "ULDC", "CCTL", "MEMBAR",
           "FENCE", "LDGSTS", "LDGDEPBAR"}


def opcode(src):
    """The opcode of a SASS line, its guard predicate dropped (`@!P0 BRA ...` -> `BRA`)."""
    words = src.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def classify(insts):
    """Each instruction's class: a TRYWAIT on an mbarrier and the branch that loops back on it
    (within the next two instructions) are "wait"; the rest by opcode."""
    out = []
    for n, ins in enumerate(insts):
        op = opcode(ins["src"])
        base = op.split(".")[0]
        waits = any("TRYWAIT" in opcode(insts[m]["src"]) for m in range(max(0, n - 2), n))
        if "TRYWAIT" in op or (base == "BRA" and waits):
            out.append("wait")
        elif base in ("QGMMA", "HGMMA", "IGMMA", "WARPGROUP"):
            out.append("wgmma")
        elif base in INT_OPS:
            out.append("int")
        elif base in FLOAT_OPS:
            out.append("float")
        elif base in MEM_OPS:
            out.append("mem")
        else:
            out.append("ctl")
    return out


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    kernel = rows[0][1] if rows and len(rows[0]) > 1 else "?"
    header = rows[1]
    col = {h: i for i, h in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    insts = []
    for r in rows[2:]:
        if len(r) < len(header):
            continue
        num = lambda name: int(r[col[name]] or 0)
        insts.append({
            "src": r[col["Source"]].strip(),
            "samples": num("Warp Stall Sampling (All Samples)"),
            "executed": num("Instructions Executed"),
            "stalls": {s[len("stall_"):]: num(s) for s in stalls},
        })
    return kernel, insts


def regions(insts):
    start = 0
    for i, ins in enumerate(insts):
        name = opcode(ins["src"])
        if "SETMAXREG" in name or name == "EXIT":
            if i > start:
                yield start, i
            start = i
    if start < len(insts):
        yield start, len(insts)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 12
    kernel, insts = load(sys.argv[1])
    total = sum(i["samples"] for i in insts) or 1
    kinds = classify(insts)
    print(f"{kernel}: {len(insts)} SASS instructions, {total} stall samples")
    print(f"{'region':>13} {'samples':>8} {'share':>6} {'warp insts':>12}  marks; top stall reasons; by class")
    for a, b in regions(insts):
        part = insts[a:b]
        samples = sum(i["samples"] for i in part)
        if samples * 200 < total:  # under 0.5%: not worth a line
            continue
        reasons = Counter()
        for i in part:
            reasons.update(i["stalls"])
        marks = sorted({m for i in part for m in MARKS if m in i["src"]})
        executed = sum(i["executed"] for i in part)
        why = ", ".join(f"{k} {100 * v / samples:.0f}%" for k, v in reasons.most_common(4) if v)
        by_class = Counter()
        for n in range(a, b):
            by_class[kinds[n]] += insts[n]["samples"]
        where = " ".join(f"{c} {100 * by_class[c] / samples:.0f}%" for c in CLASSES if by_class[c])
        print(f"{a:>6}-{b:<6} {samples:>8} {100 * samples / total:>5.1f}% {executed:>12}  {' '.join(marks) or '-'}; {why}; "
              f"{where}")
    print(f"hottest {top} instructions:")
    for n, i in sorted(enumerate(insts), key=lambda x: -x[1]["samples"])[:top]:
        reason = max(i["stalls"].items(), key=lambda kv: kv[1])[0] if i["stalls"] else "-"
        print(f"{n:>6} {100 * i['samples'] / total:>5.1f}% {reason:>16}  {i['src'][:70]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
