"""The packages import in layers: no module imports one that imports it back
(imports inside functions counted), checked by this file's own walk of the
sources (what ../shared/tools/import_cycles.py checks, which users lack); and
the modules the gate and asv load by path into other trees import nothing
of gnnperf at module level."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, name: str, known: set[str]) -> set[str]:
    """The package's modules that :obj:`path` (module :obj:`name`) imports
    anywhere in its source, relative imports resolved; ``from a import b``
    counts ``a.b`` when that is a module, else ``a``."""
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[:len(base) - node.level + 1]
                module = ".".join(anchor + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # a name inside a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    paths = {module_name(p, package): p for p in package.rglob("*.py")}
    known = set(paths)
    return {name: imported_modules(path, name, known) for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walk_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .low import helper\n")
    (package / "sub" / "low.py").write_text("def helper():\n    from pkg import high\n")
    (package / "high.py").write_text("from pkg.sub import helper\n")
    (package / "alone.py").write_text("import os\nfrom . import high\n")
    graph = import_graph(package)
    assert graph["pkg.alone"] == {"pkg.high"}
    assert cycles(graph) == [["pkg.high", "pkg.sub", "pkg.sub.low"]]


@pytest.mark.parametrize("package", ["gnnperf", "benchmarks"])
def test_no_import_cycle(package):
    graph = import_graph(ROOT / package)
    assert len(graph) > 5
    assert cycles(graph) == []


@pytest.mark.parametrize("module", ["measure/case.py", "measure/workcount.py", "errors.py"])
def test_modules_loaded_by_path_into_other_trees_import_no_gnnperf_at_module_level(module):
    # The gate's instrument and asv's case module run against older
    # checkouts, whose gnnperf may lack any module added since: a top-level
    # import of one breaks every gate against them. Inside functions (run in
    # the tree under test) and under TYPE_CHECKING is fine.
    tree = ast.parse((ROOT / "gnnperf" / module).read_text())
    top = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else ():
            if isinstance(child, ast.ImportFrom) and (child.module or "").startswith("gnnperf"):
                top.append(child.module)
            elif isinstance(child, ast.Import):
                top += [a.name for a in child.names if a.name.startswith("gnnperf")]
    assert top == []


def test_importing_gnnperf_leaves_the_process_as_it_was():
    # No environment variable, warning filter or thread count is changed by
    # an import, and the package itself loads no torch (the CLI sets up its
    # process first); the CSR op registers once, even when its module is
    # loaded a second time by path (a tool or the asv suite).
    import subprocess
    import sys
    probe = (
        "import os, sys, warnings, importlib.util\n"
        "env, filters = dict(os.environ), list(warnings.filters)\n"
        "import gnnperf, gnnperf.cli\n"
        "assert 'torch' not in sys.modules, 'gnnperf imported torch'\n"
        "import torch, torch_geometric  # PyG's own import adds warning filters\n"
        "threads = torch.get_num_threads()\n"
        "env, filters = dict(os.environ), list(warnings.filters)\n"
        "from gnnperf import measure_variant, load_dataset, get_variant\n"
        "import gnnperf.cli, gnnperf.doctor, gnnperf.report, gnnperf.distributed, gnnperf.gate.cli\n"
        "import gnnperf.models.kernels as kernels\n"
        "assert dict(os.environ) == env, set(os.environ.items()) ^ set(env.items())\n"
        "assert warnings.filters == filters, 'a warning filter changed'\n"
        "assert torch.get_num_threads() == threads\n"
        "spec = importlib.util.spec_from_file_location('kernels_again', kernels.__file__)\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "m = kernels.CsrMatrix.from_dense(torch.eye(3))\n"
        "print(float(torch.ops.gnnperf.csr_mm(m.crow, m.col, m.values, 3, torch.ones(3, 2)).sum()))\n")
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", probe], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "6.0"  # and no CSR "beta" warning, which -W made an error


def test_every_package_of_gnnperf_is_in_the_wheel():
    """pyproject names the packages (one is mapped to another folder, which
    setuptools' find cannot list), so a new subpackage must be named there or
    a pip-installed gnnperf cannot import it; the wheel itself is checked by
    the end-to-end tier."""
    import tomllib
    root = Path(__file__).resolve().parent.parent
    named = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "gnnperf").rglob("__init__.py")}
    assert found - named == set(), "add them to [tool.setuptools] packages in pyproject.toml"
