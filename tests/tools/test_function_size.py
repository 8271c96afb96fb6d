"""No function in src/ or tools/ over 120 lines or a cyclomatic complexity of 30 (docs/contributing.md,
"Standards"), measured by lizard: a function past either is split by phase."""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_LINES, MAX_CCN = 120, 30
lizard = pytest.importorskip("lizard", reason="skipped: lizard is not installed (tools/python_package.sh installs it)")


def functions_over(paths, root=ROOT):
    over = []
    for path in paths:
        for f in lizard.analyze_file(str(path)).function_list:
            if f.length > MAX_LINES or f.cyclomatic_complexity > MAX_CCN:
                over.append(f"{path.relative_to(root)}:{f.start_line}: {f.name}: {f.length} lines, "
                            f"cyclomatic {f.cyclomatic_complexity}")
    return over


def sources():
    for folder in ("src", "tools"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".cpp", ".hpp", ".h", ".py"):
                yield path


def test_no_function_in_src_or_tools_is_over_the_bounds():
    over = functions_over(sources())
    assert not over, "functions over 120 lines or cyclomatic 30:\n" + "\n".join(over)


def test_the_check_sees_a_function_over_the_bounds(tmp_path):
    branches = "".join(f"  if (x == {i}) return {i};\n" for i in range(MAX_CCN + 1))
    (tmp_path / "big.cpp").write_text("int big(int x) {\n" + branches + "  return -1;\n}\n")
    long_body = "".join(f"  y += {i};\n" for i in range(MAX_LINES + 1))
    (tmp_path / "long.cpp").write_text("int long_one(int y) {\n" + long_body + "  return y;\n}\n")
    (tmp_path / "small.cpp").write_text("int small(int x) { return x ? 1 : 2; }\n")
    over = functions_over(sorted(tmp_path.glob("*.cpp")), tmp_path)
    assert len(over) == 2
    assert over[0].startswith("big.cpp:1: big: ") and over[1].startswith("long.cpp:1: long_one: ")
