#!/usr/bin/env python3
"""Fails on an include that reaches up a floor: the library's folders depend only downward.

The floors, bottom first, are FLOORS below (docs/contributing.md, "Layers"). A file may include
its own folder and any folder on a lower floor; a public header (include/megamoe/NAME.hpp) sits on
the floor of the src/ folder that implements it. templates/ has floors of its own, and tools/ may
include any library header but not the device code's (it reads kernel constants through
src/common/kernel_limits.hpp; its microbenchmarks, *.cu, are device code themselves). Prints each offending include and exits 1; exits 0 when there is none.
"""
import pathlib
import re
import sys

# src/: one floor a line, bottom first; folders on one line are side by side and may not include
# each other.
FLOORS = [
    ["interface"],  # templates/interface: the argument structs and constants host and device compile
    ["common", "formats"],
    ["backend"],
    ["config"],
    ["weights"],
    ["reference", "codegen"],
    ["jit"],
    ["ep"],
    ["runtime"],
]
# The public headers, by the src/ folder that implements them.
PUBLIC = {
    "errors.hpp": "common",
    "device.hpp": "backend",
    "config.hpp": "config",
    "weights.hpp": "weights",
    "ep.hpp": "ep",
    "runtime.hpp": "runtime",
    "megamoe.hpp": "runtime",
}
# templates/: the device code's own floors.
TEMPLATE_FLOORS = [["interface"], ["prelude"], ["common"], ["hopper"], ["moe"], ["ep"]]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".cpp", ".hpp", ".h", ".cuh", ".cu")


def floor_of(folder, floors):
    for i, row in enumerate(floors):
        if folder in row:
            return i
    return None


def target_folder(path):
    """The folder an include names: megamoe/NAME.hpp maps to its implementing folder."""
    parts = path.split("/")
    if len(parts) < 2:
        return None
    if parts[0] == "megamoe":
        return PUBLIC.get(parts[1])
    return parts[0]


def check(root):
    root = pathlib.Path(root)
    problems = []

    def scan(files, own_folder_of, floors, forbidden=()):
        for f in sorted(files):
            if f.suffix not in SOURCES:
                continue
            if f.suffix == ".cu" and forbidden:
                continue  # a microbenchmark in tools/ is device code
            own = own_folder_of(f)
            own_floor = floor_of(own, floors) if own else None
            for m in INCLUDE.finditer(f.read_text(errors="replace")):
                inc = m.group(1)
                folder = target_folder(inc)
                rel = f.relative_to(root)
                if folder in forbidden:
                    problems.append(f"{rel}: includes {inc}: {forbidden[folder]}")
                    continue
                if own_floor is None or folder is None or folder == own:
                    continue
                floor = floor_of(folder, floors)
                if floor is None:
                    continue
                if floor > own_floor:
                    problems.append(f"{rel}: includes {inc}: {folder}/ is above {own}/")
                elif floor == own_floor:
                    problems.append(f"{rel}: includes {inc}: {folder}/ is beside {own}/ (one floor)")

    src = root / "src"
    scan(src.rglob("*"), lambda f: f.relative_to(src).parts[0], FLOORS)
    inc = root / "include" / "megamoe"
    scan(inc.glob("*"), lambda f: PUBLIC.get(f.name), FLOORS)
    tpl = root / "templates"
    scan(tpl.rglob("*"), lambda f: f.relative_to(tpl).parts[0], TEMPLATE_FLOORS)
    tools = root / "tools"
    device_code = "the device code's; read it through a host header (common/kernel_limits.hpp)"
    scan(tools.rglob("*"), lambda f: None, FLOORS,
         forbidden={d: device_code for d in ("interface", "prelude", "hopper", "moe")})
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) against the layers (docs/contributing.md, \"Layers\")")
        return 1
    print("layers: every include goes down a floor or stays in its folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
