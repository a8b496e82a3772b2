"""Which sources produced a committed NTK run: the SHA-256 over the modules that compute it.

:func:`source_digest` hashes, in sorted order, the path and bytes of every computing module of
``ntk`` (all of ``ntk/*.py`` except the presentation modules in :data:`PRESENTATION`) and of
the posjax modules the checks read (``posjax/data/synthetic.py``, ``posjax/geometry``). The
committed ``docs/ntk_run/ntk_checks.json`` stores it, and a test fails when the sources no
longer match: the run must then be redone (``python -m ntk --quick --out docs/ntk_run``) and
the docs regenerated (``python -m ntk.docs``).
"""
from __future__ import annotations

import hashlib
import pathlib

__all__ = ["source_digest", "source_files", "PRESENTATION"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
PRESENTATION = ("ntk/__main__.py", "ntk/report.py", "ntk/docs.py", "ntk/provenance.py")


def source_files() -> list[pathlib.Path]:
    """The files :func:`source_digest` covers, sorted by their path from the repository root."""
    files = [p for p in (ROOT / "ntk").glob("*.py")
             if p.relative_to(ROOT).as_posix() not in PRESENTATION]
    files += [ROOT / "posjax" / "data" / "synthetic.py"]
    files += list((ROOT / "posjax" / "geometry").glob("*.py"))
    return sorted(files, key=lambda p: p.relative_to(ROOT).as_posix())


def source_digest() -> str:
    """SHA-256 (hex) of the paths and contents of :func:`source_files`."""
    h = hashlib.sha256()
    for p in source_files():
        h.update(p.relative_to(ROOT).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()
