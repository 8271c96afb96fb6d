"""tools/lint/check_layers.py: the library's folders depend only downward. The repository passes,
and a tree with an include up a floor, beside it, or from a tool into the device code fails."""

import importlib.util
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "lint" / "check_layers.py"


def load():
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(root, path, *includes):
    f = root / path
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("".join(f'#include "{i}"\n' for i in includes) + "int x;\n")


def test_the_repository_has_no_include_against_the_layers():
    run = subprocess.run([sys.executable, str(SCRIPT), str(ROOT)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_src_folder_has_a_floor():
    layers = load()
    floored = {f for row in layers.FLOORS for f in row}
    folders = {p.name for p in (ROOT / "src").iterdir() if p.is_dir()}
    assert folders <= floored, f"folders of src/ with no floor in check_layers.FLOORS: {sorted(folders - floored)}"
    assert set(layers.PUBLIC) == {p.name for p in (ROOT / "include" / "megamoe").glob("*.hpp")}


def test_an_include_up_a_floor_is_reported(tmp_path):
    layers = load()
    write(tmp_path, "src/weights/a.cpp", "weights/b.hpp", "config/c.hpp", "codegen/kernel_specs.hpp")
    write(tmp_path, "src/config/d.cpp", "megamoe/runtime.hpp", "megamoe/errors.hpp")
    got = layers.check(tmp_path)
    assert got == [
        "src/config/d.cpp: includes megamoe/runtime.hpp: runtime/ is above config/",
        "src/weights/a.cpp: includes codegen/kernel_specs.hpp: codegen/ is above weights/",
    ]


def test_an_include_beside_on_one_floor_and_a_public_header_reaching_up_are_reported(tmp_path):
    layers = load()
    write(tmp_path, "src/common/a.hpp", "formats/formats.hpp")
    write(tmp_path, "include/megamoe/weights.hpp", "megamoe/config.hpp", "megamoe/ep.hpp")
    got = layers.check(tmp_path)
    assert "src/common/a.hpp: includes formats/formats.hpp: formats/ is beside common/ (one floor)" in got
    assert "include/megamoe/weights.hpp: includes megamoe/ep.hpp: ep/ is above weights/" in got
    assert len(got) == 2


def test_a_tool_reading_the_device_code_is_reported_but_not_a_microbenchmark(tmp_path):
    layers = load()
    write(tmp_path, "tools/run/main.cpp", "interface/kernel_constants.cuh", "common/kernel_limits.hpp")
    write(tmp_path, "tools/profile/rate.cu", "hopper/wgmma.cuh")
    write(tmp_path, "templates/common/n.cuh", "moe/route.cuh")
    got = layers.check(tmp_path)
    assert len(got) == 2
    assert got[0].startswith("templates/common/n.cuh: includes moe/route.cuh: moe/ is above common/")
    assert got[1].startswith("tools/run/main.cpp: includes interface/kernel_constants.cuh: the device code's")
