#!/usr/bin/env python3
"""Checks that the module graph declared in CMakeLists.txt is the one the sources use.

A module is a folder src/<m>/ built by `rapid_module(<m> deps...)`. Fails (exit 1) when
  - a file in src/<m>/ includes a header of another module that <m> does not list among its
    deps (a module uses only what it declares), or a folder of src/ that is not a module;
  - <m> lists a module it never includes (declarations stay as narrow as the code);
  - the declared graph has a cycle;
  - tests/<m>_*.cpp includes a module outside what its test executable links: <m>, the modules
    <m> reaches through its deps, and set(RAPID_TEST_EXTRA_<m> ...).
The graph is read from CMakeLists.txt, never written here a second time.
usage: scripts/check_module_deps.py [source dir]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
cmake = re.sub(r"#[^\n]*", "", (root / "CMakeLists.txt").read_text())

deps = {}
for m, args in re.findall(r"^\s*rapid_module\(\s*(\w+)([^)]*)\)", cmake, re.M):
    deps[m] = {a[len("rapid_"):] for a in args.split() if a.startswith("rapid_")}
extra = {m: {a[len("rapid_"):] for a in args.split() if a.startswith("rapid_")}
         for m, args in re.findall(r"set\(\s*RAPID_TEST_EXTRA_(\w+)([^)]*)\)", cmake)}
if not deps:
    sys.exit("check_module_deps: no rapid_module(...) declarations found in CMakeLists.txt")

include = re.compile(r'^\s*#\s*include\s+"([a-z0-9_]+)/', re.M)
src_dirs = {p.name for p in (root / "src").iterdir() if p.is_dir()}
errors = []


def includes(path):
    return set(include.findall(path.read_text(errors="replace")))


def reach(m, seen=None):
    seen = set() if seen is None else seen
    for d in deps.get(m, ()):
        if d not in seen:
            seen.add(d)
            reach(d, seen)
    return seen


def cycle_from(m, stack):
    for d in sorted(deps.get(m, ())):
        if d in stack:
            return stack[stack.index(d):] + [d]
        found = cycle_from(d, stack + [d])
        if found:
            return found
    return None


for m in sorted(deps):
    unknown = deps[m] - deps.keys()
    if unknown:
        errors.append(f"CMakeLists.txt: {m} depends on undeclared modules {sorted(unknown)}")
    cyc = cycle_from(m, [m])
    if cyc:
        errors.append("CMakeLists.txt: dependency cycle " + " -> ".join(cyc))
        break

for m in sorted(deps):
    used = set()
    for f in sorted((root / "src" / m).rglob("*")):
        if f.suffix not in (".h", ".hpp", ".cpp", ".cc"):
            continue
        for inc in includes(f) & src_dirs - {m}:
            used.add(inc)
            if inc not in deps:
                errors.append(f"{f.relative_to(root)}: includes {inc}/, which is not a module")
            elif inc not in deps[m]:
                errors.append(f"{f.relative_to(root)}: includes {inc}/ but {m} does not declare rapid_{inc}")
    for d in sorted(deps[m] - used):
        errors.append(f"CMakeLists.txt: {m} declares rapid_{d} but src/{m}/ includes nothing of it")

for f in sorted((root / "tests").glob("*_test.cpp")):
    m = re.match(r"[a-z]+", f.name).group(0)
    if m not in deps:
        continue  # links every module
    allowed = {m} | reach(m) | extra.get(m, set())
    for e in extra.get(m, set()):
        allowed |= reach(e)
    for inc in sorted(includes(f) & src_dirs - allowed):
        errors.append(f"{f.relative_to(root)}: includes {inc}/, outside what the {m} tests link")

for e in errors:
    print(e)
print(f"check_module_deps: {len(deps)} modules, {len(errors)} problem(s)")
sys.exit(1 if errors else 0)
