#!/usr/bin/env python3
"""Test names on stdin (Catch2's --list-test-names-only) to a spec file for `-f` on stdout: every
n-th name from the k-th (python3 tools/suite_part.py K N). Catch2 reads a comma as the end of a
spec, so a name with commas becomes a wildcard of a stretch without one (its first stretch then
"*", "*" then its last, or "*" around a middle one) that matches that name alone."""
import sys


def matches(pattern, name):  # Catch2's wildcards: at the start, the end or both; case-insensitive
    p, n = pattern.lower(), name.lower()
    if p.startswith("*") and p.endswith("*"):
        return p[1:-1] in n
    if p.startswith("*"):
        return n.endswith(p[1:])
    if p.endswith("*"):
        return n.startswith(p[:-1])
    return p == n


def spec(name, names):
    if "," not in name:
        return name
    parts = [s for s in name.split(",")]
    candidates = [parts[0] + "*", "*" + parts[-1]] + ["*" + s + "*" for s in sorted(parts, key=len, reverse=True)]
    for c in candidates:
        if c.strip("*").strip() and sum(matches(c, other) for other in names) == 1:
            return c
    sys.exit(f"suite_part.py: no wildcard without a comma matches '{name}' alone")


def main():
    k, n = int(sys.argv[1]), int(sys.argv[2])
    if not 1 <= k <= n:
        sys.exit(f"suite_part.py: part {k} of {n}: expected 1 <= part <= parts")
    names = [line.rstrip("\n") for line in sys.stdin if line.strip()]
    for name in names[k - 1::n]:
        print(spec(name, names))


if __name__ == "__main__":
    main()
