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


def test_a_fresh_compile_cache_compiles_cold_whatever_compiled_before():
    # A regression test: compile_s read an earlier compile's Inductor cache entries
    # (the doctor's) as compile time. Under fresh_compile_cache the same
    # graph, compiled before in this process and on disk, misses the FX
    # graph cache: the compile is cold whatever ran before; after the block
    # the shared cache is back. (A product alone: an extern kernel, no C++
    # to build, so the test takes a fraction of a second.)
    from torch._dynamo.utils import counters

    def product(a, b):
        return a @ b

    def compile_once() -> dict:
        torch.compiler.reset()
        counters["inductor"].clear()
        torch.compile(product)(torch.ones(2, 2), torch.ones(2, 2))
        return {key: counters["inductor"][key] for key in ("fxgraph_cache_hit",
                                                           "fxgraph_cache_miss")}

    compile_once()  # fills the shared caches (or hits them)
    with torch_private.fresh_compile_cache() as freshness:
        assert compile_once() == {"fxgraph_cache_hit": 0, "fxgraph_cache_miss": 1}
    assert freshness == "fresh"  # torch's own fresh_cache, on every torch from the floor on
    assert compile_once() == {"fxgraph_cache_hit": 1, "fxgraph_cache_miss": 0}
    torch.compiler.reset()


def test_the_compiler_warm_up_pays_the_processes_one_offs(monkeypatch):
    # Inductor's import, the CPU vector ISA pick and a first compile's lazy
    # set-up, once per process: paid before a compiled run (its setup),
    # never in its compile_s. The warm-up's compile (forward and backward)
    # happens in a throwaway cache: the shared one sees none of it.
    import sys

    from torch._dynamo.utils import counters
    picked = []
    import torch._inductor.cpu_vec_isa as isa
    monkeypatch.setattr(isa, "pick_vec_isa", lambda: picked.append(True))
    counters["inductor"].clear()
    torch_private.warm_compiler(torch.device("cpu"))
    assert "torch._inductor.compile_fx" in sys.modules
    if torch_private.cpp_compiler() is None:
        assert picked == [] and not counters["inductor"]["fxgraph_cache_miss"]
        return
    assert picked == [True]
    assert counters["inductor"]["fxgraph_cache_miss"] == 2  # forward, backward: cold
    assert counters["inductor"]["fxgraph_cache_hit"] == 0


def test_every_inductor_option_compiled_sets_exists_in_this_torch():
    # Canary: compiled's CPU options are Inductor config names that exist in
    # torch 2.11 through 2.13 (checked against both releases' sources); a
    # release that renames or drops one fails here by name, while a run on
    # it goes on without the option (the reason logged once).
    import torch._inductor.config as config

    from gnnperf.variants.compiled import CPU_INDUCTOR_OPTIONS
    assert [name for name in CPU_INDUCTOR_OPTIONS if not hasattr(config, name)] == []
    assert torch_private.inductor_options(CPU_INDUCTOR_OPTIONS) == CPU_INDUCTOR_OPTIONS


def test_an_inductor_option_this_torch_lacks_is_skipped_and_said_once(caplog):
    options = {"size_asserts": False, "gnnperf_no_such_option": 1}
    with caplog.at_level("WARNING", logger="gnnperf"):
        assert torch_private.inductor_options(options) == {"size_asserts": False}
        assert torch_private.inductor_options(options) == {"size_asserts": False}
    said = [r.getMessage() for r in caplog.records if "gnnperf_no_such_option" in r.getMessage()]
    assert len(said) == 1 and torch.__version__ in said[0]


def test_a_compiled_cpu_run_passes_only_the_options_this_torch_has(monkeypatch):
    # The compiled technique asks inductor_options: a torch without one of
    # its options compiles without it instead of failing at the first step.
    from gnnperf.data import load_dataset
    from gnnperf.variants import TrainConfig, compiled, get_variant
    passed = []
    monkeypatch.setattr(compiled, "CPU_INDUCTOR_OPTIONS",
                        {"size_asserts": False, "gnnperf_no_such_option": 1})
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: passed.append(kwargs["options"])
                        or fn)
    graph = load_dataset("synthetic:nodes=60,degree=3,features=4,classes=2").graph
    get_variant("compiled").build(graph, TrainConfig(epochs=1), torch.device("cpu"))
    assert passed == [{"size_asserts": False}]


def test_profiler_memory_events_say_their_bytes_time_and_device():
    # Canary of the profiler's raw events (workcount.profile_work reads them
    # by device: kineto_results, _KinetoEvent's nbytes, start_ns,
    # device_type, device_index; private, in torch 2.11 to 2.13).
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        kept = torch.ones(1000)
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    assert any(e.nbytes() == kept.numel() * 4 for e in events)
    assert all(e.device_type().name == "CPU" and e.device_index() == -1 and e.start_ns() > 0
               for e in events)


def test_the_gpu_compiler_warm_up_waits_for_the_compile_workers(monkeypatch):
    # Off the CPU ("meta" stands for the GPU, torch.compile for the
    # identity): the compile workers' start is waited for before a run, and
    # the warm-up's product ends in a pointwise op (Triton's first kernel).
    from torch._inductor.async_compile import AsyncCompile
    waited, compiled = [], []
    monkeypatch.setattr(AsyncCompile, "wait_pool_ready", classmethod(
        lambda cls, timeout=120: waited.append(True)))

    def identity(fn, **kwargs):
        compiled.append(fn)
        return fn
    monkeypatch.setattr(torch, "compile", identity)
    torch_private.warm_compiler(torch.device("meta"))
    assert waited == [True] and len(compiled) == 1
    traced = []

    class Seen(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            traced.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))
    ones = torch.ones(2, 2, device="meta")
    with Seen():
        compiled[0](ones, ones)
    assert "relu" in traced
