"""scripts/check_module_deps.py (the `module_deps` ctest) on small source trees: it must pass on a
graph that points down and name each way a tree can break it, else the ctest could never fail."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_module_deps.py"

CMAKE = """
rapid_module(base    nlohmann_json::nlohmann_json)
rapid_module(mid     rapid_base)
rapid_module(top     rapid_mid   # a comment naming rapid_base is not a declaration
                     PkgConfig::X)
set(RAPID_TEST_EXTRA_base rapid_mid)
"""


def tree(tmp_path, files, cmake=CMAKE):
    (tmp_path / "CMakeLists.txt").write_text(cmake)
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


GOOD = {
    "src/base/b.h": "#pragma once\n",
    "src/base/b.cpp": '#include "base/b.h"\n',
    "src/mid/m.h": '#pragma once\n#include "base/b.h"\n',
    "src/top/t.cpp": '#include "mid/m.h"\n#include <vector>\n',
    "src/cli/main.cpp": '#include "top/t.h"\n#include "base/b.h"\n',  # not a module: not checked
    "tests/top_test.cpp": '#include "base/b.h"\n',  # reached through top's deps
    "tests/base_test.cpp": '#include "mid/m.h"\n',  # RAPID_TEST_EXTRA_base
}


def run(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def test_a_graph_pointing_down_passes(tmp_path):
    r = run(tree(tmp_path, GOOD))
    assert r.returncode == 0, r.stdout
    assert "3 modules, 0 problem(s)" in r.stdout


def test_the_repository_passes():
    r = run(ROOT)
    assert r.returncode == 0, r.stdout


def test_an_upward_include_fails(tmp_path):
    r = run(tree(tmp_path, {**GOOD, "src/base/up.cpp": '#include "mid/m.h"\n'}))
    assert r.returncode == 1
    assert "src/base/up.cpp: includes mid/ but base does not declare rapid_mid" in r.stdout


def test_a_skipped_level_must_be_declared(tmp_path):
    # top reaches base through mid, but includes it directly: that edge must be declared too.
    r = run(tree(tmp_path, {**GOOD, "src/top/t.h": '#include "base/b.h"\n'}))
    assert r.returncode == 1
    assert "src/top/t.h: includes base/ but top does not declare rapid_base" in r.stdout


def test_including_a_folder_that_is_not_a_module_fails(tmp_path):
    r = run(tree(tmp_path, {**GOOD, "src/mid/m.cpp": '#include "cli/main.h"\n'}))
    assert r.returncode == 1
    assert "src/mid/m.cpp: includes cli/, which is not a module" in r.stdout


def test_an_unused_declaration_fails(tmp_path):
    files = {k: v for k, v in GOOD.items() if k != "src/top/t.cpp"}
    r = run(tree(tmp_path, files))
    assert r.returncode == 1
    assert "top declares rapid_mid but src/top/ includes nothing of it" in r.stdout


def test_a_cycle_fails(tmp_path):
    cmake = CMAKE.replace("rapid_module(base    nlohmann_json::nlohmann_json)", "rapid_module(base rapid_top)")
    r = run(tree(tmp_path, {**GOOD, "src/base/c.cpp": '#include "top/t.h"\n'}, cmake))
    assert r.returncode == 1
    assert "dependency cycle" in r.stdout


def test_a_test_reaching_past_its_link_fails(tmp_path):
    r = run(tree(tmp_path, {**GOOD, "tests/mid_test.cpp": '#include "top/t.h"\n'}))
    assert r.returncode == 1
    assert "tests/mid_test.cpp: includes top/, outside what the mid tests link" in r.stdout
