"""The one-way floors (CONVENTIONS.md, "Layers"), read from the code itself: `sessions_app`, the
floor the features stand on, imports no feature (nothing of `memory_app`), and its engine
imports nothing of its dashboard. Every import of every module counts, those inside functions
too: an import inside a function to dodge a cycle is a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SESSIONS_APP = BASE_DIR / "sessions_app"
ENGINE = SESSIONS_APP / "engine"
FEATURES = "memory_app"
DASHBOARD = "sessions_app.dashboard"
# Calls that import the module their first argument names.
DYNAMIC_IMPORTS = {"import_module", "import_string", "__import__"}


def module_name(path: Path) -> str:
    parts = path.relative_to(BASE_DIR).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, *, module: str, is_package: bool = False) -> set[str]:
    """The modules `source` (the module `module`) imports anywhere: `import x.y` names x.y, and
    `from x import y` names x and x.y (y may be a module); relative imports are resolved."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            function = node.func
            called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            first = node.args[0] if node.args else None
            if called in DYNAMIC_IMPORTS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
    return names


def imports_of(root: Path) -> dict[str, set[str]]:
    """Every module under `root` (but those moving out) and what it imports."""
    return {
        module_name(path): imported(
            path.read_text(encoding="utf-8"), module=module_name(path), is_package=path.name == "__init__.py"
        )
        for path in sorted(root.rglob("*.py"))
    }


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_walk_sees_every_kind_of_import() -> None:
    source = (
        "import a.b\n"
        "from c import d\n"
        "from . import sibling\n"
        "from ..up import thing\n"
        "def late():\n"
        "    import memory_app.notepad\n"
        "    return import_string('memory_app.notepad.feature.FEATURE')\n"
    )
    names = imported(source, module="sessions_app.dashboard.views.page")
    assert {"a.b", "c", "c.d", "sessions_app.dashboard.views.sibling"} <= names
    assert {"sessions_app.dashboard.up.thing", "memory_app.notepad"} <= names
    assert "memory_app.notepad.feature.FEATURE" in names
    assert "sessions_app.dashboard.x" in imported(
        "from . import x", module="sessions_app.dashboard", is_package=True
    )


def test_the_walk_covers_the_whole_app() -> None:
    modules = imports_of(SESSIONS_APP)
    assert {"sessions_app.admin", "sessions_app.dashboard.fragments", "sessions_app.engine.features"} <= set(
        modules
    )


def test_sessions_app_imports_no_feature() -> None:
    wrong = {
        module: sorted(name for name in names if within(name, FEATURES))
        for module, names in imports_of(SESSIONS_APP).items()
    }
    assert {module: names for module, names in wrong.items() if names} == {}


def test_the_engine_imports_nothing_of_the_dashboard() -> None:
    wrong = {
        module: sorted(name for name in names if within(name, DASHBOARD))
        for module, names in imports_of(ENGINE).items()
    }
    assert {module: names for module, names in wrong.items() if names} == {}
