"""The house rules of the package's layout. No import cycle: every import between its modules (at any depth of a
function, except `if TYPE_CHECKING:` blocks) points one way; a new cycle fails here with the modules that form it.
No module over 500 lines, and the package root holds only the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

PACKAGE = Path(__file__).resolve().parents[1] / "uav_debate_eval"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("uav_debate_eval"):
            for alias in node.names:  # `from pkg import module` names the module, else the names' module
                target = f"{node.module}.{alias.name}"
                out.add(target if target in known else str(node.module))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("uav_debate_eval"))
    return out & set(known)


def import_cycles() -> list[list[str]]:
    known = _modules()
    names = sorted(known)
    index = {m: i for i, m in enumerate(names)}
    rows, cols = [], []
    for m in names:
        for target in _imports(known[m], known) - {m}:
            rows.append(index[m])
            cols.append(index[target])
    graph = csr_matrix(([1] * len(rows), (rows, cols)), shape=(len(names), len(names)))
    _, label = connected_components(graph, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for m, lab in zip(names, label, strict=True):
        groups.setdefault(int(lab), []).append(m)
    return sorted(g for g in groups.values() if len(g) > 1)


def test_no_import_cycle():
    assert import_cycles() == []


def test_a_cycle_is_found(tmp_path, monkeypatch):
    pkg = tmp_path / "uav_debate_eval"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from uav_debate_eval.a import y\n")
    (pkg / "a" / "y.py").write_text("from uav_debate_eval.a.x import f\n")
    (pkg / "a" / "z.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from uav_debate_eval.a.x import f\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    assert import_cycles() == [["uav_debate_eval.a.x", "uav_debate_eval.a.y"]]


def test_modules_stay_small_and_the_root_holds_only_the_cli():
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
             for p in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 500} == {}
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "cli.py"]
