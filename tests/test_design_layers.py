"""docs/design.md's allowed-arrows block is the import graph of the code.

The graph is built with ``ast`` from every ``import`` / ``from ... import`` of posjax/,
experiments/, benchmarks/ and ntk/, function-level imports included. A unit is a top-level
package (``experiments``, ``benchmarks``, ``ntk``) or a member of posjax (``posjax.models``,
``posjax.cpu``, ...; ``posjax`` itself is the package face). Every arrow between two units must
be listed in the block, and every unit must have a line there. Imports by a computed name
(``importlib.import_module``, ``__import__``) of posjax or experiments modules are allowed only
in posjax/__init__.py and the PE registry.
"""
from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOPS = ("posjax", "experiments", "benchmarks", "ntk")
DYNAMIC_ALLOWED = {"posjax/__init__.py", "posjax/encodings/registry.py"}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[0] if parts[0] != "posjax" or len(parts) == 1 else f"posjax.{parts[1]}"


def module_of(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def imported_modules(tree: ast.AST, module: str, is_package: bool, root: pathlib.Path = ROOT):
    """Absolute names of the modules a file imports (relative imports resolved; ``from posjax
    import x`` names ``posjax.x`` when ``x`` is a submodule)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".")
                pkg = pkg if is_package else pkg[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                top = sub.split(".")[0]
                here = root / sub.replace(".", "/")
                if top in TOPS and (here.with_suffix(".py").exists()
                                    or (here / "__init__.py").exists()):
                    yield sub, node.lineno
                else:
                    yield base, node.lineno


def dynamic_imports(tree: ast.AST):
    """``(line, target)`` of each import by a computed name; ``target`` is the literal start of the
    module name ('' when it is not a literal)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name not in ("import_module", "__import__") or not node.args:
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            yield node.lineno, arg.value
        elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
            yield node.lineno, str(arg.values[0].value)
        else:
            yield node.lineno, ""


def import_graph(root: pathlib.Path = ROOT):
    """``{(src_unit, dst_unit): [file:line, ...]}`` over the four packages."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            module = module_of(path, root)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            src = unit_of(module)
            for name, line in imported_modules(tree, module, path.name == "__init__.py", root):
                if name.split(".")[0] in TOPS and unit_of(name) != src:
                    arrows.setdefault((src, unit_of(name)), []).append(
                        f"{path.relative_to(root)}:{line}")
    return arrows


def allowed_arrows(text: str) -> dict[str, set[str]]:
    """The ``allowed arrows`` block of docs/design.md: ``unit -> unit unit ...`` per line."""
    m = re.search(r"^```text\n# allowed arrows\n(.*?)^```", text, re.S | re.M)
    assert m, "docs/design.md has no ```text block starting with '# allowed arrows'"
    out: dict[str, set[str]] = {}
    for raw in m.group(1).splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        src, _, dsts = line.partition("->")
        out[src.strip()] = set(dsts.split())
    return out


def forbidden(arrows, allowed) -> list[str]:
    bad = []
    for (src, dst), where in sorted(arrows.items()):
        if src not in allowed:
            bad.append(f"{src} has no line in the allowed-arrows block ({where[0]})")
        elif dst not in allowed[src]:
            bad.append(f"{src} -> {dst} is not allowed ({', '.join(where[:3])})")
    return bad


def test_every_import_arrow_is_allowed_by_design_md():
    allowed = allowed_arrows((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    assert forbidden(import_graph(), allowed) == []


def test_no_import_by_computed_name_outside_the_face_and_registry():
    bad = []
    for top in ("posjax", "experiments"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel in DYNAMIC_ALLOWED:
                continue
            for line, target in dynamic_imports(ast.parse(path.read_text(encoding="utf-8"))):
                if target == "" or target.split(".")[0] in ("posjax", "experiments"):
                    bad.append(f"{rel}:{line} imports {target or 'a computed name'}")
    assert bad == []


def test_checker_catches_an_upward_arrow_and_a_dynamic_import(tmp_path):
    # The checker itself: a geometry module importing encodings (a function-level import) and a
    # data module loading a posjax module by a computed name are both caught.
    for pkg in ("posjax", "posjax/geometry", "posjax/encodings", "posjax/data"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    for top in ("experiments", "benchmarks", "ntk"):
        (tmp_path / top).mkdir()
    (tmp_path / "posjax/geometry/bad.py").write_text(
        "def f():\n    from posjax.encodings import base\n")
    (tmp_path / "posjax/encodings/base.py").write_text("import posjax.geometry\n")
    arrows = import_graph(tmp_path)
    allowed = allowed_arrows("```text\n# allowed arrows\nposjax.encodings -> posjax.geometry\n"
                             "posjax.geometry ->\n```\n")
    assert forbidden(arrows, allowed) == [
        "posjax.geometry -> posjax.encodings is not allowed (posjax/geometry/bad.py:2)"]
    src = "import importlib\nimportlib.import_module(f'posjax.{x}')\n__import__(name)\n"
    assert list(dynamic_imports(ast.parse(src))) == [(2, "posjax."), (3, "")]
