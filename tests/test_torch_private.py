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
