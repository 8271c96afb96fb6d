#!/usr/bin/env python3
"""Counts a stretch of SASS (the text `cuobjdump -sass` prints for a cubin) by opcode, with the
stall cycles that ptxas wrote into each instruction's control bits: the least number of cycles
before the same warp may issue its next instruction. Their sum over a loop is what its static
schedule costs a warp per iteration; scoreboard waits (shared-memory loads, wgmma, barriers) come
on top and are not counted. Control bits as on sm_70 and later: the second 64-bit word's bits 41
to 44 hold the stall count.

Usage: sass_stalls.py FILE.sass [--from ADDR --to ADDR]   (addresses as printed, e.g. 0x12b0)
       sass_stalls.py --self-test
cuobjdump is not in the CUDA toolkit of this project's CPU machine: `pip download
nvidia-cuda-cuobjdump --no-deps` and unzip the wheel gives one (bin/cuobjdump)."""
import re
import sys
from collections import Counter

LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;\s*/\* (0x[0-9a-f]{16}) \*/")
WORD = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")


def instructions(text):
    """(address, opcode, stall cycles) of each instruction: an instruction line, then the line
    with its second word."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = LINE.match(line)
        if not m or i + 1 >= len(lines):
            continue
        second = WORD.match(lines[i + 1])
        if not second:
            continue
        asm = re.sub(r"^@!?U?P\w+\s+", "", m.group(2))  # the predicate is not the opcode
        opcode = asm.split()[0].split(".")[0]
        stall = (int(second.group(1), 16) >> 41) & 0xF
        out.append((int(m.group(1), 16), opcode, stall))
    return out


def summarise(insts, lo=0, hi=None):
    count, stalls = Counter(), Counter()
    for addr, opcode, stall in insts:
        if addr < lo or (hi is not None and addr > hi):
            continue
        count[opcode] += 1
        stalls[opcode] += stall
    return count, stalls


def report(count, stalls):
    print(f"{sum(count.values())} instructions, {sum(stalls.values())} stall cycles")
    for opcode, n in count.most_common():
        print(f"  {opcode:10s} {n:5d} instructions {stalls[opcode]:6d} cycles ({stalls[opcode] / n:.1f} each)")


SAMPLE = """\
        /*0100*/                   LOP3.LUT R5, R4, 0x77777777, RZ, 0xc0, !PT ;   /* 0x7777777704057812 */
                                                                                  /* 0x004fc400078ec0ff */
        /*0110*/                   PRMT R6, R2, R5, R3 ;                          /* 0x0000000502067216 */
                                                                                  /* 0x000fe40000000003 */
        /*0120*/              @!P0 FFMA R7, R6, R6, R7 ;                          /* 0x0000000606078223 */
                                                                                  /* 0x000fe20000000007 */
"""


def self_test():
    insts = instructions(SAMPLE)
    assert [(a, o) for a, o, _ in insts] == [(0x100, "LOP3"), (0x110, "PRMT"), (0x120, "FFMA")], insts
    assert [s for _, _, s in insts] == [2, 2, 1], insts  # 0x004fc4: stall 2; 0x000fe4: 2; 0x000fe2: 1
    count, stalls = summarise(insts, 0x110, 0x120)
    assert count == Counter({"PRMT": 1, "FFMA": 1}) and sum(stalls.values()) == 3, (count, stalls)
    print("sass_stalls.py: self-test passed")


def main(argv):
    if argv == ["--self-test"]:
        self_test()
        return 0
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    opts = dict(zip(argv[1::2], argv[2::2]))
    unknown = set(opts) - {"--from", "--to"}
    if unknown or len(argv[1:]) % 2:
        print(f"sass_stalls.py: unexpected arguments {argv[1:]}; expected --from ADDR --to ADDR", file=sys.stderr)
        return 2
    lo = int(opts.get("--from", "0"), 0)
    hi = int(opts["--to"], 0) if "--to" in opts else None
    with open(argv[0]) as f:
        insts = instructions(f.read())
    if not insts:
        print(f"sass_stalls.py: no instructions in {argv[0]} (expected `cuobjdump -sass` output)", file=sys.stderr)
        return 1
    report(*summarise(insts, lo, hi))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
