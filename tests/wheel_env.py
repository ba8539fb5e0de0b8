"""gnnperf as a user's ``pip install`` has it: the wheel built from this
working tree, and a fresh virtual environment outside the checkout with
that wheel and torch installed, nothing of the clone on its path.

Session fixtures, made once per test run whichever pytest-xdist worker asks
first (under a file lock in the run's shared temporary folder); the other
worker finds them made. Import them into a test module::

    from wheel_env import gnnperf_wheel, wheel_venv  # noqa: F401 -- fixtures

Building happens in a copy of the working tree (its tracked files and the
untracked ones git does not ignore): ``pip wheel`` on the checkout itself
would leave ``build/`` there, shared by everyone working in it, and would
package whatever stale file a former build left in ``build/lib``.

Installing torch unpacks 750 MB (35 s on the project's 2 cores, twice: the
venv and asv's environment), so by default the venv and the asv
environments made from it see the packages of the environment running these
tests after their own, gnnperf excepted (:func:`shared_site`): pip finds
torch, PyG and the rest installed, and the environments hold gnnperf's wheel
(and what the test installs) only; pip resolves ``gnnperf==X`` as it would
anywhere. ``GNNPERF_TEST_WHEEL_ENV=isolated`` installs everything from the
package index instead, as a user's machine does.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The packages the fresh environment gets besides gnnperf's wheel and asv's
#: matrix (:func:`matrix_requirements`): what runs asv there, at the releases
#: of the environment running these tests where it has them (pip then picks
#: nothing newer from the index); ``wheel``, which asv installs first into
#: every environment it makes, so that a run whose environments see this one
#: (``ASV_PYTHONPATH``) and no index can make them.
ASV_TOOLS = ("asv", "asv_runner", "virtualenv", "wheel")
MODE_ENV = "GNNPERF_TEST_WHEEL_ENV"
#: What :func:`shared_site` leaves out of the test environment's packages:
#: gnnperf (the editable install's metadata would satisfy ``gnnperf==X``,
#: its finder put the clone back on the path) and each environment's own
#: installer and start-up files.
NOT_SHARED = ("gnnperf", "gnnperf-*", "__editable__*", "*.pth", "pip", "pip-*", "__pycache__")


def shared_folder(tmp_path_factory, name: str) -> Path:
    """``name`` in the run's base temporary folder, which every xdist
    worker of this run sees (a worker's own base temp is below it)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _lock(folder: Path):
    from filelock import FileLock
    return FileLock(str(folder) + ".lock")


def pinned_torch() -> str:
    """The torch release gnnperf's asv matrix pins (asv.conf.json): the one
    the fresh environment and asv's environments install."""
    from gnnperf.asv_conf import read_asv_conf
    torch_pin, = read_asv_conf(ROOT / "asv.conf.json")["matrix"]["req"]["torch"]
    return torch_pin


def matrix_requirements() -> list[str]:
    """asv.conf.json's matrix as pip requirements (``torch==2.13.0``,
    ``numpy``): what asv installs into each environment it makes, which the
    fresh environment then holds too."""
    from gnnperf.asv_conf import read_asv_conf
    req = read_asv_conf(ROOT / "asv.conf.json")["matrix"]["req"]
    return [f"{name.removeprefix('pip+')}=={version}" if version else name.removeprefix("pip+")
            for name, (version,) in req.items()]


def _pinned_here(name: str) -> str:
    try:
        return f"{name}=={importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return name


def working_tree_files() -> list[str]:
    """The working tree's files: tracked, and untracked where git does not
    ignore them (relative paths)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    return sorted({name for name in listed.stdout.split("\0") if name})


@pytest.fixture(scope="session")
def gnnperf_wheel(tmp_path_factory) -> Path:
    """gnnperf's wheel (``pip wheel --no-deps``) of this working tree, in a
    folder of its own: the folder is what ``PIP_FIND_LINKS`` names."""
    folder = shared_folder(tmp_path_factory, "gnnperf-wheel")
    with _lock(folder):
        found = sorted((folder / "wheels").glob("gnnperf-*.whl"))
        if found:
            return found[0]
        if not (ROOT / ".git").exists():
            pytest.skip("no git checkout: the wheel is built from the working tree's files")
        source = folder / "source"
        shutil.rmtree(source, ignore_errors=True)
        for name in working_tree_files():
            path = ROOT / name
            if path.is_file():  # a tracked file deleted in the working tree is not there
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, source / name)
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                                str(folder / "wheels"), str(source)],
                               capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
        wheel, = (folder / "wheels").glob("gnnperf-*.whl")
        return wheel


def shared_site(folder: Path) -> Path:
    """Links in ``folder/site`` to the packages of the environment running
    these tests, :data:`NOT_SHARED` left out, and ``folder/startup``, whose
    ``sitecustomize.py`` appends that site after an interpreter's own
    packages; returns ``folder/startup``, what ``ASV_PYTHONPATH`` names.
    asv hands ``ASV_PYTHONPATH`` to its environments as ``PYTHONPATH``, and
    asv's benchmark script takes ``PYTHONPATH``'s folders off ``sys.path``
    again, so the site itself is never on it: the start-up file, imported
    before that, has appended it by then."""
    import fnmatch
    import sysconfig
    site = folder / "site"
    site.mkdir(parents=True)
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not any(fnmatch.fnmatch(entry.name, pattern) for pattern in NOT_SHARED):
            (site / entry.name).symlink_to(entry)
    startup = folder / "startup"
    startup.mkdir()
    (startup / "sitecustomize.py").write_text(
        "# The tests' packages after this environment's own (tests/wheel_env.py).\n"
        f"import site\nsite.addsitedir({str(site)!r})\n")
    return startup


@dataclass(frozen=True)
class WheelEnv:
    """A virtual environment with gnnperf installed from its wheel.

    Args:
        root: The environment's folder (outside the checkout).
        wheel: The gnnperf wheel installed in it.
        shared: The start-up folder of :func:`shared_site`, whose packages
            the environment and asv's environments made from it see after
            their own (``None``: it installed everything itself).
    """
    root: Path
    wheel: Path
    shared: Path | None = None

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def wheels(self) -> Path:
        """The folder holding :attr:`wheel`: pip's find-links for ``gnnperf==X``."""
        return self.wheel.parent

    def environ(self, **extra: str) -> dict:
        """The environment of a process run in this venv: its ``bin`` first on
        the ``PATH``, no ``PYTHONPATH`` (nothing of the checkout on the path),
        and :attr:`wheels` first in pip's find-links, so that a requirement
        ``gnnperf==<version>`` resolves to :attr:`wheel`; asv's environments
        start with :attr:`shared` (``ASV_PYTHONPATH``)."""
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = os.pathsep.join([str(self.root / "bin"), env.get("PATH", "")])
        env["VIRTUAL_ENV"] = str(self.root)
        env["PIP_FIND_LINKS"] = " ".join(filter(None, [str(self.wheels),
                                                       os.environ.get("PIP_FIND_LINKS", "")]))
        env.pop("ASV_PYTHONPATH", None)
        if self.shared is not None:
            env["ASV_PYTHONPATH"] = str(self.shared)
        env.update(extra)
        return env

    def run(self, *args: str, cwd: Path, timeout: float = 600, **extra: str
            ) -> subprocess.CompletedProcess:
        """``args`` (a command of the venv's ``bin``, or any) run in :obj:`cwd`
        with :meth:`environ`; stdout and stderr captured as text."""
        return subprocess.run(list(args), cwd=cwd, env=self.environ(**extra),
                              capture_output=True, text=True, timeout=timeout)

    def python_json(self, code: str, *args: str, cwd: Path, timeout: float = 600) -> object:
        """What :obj:`code`, run by the venv's Python with :obj:`args` as
        ``sys.argv[1:]``, prints last as JSON; a failure fails the test with
        its output."""
        proc = self.run(str(self.python), "-c", code, *args, cwd=cwd, timeout=timeout)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def wheel_venv(gnnperf_wheel, tmp_path_factory) -> WheelEnv:
    """A fresh venv (``python -m venv``, in the run's temporary folder) with
    ``torch==<asv.conf.json's pin>``, gnnperf's wheel and its dependencies,
    asv's matrix (:func:`matrix_requirements`, torch pinned) and
    :data:`ASV_TOOLS` installed (mostly found in :func:`shared_site` unless
    ``GNNPERF_TEST_WHEEL_ENV=isolated``); made once per test run."""
    mode = os.environ.get(MODE_ENV, "shared")
    if mode not in ("shared", "isolated"):
        pytest.fail(f"{MODE_ENV}={mode!r}: choose shared or isolated")
    folder = shared_folder(tmp_path_factory, f"gnnperf-wheel-venv-{mode}")
    venv = WheelEnv(folder / "venv", gnnperf_wheel,
                    folder / "shared" / "startup" if mode == "shared" else None)
    done = folder / "done"
    with _lock(folder):
        if done.exists():
            return venv
        for made in (venv.root, folder / "shared"):
            shutil.rmtree(made, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv.root)], check=True, timeout=300)
        if venv.shared is not None:
            shared_site(folder / "shared")
            site = venv.python_json("import json, sysconfig; "
                                    "print(json.dumps(sysconfig.get_paths()['purelib']))",
                                    cwd=folder)
            # A .pth line: the venv's own site-packages first, the shared ones after.
            (Path(site) / "gnnperf-tests-shared.pth").write_text(
                f"{folder / 'shared' / 'site'}\n")
        installed = venv.run(str(venv.python), "-m", "pip", "install", "-q",
                             *matrix_requirements(), str(gnnperf_wheel),
                             *map(_pinned_here, ASV_TOOLS), cwd=folder, timeout=900)
        assert installed.returncode == 0, (installed.stdout + installed.stderr)[-4000:]
        done.write_text(str(gnnperf_wheel))
    return venv


__all__ = ["ASV_TOOLS", "MODE_ENV", "NOT_SHARED", "WheelEnv", "gnnperf_wheel",
           "matrix_requirements", "pinned_torch", "shared_folder", "shared_site", "wheel_venv",
           "working_tree_files"]
