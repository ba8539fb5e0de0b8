"""A script of tools/ as a module, for the tests of the tools (tools/ is
scripts, not a package)::

    from tool_script import load_tool
    figures = load_tool("figures")
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def load_tool(name: str) -> ModuleType:
    """tools/<name>.py, loaded afresh."""
    spec = importlib.util.spec_from_file_location(f"tools_{name}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
