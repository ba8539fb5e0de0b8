"""Canaries of gnnperf.torch_private, the one module that touches private
torch APIs: each still exists and still means what gnnperf reads it as."""
import torch

from gnnperf import torch_private


def test_storage_use_count_sees_views_come_and_go():
    assert torch_private.HAS_STORAGE_USE_COUNT
    tensor = torch.zeros(8)
    alone = torch_private.storage_use_count(tensor)
    view = tensor[2:]
    assert torch_private.storage_use_count(tensor) == alone + 1
    del view
    assert torch_private.storage_use_count(tensor) == alone


def test_dynamo_counts_count_a_graph_and_a_break():
    torch.compiler.reset()
    graphs, breaks = torch_private.dynamo_counts()

    def broken(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    torch.compile(broken, backend="eager")(torch.ones(3))
    after_graphs, after_breaks = torch_private.dynamo_counts()
    assert after_graphs - graphs == 2 and after_breaks - breaks == 1


def test_dynamo_config_has_the_autograd_tracing_flag():
    config = torch_private.dynamo_config()
    assert isinstance(config.trace_autograd_ops, bool)


def test_a_dispatch_mode_sees_aten_calls_and_their_schemas_say_what_they_write():
    seen = []

    class Record(torch_private.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    x = torch.ones(4)
    with Record():
        x.add_(1)
    assert seen == [torch.ops.aten.add_.Tensor]
    written = [a.name for a in torch_private.schema_arguments(seen[0])
               if a.alias_info is not None and a.alias_info.is_write]
    assert written == ["self"]


def test_the_compiler_warm_up_leaves_the_isa_pick_cached():
    # What a forked child inherits: once warmed, picking the ISA again (what
    # every CPU compile does first) starts no probe process. Run in a fresh
    # process: this one's pick may be cached already by an earlier test.
    import subprocess
    import sys
    probe = """
import subprocess
from gnnperf import torch_private
torch_private.warm_compiler_for_forks()
def no_probe(*args, **kwargs):
    raise AssertionError(f"the ISA was probed again: {args[:1]}")
subprocess.Popen.__init__ = no_probe
from torch._inductor.cpu_vec_isa import pick_vec_isa
print("picked", pick_vec_isa())
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("picked"), out.stderr[-2000:]


def test_cpp_compiler_is_inductors_own_search(monkeypatch):
    # Inductor's configured search (config.cpp.cxx: $CXX, else g++): where
    # it finds one, the check names the same; where none runs, None.
    from torch._inductor import config
    from torch._inductor.cpp_builder import get_cpp_compiler
    assert torch_private.cpp_compiler() == get_cpp_compiler()
    monkeypatch.delenv("TORCH_INDUCTOR_INSTALL_GXX", raising=False)
    with config.patch({"cpp.cxx": (None, "gnnperf-no-such-compiler")}):
        assert torch_private.cpp_compiler() is None
    assert torch_private.cpp_compiler() == get_cpp_compiler()


def test_trace_autograd_ops_is_guarded_by_release():
    # The flag exists from torch 2.11 on; this torch has it, an older one
    # compiles the forward alone (whole_step_blocker says why).
    import torch._dynamo
    assert torch_private._release(torch.__version__) >= torch_private.OLDEST_TORCH
    assert torch_private.traces_autograd_ops() is True
    assert isinstance(torch._dynamo.config.trace_autograd_ops, bool)
    assert torch_private._release("2.10.0+cu128") < torch_private.OLDEST_TORCH


def test_without_autograd_tracing_compiled_compiles_the_forward(monkeypatch):
    from gnnperf.data import load_dataset
    from gnnperf.variants import TrainConfig, compiled, get_variant
    monkeypatch.setattr(compiled, "traces_autograd_ops", lambda: False)
    graph = load_dataset("synthetic:nodes=60,degree=3,features=4,classes=2").graph
    run = get_variant("compiled").build(graph, TrainConfig(epochs=1), torch.device("cpu"))
    assert run.compiled_step is None
    assert run.stats["compiled"].startswith("forward (Dynamo in torch ")
    assert "trace_autograd_ops" in run.stats["compiled"]


def test_pyproject_torch_floor_is_the_oldest_torch_with_every_private_setting():
    import tomllib
    from pathlib import Path
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml")
                            .read_text())["project"]
    floor = next(d for d in project["dependencies"] if d.startswith("torch>="))
    assert torch_private._release(floor.removeprefix("torch>=")) == torch_private.OLDEST_TORCH
