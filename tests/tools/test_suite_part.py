"""tools/suite_part.py: the GPU suite's cases in parts for calls of bounded length; every name in
exactly one part, each spec free of commas and matching its own name alone."""

import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "tools" / "suite_part.py"
NAMES = ["Kimi-K3 shape, 256-row weight tiles", "256-row weight tiles give the 128-row kernels' bits: Kimi-K3",
         "generic_a8w4", "forward refuses bad arguments, naming them", "uneven routings: one expert, no tokens",
         "Kimi-K3 shape, silu", "Kimi-K3 shape, swiglu (limit 7)"]


def part(k, n, names=NAMES):
    run = subprocess.run([sys.executable, str(SCRIPT), str(k), str(n)], input="\n".join(names) + "\n",
                         capture_output=True, text=True)
    return run.returncode, run.stdout.split("\n")[:-1], run.stderr


def test_every_name_in_one_part_with_a_spec_of_its_own():
    specs = []
    for k in (1, 2, 3):
        rc, out, _ = part(k, 3)
        assert rc == 0
        specs += out
    assert len(specs) == len(NAMES)
    assert all("," not in s for s in specs)
    sys.path.insert(0, str(SCRIPT.parent))
    import suite_part
    for s in specs:
        assert sum(suite_part.matches(s, n) for n in NAMES) == 1, s


def test_a_part_out_of_range_is_refused():
    rc, _, err = part(4, 3)
    assert rc != 0 and "part 4 of 3" in err
