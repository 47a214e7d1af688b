"""The layers of docs/architecture.md hold: every import (function-level and TYPE_CHECKING
ones included) points to the same layer or a lower one, no import cycle exists, and the
stages that change nothing load nothing that runs a process."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest
from support.installer import Installer

TOP = Path(__file__).resolve().parent.parent
PACKAGE = TOP / "jetson_install"


def _modules() -> Dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(TOP).with_suffix("").parts)
        found[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return found


def _imports(modules: Dict[str, Path]) -> Set[Tuple[str, str]]:
    """(importer, imported) for every import of a project module, wherever it is written."""
    edges: Set[Tuple[str, str]] = set()
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            edges.update((name, target) for target in targets if target in modules and target != name)
    return edges


def _layer_table() -> Dict[str, int]:
    """Entry (a module or package, without the `jetson_install.` prefix) -> layer."""
    table = {}
    text = (TOP / "docs" / "architecture.md").read_text()
    for number, modules in re.findall(r"^\| (\d+) \| [^|]+ \| ([^|]+) \|$", text, re.M):
        for entry in re.findall(r"`([^`]+)`", modules):
            table[entry] = int(number)
    assert table, "docs/architecture.md has no layer table"
    return table


def _layer(module: str, table: Dict[str, int]) -> int:
    short = module[len("jetson_install."):] if module != "jetson_install" else module
    parts = short.split(".")
    for length in range(len(parts), 0, -1):  # the most specific entry
        entry = ".".join(parts[:length])
        if entry in table:
            return table[entry]
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_every_import_points_down_the_layers() -> None:
    modules, table = _modules(), _layer_table()
    upward = [f"{importer} (layer {_layer(importer, table)}) imports {imported} (layer {_layer(imported, table)})"
              for importer, imported in sorted(_imports(modules))
              if _layer(imported, table) > _layer(importer, table)]
    assert not upward, "\n".join(upward)


def test_no_import_cycle() -> None:
    modules = _modules()
    graph: Dict[str, List[str]] = {name: [] for name in modules}
    for importer, imported in _imports(modules):
        graph[importer].append(imported)
    state: Dict[str, int] = {}
    cycle: List[str] = []

    def visit(name: str, path: List[str]) -> bool:
        state[name] = 1
        for other in graph[name]:
            if state.get(other) == 1:
                cycle.extend(path[path.index(other):] + [name, other] if other in path else [name, other])
                return True
            if other not in state and visit(other, path + [name]):
                return True
        state[name] = 2
        return False

    assert not any(visit(name, []) for name in sorted(modules) if name not in state), " -> ".join(cycle)


#: The most lines a module may have (issue 45): one longer holds several subjects, and is cut by subject.
MAX_LINES = 500


def _over(package: Path, limit: int) -> List[str]:
    """Each module under `package` longer than `limit` lines, with its count, longest first."""
    counted = [(len(path.read_text(encoding="utf-8").splitlines()), str(path.relative_to(package.parent)))
               for path in package.rglob("*.py")]
    return [f"{name} ({lines} lines)" for lines, name in sorted(counted, reverse=True) if lines > limit]


def test_no_module_is_over_500_lines() -> None:
    over = _over(PACKAGE, MAX_LINES)
    assert not over, f"modules over {MAX_LINES} lines, to cut by subject: {', '.join(over)}"


def test_the_line_bound_names_each_module_over_it(tmp_path: Path) -> None:
    package = tmp_path / "jetson_install"
    (package / "base").mkdir(parents=True)
    (package / "base" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (package / "base" / "at_the_bound.py").write_text("x = 1\n" * MAX_LINES)
    assert _over(package, MAX_LINES) == [f"jetson_install/base/long.py ({MAX_LINES + 1} lines)"]


def test_every_table_entry_names_a_module() -> None:
    modules = {name[len("jetson_install."):] if name != "jetson_install" else name for name in _modules()}
    stale = [entry for entry in _layer_table() if entry not in modules]
    assert not stale, f"docs/architecture.md names modules that do not exist: {stale}"


def test_the_layers_are_folders() -> None:
    # A layer is a folder, so the tree shows the flow: only the package's own __init__ and
    # __main__ stand beside the folders, and the table names folders, not modules.
    loose = sorted(path.name for path in PACKAGE.glob("*.py") if path.name not in ("__init__.py", "__main__.py"))
    assert not loose, f"modules outside a layer's folder: {loose}"
    not_folders = [entry for entry in _layer_table()
                   if entry not in ("jetson_install", "__main__") and not (PACKAGE / entry / "__init__.py").is_file()]
    assert not not_folders, f"docs/architecture.md's layer table names modules, not folders: {not_folders}"


def test_every_module_has_a_row_in_the_folder_table() -> None:
    text = (TOP / "docs" / "architecture.md").read_text()
    table = text[text.index("## Folders and modules"):text.index("## Layers")]
    named = set(re.findall(r"`([a-z_]+\.py)`", table))
    # A folder whose row has no module column describes it whole (doctor/, probes/), as does
    # a subfolder named in a module column (routes/).
    described = set(re.findall(r"^\| `([a-z_]+)/` \| \|", table, re.M)) | set(re.findall(r"^\|[^|]*\| `([a-z_]+)/`", table, re.M))
    missing = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                     if path.name != "__init__.py" and path.parent != PACKAGE
                     and path.name not in named and path.parent.name not in described)
    assert not missing, f"modules docs/architecture.md does not describe: {missing}"


def test_planning_loads_nothing_that_runs_a_process_reads_an_index_or_runs_the_doctor() -> None:
    # What `plan obliteratus` needs, imported in a fresh interpreter: uv.py and git.py build
    # command lines there, and only runner.py (which they do not import) starts them.
    heavy = ("jetson_install.tools.runner", "jetson_install.tools.index", "jetson_install.envs.interpreters", "jetson_install.running.install",
             "jetson_install.doctor", "jetson_install.running.bitsandbytes_build", "requests")
    code = ("import sys; import jetson_install.planning.planner, jetson_install.cli.render; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


# What each fast command uses not at all, so must not load: requests (and urllib3 under it) only
# where an index is read, importlib.metadata only for --version's uv and an upgrade's fix, the
# TOML parser only where a data file is read, the doctor and the runner only where they run.
_SAMPLE = "sample:agx-orin-64gb-jp6.2"
_NEVER_LOADED = ("requests", "urllib3", "jetson_install.tools.index", "jetson_install.tools.oci",
                 "jetson_install.tools.oci_credentials", "jetson_install.tools.oci_mirror",
                 "jetson_install.tools.runner", "jetson_install.doctor", "jetson_install.running")
_UNUSED: Dict[Tuple[str, ...], Tuple[str, ...]] = {
    ("--version",): _NEVER_LOADED + ("tomllib", "jetson_install.base.toml_file", "jetson_install.board",
                                     "jetson_install.catalog.catalog", "jetson_install.planning", "jetson_install.envs"),
    ("detect", "--root", _SAMPLE): _NEVER_LOADED + ("importlib.metadata", "jetson_install.planning.plan",
                                                    "jetson_install.envs", "jetson_install.tools"),
    ("detect", "--json", "--root", _SAMPLE): _NEVER_LOADED + ("importlib.metadata", "jetson_install.planning",
                                                              "jetson_install.envs", "jetson_install.tools"),
    ("plan", "obliteratus", "--root", _SAMPLE): _NEVER_LOADED + ("importlib.metadata", "difflib",
                                                                 "jetson_install.envs.interpreters",
                                                                 "jetson_install.planning.vendor_sources"),
    ("plan", "obliteratus", "--json", "--root", _SAMPLE): _NEVER_LOADED + ("importlib.metadata",
                                                                           "jetson_install.planning.vendor_sources"),
}


@pytest.mark.parametrize("args", list(_UNUSED), ids=" ".join)
def test_a_fast_command_loads_nothing_it_does_not_use(args: Tuple[str, ...]) -> None:
    # The command as a user runs it, in a fresh interpreter; then what it loaded.
    probe = ("import io, contextlib, runpy, sys\n"
             f"sys.argv = ['jetson-install', *{list(args)!r}]\n"
             "try:\n"
             "    with contextlib.redirect_stdout(io.StringIO()):\n"
             "        runpy.run_module('jetson_install', run_name='__main__')\n"
             "except SystemExit as exc:\n"
             "    assert exc.code in (0, None), exc.code\n"
             "print(sorted(sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    unused = [name for name in loaded if any(name == prefix or name.startswith(prefix + ".") for prefix in _UNUSED[args])]
    assert not unused, f"`jetson-install {' '.join(args)}` loaded what it does not use: {unused}"


# What a no-op re-run, which every CI job on a runner makes, uses not at all: it runs no step (no
# step's handlers, no uv, so none of uv's failure patterns), reads no index, no wheel and no lock,
# builds nothing and keeps no stack; it names no registry (oci://) and no upgrade of the tool,
# checks no RECORD, and fails nothing, so it prints no fix (its command is planning/rerun.py's).
_NOT_ON_A_NO_OP = ("requests", "urllib3", "importlib.metadata", "zipfile", "concurrent.futures", "base64",
                   "jetson_install.tools.index", "jetson_install.tools.oci", "jetson_install.tools.uv_errors",
                   "jetson_install.doctor", "jetson_install.running.handlers", "jetson_install.running.fetch",
                   "jetson_install.planning.vendor_sources", "jetson_install.catalog.lock_file",
                   "jetson_install.planning.bitsandbytes_source", "jetson_install.running.bitsandbytes_build",
                   "jetson_install.envs.stack", "jetson_install.base.oci_ref", "jetson_install.base.upgrade",
                   "jetson_install.planning.fixes", "jetson_install.planning.index_fixes")
# And the frozen values it never makes, defined in modules it does use (each costs the no-op the
# compiling of its methods): a file as an index lists it.
_NOT_DEFINED_ON_A_NO_OP = ("ListedFile",)


@pytest.mark.slow  # it installs first
def test_a_no_op_rerun_loads_nothing_it_does_not_use(installer: Installer) -> None:
    assert installer.run()[0] == 0
    probe = ("import dataclasses, io, contextlib, json, runpy, sys\n"
             f"sys.argv = ['jetson-install', *{installer.args()!r}]\n"
             "out = io.StringIO()\n"
             "try:\n"
             "    with contextlib.redirect_stdout(out):\n"
             "        runpy.run_module('jetson_install', run_name='__main__')\n"
             "except SystemExit as exc:\n"
             "    assert exc.code in (0, None), exc.code\n"
             "defined = [value.__name__ for name, module in list(sys.modules.items()) if name.startswith('jetson_install')\n"
             "           for value in vars(module).values() if dataclasses.is_dataclass(value) and isinstance(value, type)]\n"
             "print(json.dumps([json.loads(out.getvalue())['status'], sorted(sys.modules), sorted(set(defined))]))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                            env=installer.env)
    assert result.returncode == 0, result.stderr
    status, loaded, defined = json.loads(result.stdout.strip().splitlines()[-1])
    assert status == "unchanged"
    unused = [name for name in loaded if any(name == prefix or name.startswith(prefix + ".") for prefix in _NOT_ON_A_NO_OP)]
    assert not unused, f"a no-op re-run loaded what it does not use: {unused}"
    never_made = [name for name in defined if name in _NOT_DEFINED_ON_A_NO_OP]
    assert not never_made, f"a no-op re-run defined frozen values it never makes: {never_made}"
