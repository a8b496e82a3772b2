"""Every ```python block of README.md and docs/*.md runs as written.

Blocks are found automatically, so a new example in the README or in docs/ is covered without
editing this file. A block must be self-contained (small sizes; any data it needs is generated
inside it). A block preceded by the line ``<!-- slow -->`` is marked ``slow`` and runs in an
interpreter of its own. The other blocks, of every file, run in order in one fresh interpreter
(importing JAX and compiling the shared programs once instead of once per file or block), each
with a fresh ``__main__`` namespace and its own empty working directory; a block that touches
global state (``jax.config``, ``os.environ``) gets an interpreter of its own too.
"""
import functools
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

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
            slow = before == "<!-- slow -->"
            name = f"{os.path.relpath(path, ROOT)}:{line}"
            out.append(pytest.param(m.group(1), name, slow, id=name,
                                    marks=[pytest.mark.slow] if slow else []))
    return out


BLOCKS = _blocks()
GLOBAL_STATE = ("jax.config", "os.environ")

# Runs the blocks given as a JSON list of [name, code] in order, each in a fresh namespace and
# an empty directory of its own, and prints one JSON line {name: traceback or null}.
RUNNER = r"""
import json, os, sys, tempfile, traceback
blocks = json.load(open(sys.argv[1]))
out = {}
for name, code in blocks:
    os.chdir(tempfile.mkdtemp(prefix="docblock-"))
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__"})
        out[name] = None
    except BaseException:
        out[name] = traceback.format_exc()[-4000:]
print("DOCBLOCKS " + json.dumps(out))
"""


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [ROOT, os.environ.get("PYTHONPATH")])))


def _alone(code: str, slow: bool) -> bool:
    return slow or any(g in code for g in GLOBAL_STATE)


@functools.lru_cache(maxsize=None)
def _shared_run(selected: frozenset) -> dict:
    """{block name: traceback or None} for the shared blocks among ``selected``, run once."""
    blocks = [[p.values[1], p.values[0]] for p in BLOCKS
              if p.values[1] in selected and not _alone(p.values[0], p.values[2])]
    tmp = tempfile.mkdtemp(prefix="docblocks-")
    spec = os.path.join(tmp, "blocks.json")
    with open(spec, "w") as f:
        json.dump(blocks, f)
    proc = subprocess.run([sys.executable, "-c", RUNNER, spec], cwd=tmp, env=_env(),
                          capture_output=True, text=True, timeout=TIMEOUT_S * len(blocks))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("DOCBLOCKS ")]
    if proc.returncode != 0 or not lines:
        return {name: f"interpreter exited {proc.returncode}:\n{proc.stderr[-4000:]}"
                for name, _ in blocks}
    return json.loads(lines[-1][len("DOCBLOCKS "):])


def test_the_readme_has_python_examples():
    assert sum(p.id.startswith("README.md:") for p in BLOCKS) >= 2


@pytest.fixture(scope="module")
def selected_blocks(request):
    """Names of the blocks this session runs (the shared interpreter runs exactly those)."""
    return frozenset(item.callspec.params["name"] for item in request.session.items
                     if item.originalname == "test_docs_example_runs")


@pytest.mark.parametrize("code,name,slow", BLOCKS)
def test_docs_example_runs(code, name, slow, tmp_path, selected_blocks):
    if _alone(code, slow):
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(),
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        assert proc.returncode == 0, f"example failed:\n{code}\n--- stderr ---\n{proc.stderr[-4000:]}"
        return
    err = _shared_run(selected_blocks)[name]
    assert err is None, f"example failed:\n{code}\n--- traceback ---\n{err}"
