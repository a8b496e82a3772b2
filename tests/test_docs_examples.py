"""Every ```python block of README.md and docs/*.md runs as written in a fresh interpreter.

Blocks are found automatically, so a new example in the README or in docs/ is covered without
editing this file. A block must be self-contained (small sizes; any data it needs is generated
inside it). A block preceded by the line ``<!-- slow -->`` is marked ``slow``.
"""
import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
TIMEOUT_S = 300


def _blocks():
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    out = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[:m.start()].rstrip().rsplit("\n", 1)[-1].strip()
            marks = [pytest.mark.slow] if before == "<!-- slow -->" else []
            name = f"{os.path.relpath(path, ROOT)}:{line}"
            out.append(pytest.param(m.group(1), id=name, marks=marks))
    return out


BLOCKS = _blocks()


def test_the_readme_has_python_examples():
    assert sum(p.id.startswith("README.md:") for p in BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS)
def test_docs_example_runs(code, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"example failed:\n{code}\n--- stderr ---\n{proc.stderr[-4000:]}"
