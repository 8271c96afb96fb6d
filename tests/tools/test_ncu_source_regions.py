"""tools/profile/ncu_source_regions.py: an Nsight Compute source page cut into the kernel's roles
at SETMAXREG and EXIT, each region's samples counted by instruction class (a wait on an mbarrier
with the branch that loops on it, wgmma, integer, float, memory, the rest)."""

import csv
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "tools" / "profile" / "ncu_source_regions.py"
HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "Instructions Executed", "stall_long_sb", "stall_wait"]
# (source, samples): a consumer region (a data wait, a wgmma, the conversion, a promotion), then a
# storer region after SETMAXREG (its wait and a store)
LINES = [("USETMAXREG.TRY_ALLOC.CTAPOOL P1, 0xe8", 0),
         ("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR12], R10", 10),
         ("@!P0  BRA 0x7f56db7c7010", 30),
         ("LOP3.LUT R70, R70, 0x80808080, R69, 0xf8, !PT", 20),
         ("PRMT R79, R80, R17, R79", 10),
         ("QGMMA.64x48x32.F32.E4M3.E4M3 R24, R64, gdesc[UR16], R24", 15),
         ("WARPGROUP.DEPBAR.LE gsb0, 0x1", 5),
         ("FFMA R24, R11, R24, R6", 8),
         ("LDS.128 R4, [R5+0x20800]", 2),
         ("UIADD3 UR7, UR9, UR7, UR8", 0),
         ("USETMAXREG.DEALLOC 0x28", 0),
         ("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R3+URZ], R2", 5),
         ("@!P0  BRA 0x7f70fb7f3150", 55),
         ("STG.E.64 desc[UR32][R2.64], R4", 40)]


def write_page(path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "megamoe_stage2_hopper_test"])
        w.writerow(HEADER)
        for i, (src, samples) in enumerate(LINES):
            w.writerow([hex(16 * i), src, samples, 0, 100, samples // 2, samples - samples // 2])


def test_regions_and_classes(tmp_path):
    page = tmp_path / "source.csv"
    write_page(page)
    run = subprocess.run([sys.executable, str(SCRIPT), str(page), "--top", "2"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    assert out[0].startswith("megamoe_stage2_hopper_test: 14 SASS instructions, 200 stall samples")
    consumers = next(line for line in out if line.strip().startswith("0-10"))
    storers = next(line for line in out if line.strip().startswith("10-14"))
    # 100 samples: wait 40 (the TRYWAIT and its branch), int 30, wgmma 20, float 8, mem 2
    assert "wait 40% wgmma 20% int 30% float 8% mem 2%" in consumers, consumers
    assert " 50.0% " in consumers  # 100 of the 200 samples
    assert "wait 60% mem 40%" in storers, storers


def test_classify_keeps_a_plain_branch_out_of_the_waits():
    sys.path.insert(0, str(SCRIPT.parent))
    import ncu_source_regions as tool
    insts = [{"src": s, "samples": 1, "executed": 1, "stalls": {}} for s in
             ("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR12], R10", "@!P0  BRA 0x10", "IMAD R2, R3, R4, RZ",
              "ISETP.NE.AND P0, PT, R4, RZ, PT", "NOP", "@P0 BRA 0x20", "MUFU.EX2 R1, R2", "UBLKCP.S.G [UR10], [UR8], UR4")]
    assert tool.classify(insts) == ["wait", "wait", "int", "int", "ctl", "ctl", "float", "mem"]
