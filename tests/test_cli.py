import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gnnperf import report
from gnnperf.cli import main
from gnnperf.variants import get_variant

SMALL = ["--dataset", "synthetic:nodes=600,degree=4,features=16,classes=3",
         "--epochs", "6", "--warmup", "2", "--no-progress"]


def test_run_writes_table_json_and_plot(tmp_path, capsys, reuse_trained):
    # The whole registry on bundled Cora at the shared training's epochs:
    # `gnnperf run`'s own code path, its trainings from conftest's one run.
    from conftest import TRAINED_EPOCHS, TRAINED_WARMUP
    out_json, out_png = tmp_path / "out.json", tmp_path / "out.png"
    assert main(["run", "--epochs", str(TRAINED_EPOCHS), "--warmup", str(TRAINED_WARMUP),
                 "--no-progress", "--json", str(out_json), "--plot", str(out_png)]) == 0
    table = capsys.readouterr().out
    from gnnperf.variants import standard_variants
    for variant in standard_variants():
        assert variant in table
    doc = json.loads(out_json.read_text())
    env = doc["environment"]
    for key in ("torch", "torch_geometric", "python", "device_name", "threads", "git_commit", "seed"):
        assert key in env
    assert env["threads"] == 1 and env["device"] == "cpu"
    assert [r["variant"] for r in doc["results"]] == standard_variants()
    assert {"baseline", "sampled", "amp", "compiled", "checkpointed"} <= set(standard_variants())
    assert all(r["cuda_peak_bytes"] is None for r in doc["results"])
    assert doc["comparison"][0]["speedup"] == 1.0
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Every step against this machine's roofs, recorded with the run.
    assert env["roofs"]["peak_flops_per_s"] > 0 and env["roofs"]["threads"] == 1
    for result in doc["results"]:
        assert result["work"]["bytes_moved"] > 0, result["variant"]
        # A true bound: no step, eager or compiled (fused), beats it.
        assert 0 < result["roofline"]["roofline_pct"] <= 100, result["variant"]
        assert result["roofline"]["bound"] in ("compute", "memory")
        assert result["roofline"]["traffic_over_compulsory"] >= 1, result["variant"]
    assert "roofline % (bound)" in table and "op traffic / compulsory" in table
    # Time to accuracy: every variant's row, against 99% of baseline's best.
    race = doc["time_to_accuracy"]
    assert [row["label"] for row in race["rows"]] == standard_variants()
    assert "of baseline's" in race["target"]["rule"] and race["verdict"] in table
    baseline = next(row for row in race["rows"] if row["label"] == "baseline")
    assert baseline["median_s"] > 0 and baseline["reached"] == 1
    for row in race["rows"]:
        assert row["median_s"] is None or row["median_s"] > 0, row["label"]
    # Compiled code is counted as the eager maths it compiles, not as fused
    # kernels no dispatch mode sees: the same FLOPs as the eager step.
    work = {r["variant"]: r["work"] for r in doc["results"]}
    assert work["compiled"]["flops"] == work["baseline"]["flops"]
    fast = "sparse+trimmed+sparse_features"
    assert work[fast + "+compiled"]["flops"] == work[fast]["flops"]


def test_run_over_seeds_reports_time_to_accuracy_median_and_spread(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert main(["run", "--variants", "baseline,sampled", *SMALL, "--seeds", "0,1",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert [(r["variant"], r["seed"]) for r in doc["results"]] == [
        ("baseline", 0), ("sampled", 0), ("baseline", 1), ("sampled", 1)]
    assert [row["variant"] for row in doc["comparison"]] == ["baseline", "sampled"]
    assert doc["config"]["seeds"] == [0, 1]
    rows = {row["label"]: row for row in doc["time_to_accuracy"]["rows"]}
    assert rows["baseline"]["seeds"] == [0, 1] and len(rows["sampled"]["seconds"]) == 2
    assert "lower median of 2 seeds' bests" in doc["time_to_accuracy"]["target"]["rule"]
    assert "target: validation accuracy" in text and "time to accuracy (" in text
    assert text.count("\nbaseline ") == 2  # the epoch table (first seed) and the race


@pytest.mark.parametrize("options, message", [
    (["--target-acc", "1.5"], "--target-acc must be in (0, 1]"),
    (["--target-share", "0"], "--target-share must be in (0, 1]"),
    (["--seeds", "0,0"], "repeats a seed"),
    (["--seed", "3", "--seeds", "0,1"], "give --seed or --seeds, not both"),
])
def test_time_to_accuracy_options_are_checked_before_anything_trains(options, message, capsys,
                                                                      monkeypatch):
    from gnnperf.measure import runner
    monkeypatch.setattr(runner, "measure_variant", lambda *a, **k: pytest.fail("trained"))
    assert main(["run", "--variants", "baseline", *SMALL, *options]) == 2
    assert message in capsys.readouterr().err


def test_roofs_command_prints_and_writes_the_cached_roofs(tmp_path, capsys, monkeypatch):
    from gnnperf.measure import roofline
    monkeypatch.setenv("GNNPERF_CACHE", str(tmp_path))  # its small roofs stay its own
    monkeypatch.setattr(roofline, "CPU_LADDER", (2 ** 20,))
    monkeypatch.setattr(roofline, "CPU_GEMM_SIZE", 128)
    out = tmp_path / "roofs.json"
    assert main(["roofs", "--refresh", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "GFLOP/s" in text and "gather GB/s by working set: 1 MiB" in text
    assert json.loads(out.read_text())["stream_bytes_per_s"]["1048576"] > 0


def test_plot_draws_one_point_per_variant(tmp_path):
    from gnnperf.data import load_dataset
    from gnnperf.measure.runner import measure_variant
    from gnnperf.variants import TrainConfig
    data = load_dataset("synthetic:nodes=600,degree=4,features=16,classes=3")
    results = [measure_variant(get_variant(v), data, TrainConfig(epochs=4), "cpu", 2)
               for v in ("baseline", "sampled")]
    assert report.plot(results, tmp_path / "p.png") == 2


def test_module_entry_point_runs_offline_on_bundled_cora_by_default(tmp_path):
    # No --dataset, no --root, no GNNPERF_DATA: the bundled Cora.
    out = tmp_path / "cora.json"
    env = {k: v for k, v in os.environ.items() if k != "GNNPERF_DATA"}
    proc = subprocess.run(
        [sys.executable, "-m", "gnnperf", "run", "--variants", "baseline,sampled", "--epochs", "5",
         "--warmup", "2", "--no-progress", "--json", str(out)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["complete"] is True
    assert doc["config"]["dataset"] == "cora"
    identity = doc["environment"]["dataset"]
    assert identity["source"] == "planetoid (bundled)"
    assert (identity["num_nodes"], identity["num_edges"], identity["num_features"]) == (
        2708, 10556, 1433)
    assert len(identity["sha256"]) == 64


def test_saved_graph_file_round_trips_through_run(tmp_path, capsys):
    from torch_geometric.data import Data

    from gnnperf.data import load_dataset
    graph = load_dataset("synthetic:nodes=600,degree=4,features=16,classes=3", seed=5).graph
    path = tmp_path / "mygraph.pt"
    torch.save(Data(x=graph.x, edge_index=graph.edge_index, y=graph.y), path)  # no masks
    out = tmp_path / "mine.json"
    assert main(["run", "--dataset", str(path), "--epochs", "6", "--warmup", "2",
                 "--no-progress", "--variants", "baseline,sampled", "--seed", "3",
                 "--json", str(out)]) == 0
    assert "baseline" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert [r["variant"] for r in doc["results"]] == ["baseline", "sampled"]
    assert all(r["dataset"] == "mygraph" for r in doc["results"])
    identity = doc["environment"]["dataset"]
    assert identity["source"] == f"file {path.resolve()}"
    assert identity["split"].startswith("RandomNodeSplit(") and identity["split"].endswith("seed 3")
    assert identity["num_nodes"] == 600


def test_killed_run_keeps_finished_variants_in_valid_json(tmp_path):
    out = tmp_path / "partial.json"
    # baseline finishes in about a second; checkpointed then runs for many more.
    proc = subprocess.Popen(
        [sys.executable, "-m", "gnnperf", "run", "--dataset", "synthetic-cora",
         "--variants", "baseline,checkpointed", "--epochs", "40", "--warmup", "2",
         "--no-progress", "--json", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    doc = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists():
                doc = json.loads(out.read_text())  # always a whole document
                if doc["results"]:
                    break
            time.sleep(0.02)
    finally:
        proc.kill()  # SIGKILL: no handler runs
        proc.wait()
    assert doc is not None and proc.returncode == -signal.SIGKILL
    doc = json.loads(out.read_text())
    assert doc["complete"] is False
    assert [r["variant"] for r in doc["results"]] == ["baseline"]
    assert doc["config"]["variants"] == ["baseline", "checkpointed"]


def _one_line_error(capsys, argv, message, tmp_path):
    out_json = tmp_path / "never.json"
    code = main(["run", *argv, "--json", str(out_json)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert err and err[-1].startswith("gnnperf: error:") and message in err[-1]
    assert not out_json.exists()
    assert not list(tmp_path.glob(".never.json*"))


@pytest.mark.parametrize("argv, message", [
    (["--variants", "baseline,warp"], "unknown variant 'warp'"),
    (["--dataset", "pubmed"], "unknown dataset 'pubmed'"),
    (["--epochs", "0"], "epochs must be >= 1"),
    (["--hidden", "-4"], "hidden and layers must be >= 1"),
    (["--batch-size", "0"], "batch size must be >= 1"),
    (["--fanout", "0,5"], "fanout [0, 5] is invalid"),
    (["--epochs", "3", "--warmup", "3"], "--warmup must be in [2, --epochs)"),
    (["--warmup", "1"], "--warmup must be in [2, --epochs)"),
    (["--threads", "0"], "threads must be >= 1"),
    (["--dropout", "1.5"], "dropout must be in [0, 1)"),
    (["--lr", "0"], "learning rate must be > 0"),
    (["--lr", "inf"], "--lr must be a finite number > 0"),
    (["--reference", "warp"], "--reference: unknown variant 'warp'"),
    (["--saint-norm", "foo"], "--saint-norm must be one of paper, pyg, got 'foo'"),
    (["--saint-seen-edges", "1.5"], "--saint-seen-edges must be in [0, 1]"),
    (["--saint-max-coverage", "5"], "--saint-max-coverage must be >= --saint-coverage"),
    (["--saint-min-count", "0"], "--saint-min-count must be >= 1"),
    (["--saint-roots", "0"], "GraphSAINT needs --saint-roots >= 1"),
    (["--model", "gcm"], "unknown model 'gcm'; choose gcn, sage, gat, gin"),
    (["--model", "gat", "--variants", "baseline,sparse"],
     "sparse cannot run with model gat: attention"),
    (["--model", "no_such_pkg.mod:build"], "cannot import no_such_pkg.mod"),
])
def test_bad_input_is_one_clear_line(capsys, tmp_path, argv, message):
    _one_line_error(capsys, [*SMALL, *argv], message, tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_cpu_machine(capsys, tmp_path):
    _one_line_error(capsys, [*SMALL, "--device", "cuda"], "use --device cpu", tmp_path)


def test_corrupt_data_file(capsys, tmp_path, planetoid_root, monkeypatch):
    monkeypatch.setenv("GNNPERF_CACHE", str(tmp_path / "cache"))
    shutil.copytree(planetoid_root / "CiteSeer", tmp_path / "data" / "CiteSeer")
    (tmp_path / "data" / "CiteSeer" / "raw" / "ind.citeseer.graph").write_bytes(b"\x00garbage")
    _one_line_error(capsys, [*SMALL, "--dataset", "citeseer", "--root", str(tmp_path / "data")],
                    "replace them with intact Planetoid files", tmp_path)


def test_missing_data_root(capsys, tmp_path):
    _one_line_error(capsys, [*SMALL, "--dataset", "cora", "--root", str(tmp_path / "nowhere")],
                    "put the Planetoid raw files", tmp_path)


def test_missing_output_folder(capsys, tmp_path):
    code = main(["run", *SMALL, "--plot", str(tmp_path / "no" / "such" / "p.png")])
    assert code == 2 and "does not exist; create it first" in capsys.readouterr().err


def test_out_of_memory_is_reported_and_the_run_goes_on(capsys, tmp_path, monkeypatch):
    from gnnperf.variants import TrainingRun
    original = TrainingRun.step

    def step(self, batch):
        if self.model.checkpoint:
            raise torch.OutOfMemoryError("simulated")
        return original(self, batch)

    monkeypatch.setattr(TrainingRun, "step", step)
    out_json = tmp_path / "out.json"
    code = main(["run", *SMALL, "--variants", "baseline,checkpointed", "--json", str(out_json)])
    captured = capsys.readouterr()
    assert code == 1
    assert "out of memory in variant checkpointed" in captured.err
    assert "lower --hidden" in captured.err
    doc = json.loads(out_json.read_text())
    assert [r["variant"] for r in doc["results"]] == ["baseline"]
    assert "checkpointed" in doc["failures"]


def test_sampler_command_reports_throughput(tmp_path, capsys):
    out = tmp_path / "sampler.json"
    code = main(["sampler", "--dataset", "synthetic:nodes=3000,degree=8,features=16,classes=4",
                 "--batch-size", "256", "--batches", "4", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "sampler alone" in printed and "median ms by part: sampling" in printed
    doc = json.loads(out.read_text())
    assert doc["environment"]["allocator"].startswith("default")
    result = doc["result"]
    assert result["sampler_edges_per_s"] > 0 and result["loader_edges_per_s"] > 0
    parts = result["loader_parts"]
    assert parts["sampling_ms"]["median"] > 0 and parts["feature_gather_ms"]["median"] > 0
    assert parts["feature_gather_bytes_per_s"] > 0 and parts["feature_gather_roof_pct"] > 0
    assert 0 < result["edges_per_batch"] <= 256 * 15 * (1 + 10)
    assert result["loader_work"]["gather_bytes"] > 0 and result["gather_roof_pct"] > 0
    assert doc["environment"]["roofs"]["gather_bytes_per_s"]


def test_reference_variant_sets_the_ratios(tmp_path, capsys):
    out = tmp_path / "ref.json"
    assert main(["run", *SMALL, "--variants", "sampled,sampled+trimmed", "--reference", "sampled",
                 "--json", str(out)]) == 0
    assert "speed-up vs sampled" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["reference"] == "sampled" and doc["comparison"][0]["speedup"] == 1.0


USER_MODEL = '''
import torch
from torch_geometric.nn import GraphConv


class TwoGraphConvs(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels):
        super().__init__()
        self.first, self.second = GraphConv(in_channels, hidden), GraphConv(hidden, out_channels)

    def forward(self, x, edge_index):
        return self.second(self.first(x, edge_index).relu(), edge_index)


def build(in_channels, hidden, out_channels, layers):
    return TwoGraphConvs(in_channels, hidden, out_channels)
'''


def test_run_crosses_models_and_marks_what_cannot_combine_na(tmp_path, capsys, monkeypatch):
    # The default set with several models: each model's variants, ratios to
    # that model's own baseline; a pair that cannot run is an n/a row with
    # the model's reason, not an error and not a training.
    import gnnperf.variants
    monkeypatch.setattr(gnnperf.variants, "standard_variants", lambda: ["baseline", "sparse"])
    out_json = tmp_path / "models.json"
    assert main(["run", *SMALL, "--model", "sage,gat", "--json", str(out_json)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:2] == ["variant", "model"]
    assert ["sparse", "gat", "n/a"] in [line.split()[:3] for line in table.splitlines()]
    doc = json.loads(out_json.read_text())
    assert [(r["variant"], r["model"]) for r in doc["results"]] == [
        ("baseline", "sage"), ("sparse", "sage"), ("baseline", "gat")]
    assert doc["config"]["models"] == ["sage", "gat"] and "model" not in doc["config"]
    assert "attention weighs every edge" in doc["unavailable"]["sparse [gat]"]
    ratios = {(row["variant"], row["model"]): row["speedup"] for row in doc["comparison"]}
    assert ratios[("baseline", "sage")] == ratios[("baseline", "gat")] == 1.0
    assert ratios[("sparse", "sage")] is not None


def test_a_users_model_by_import_path_trains_and_is_recorded(tmp_path, capsys, monkeypatch):
    (tmp_path / "usermodels_net.py").write_text(USER_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    out_json = tmp_path / "user.json"
    path = "usermodels_net:build"
    import gnnperf.variants
    monkeypatch.setattr(gnnperf.variants, "standard_variants",
                        lambda: ["baseline", "sampled", "trimmed", "tutorial"])
    assert main(["run", *SMALL, "--model", path, "--json", str(out_json)]) == 0
    doc = json.loads(out_json.read_text())
    assert [(r["variant"], r["model"]) for r in doc["results"]] == [
        ("baseline", path), ("sampled", path)]
    assert all(r["losses"][-1] < r["losses"][0] for r in doc["results"])
    unavailable = doc["unavailable"]
    assert set(unavailable) == {f"trimmed [{path}]", f"tutorial [{path}]"}
    assert "black box" in unavailable[f"trimmed [{path}]"]
    capsys.readouterr()
    # Named, a variant that runs with none of the models asked for is
    # refused before anything trains.
    assert main(["run", *SMALL, "--model", path, "--variants", "baseline,checkpointed"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("gnnperf: error: checkpointed cannot run with model "
                            "usermodels_net:build") and "\n" not in error


# ------------------------------------------------- where its users run it ---------
ROOT = Path(__file__).resolve().parent.parent


def _without_compilers(tmp_path) -> dict:
    """The environment of a slim image: PATH holds the venv's scripts and
    the non-compiler tools gnnperf calls (git), no C/C++ compiler, no CXX."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("git",):
        found = shutil.which(name)
        if found:
            (tools / name).symlink_to(found)
    env = {k: v for k, v in os.environ.items()
           if k not in ("CXX", "CC", "TORCH_INDUCTOR_INSTALL_GXX", "GNNPERF_DATA")}
    env["PATH"] = os.pathsep.join([str(tools), str(Path(sys.executable).parent)])
    return env


def test_no_cpp_compiler_makes_compiled_na_before_training_and_the_run_passes(tmp_path):
    env = _without_compilers(tmp_path)
    for compiler in ("g++", "c++", "clang++", "gcc", "cc"):
        assert shutil.which(compiler, path=env["PATH"]) is None, compiler
    out = tmp_path / "run.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gnnperf", "run", "--variants", "baseline,compiled",
         "--epochs", "3", "--warmup", "2", "--no-progress", "--json", str(out)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(out.read_text())
    reason = doc["unavailable"]["compiled"]
    assert "C++ compiler" in reason and "install g++" in reason
    assert [r["variant"] for r in doc["results"]] == ["baseline"] and not doc["failures"]
    # Declared before the dataset loads, so before anything trains.
    na_line = proc.stderr.index("n/a: compiled: ")
    assert na_line < proc.stderr.index("dataset cora:")
    assert "n/a" in [line.split()[1] for line in proc.stdout.splitlines()
                     if line.startswith("compiled ")]


def test_version_option(capsys):
    import gnnperf
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gnnperf {gnnperf.__version__}"


def _subparsers(parser):
    import argparse
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _option_blocks(help_text: str) -> dict[str, str]:
    """--option -> its help block, as argparse prints it."""
    blocks, current = {}, None
    for line in help_text.splitlines():
        stripped = line.strip()
        if line.startswith("  -") and not line.startswith("   "):
            current = stripped.split()[0].rstrip(",")
            blocks[current] = stripped
        elif current and line.startswith("    ") and stripped:
            blocks[current] += " " + stripped
        else:
            current = None if not line.startswith("  ") else current
    return blocks


def test_every_option_shows_its_help_and_default():
    from gnnperf.cli import build_parser
    missing = []
    for name, sub in _subparsers(build_parser()).items():
        blocks = _option_blocks(sub.format_help())
        for action in sub._actions:
            if not action.option_strings or action.dest in ("help", "version"):
                continue
            option = action.option_strings[0]
            block = blocks.get(option, "")
            # A flag's default (off) and an absent option's (None) need no figure.
            has_default = action.default is not None and action.default is not False
            if not action.help or (has_default and "default" not in block):
                missing.append(f"{name} {option}")
    assert not missing, missing


def test_every_commands_help_states_the_exit_codes():
    import re
    from gnnperf.cli import build_parser
    parser = build_parser()
    helps = {"gnnperf": parser.format_help(),
             **{name: sub.format_help() for name, sub in _subparsers(parser).items()}}
    for name, text in helps.items():
        flat = " ".join(text.split())
        assert re.search(r"exit status: 0 pass 1 a failure or regression\b.* 2 bad input\b",
                         flat), name


@pytest.mark.parametrize("confirmed, code", [(True, 0), (False, 1)])
def test_bisect_exits_non_zero_when_its_answer_is_not_confirmed(monkeypatch, capsys,
                                                                confirmed, code):
    from gnnperf.gate import bisection
    found = bisection.BisectResult("a" * 40, "subject", "aten_ops", 10, 12, confirmed)
    monkeypatch.setattr(bisection, "bisect", lambda *args, **kwargs: found)
    assert main(["bisect", "HEAD~1", "HEAD", "--quiet"]) == code
    assert ("NOT confirmed" in capsys.readouterr().out) is not confirmed


def _pyproject() -> dict:
    import tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_pyproject_is_ready_for_a_pypi_release():
    project = _pyproject()["project"]
    assert project["license"] == "MIT"  # SPDX expression (PEP 639), not the deprecated table
    assert project["license-files"] and all(list(ROOT.glob(p)) for p in project["license-files"])
    assert {"Homepage", "Source", "Issues"} <= set(project["urls"])
    classifiers = project["classifiers"]
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the SPDX field
    tested = [c.rsplit(" :: ", 1)[1] for c in classifiers
              if c.startswith("Programming Language :: Python :: 3.")]
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in tested
    assert project["requires-python"] == f">={min(tested, key=lambda v: tuple(map(int, v.split('.'))))}"


def test_readme_install_line_says_how_to_get_the_cpu_build_elsewhere():
    head = (ROOT / "README.md").read_text().splitlines()[:20]
    command = next(line for line in head if line.startswith("python3 -m venv"))
    assert "pip install torch==2.13.0" in command  # line 1: what works here
    text = " ".join(head)
    assert "--index-url https://download.pytorch.org/whl/cpu" in text
    assert "so nothing large downloads" not in text


def test_runs_on_the_lowest_torch_geometric_pyproject_allows(tmp_path):
    # GNNPERF_TEST_OLD_PYG: a folder holding pyproject's lowest
    # torch-geometric (pip install --no-deps --target DIR torch-geometric==X),
    # put ahead of this venv's on the path of a real run.
    folder = os.environ.get("GNNPERF_TEST_OLD_PYG")
    if not folder:
        pytest.skip("GNNPERF_TEST_OLD_PYG is not set (.ci/run sets it)")
    floor = next(d for d in _pyproject()["project"]["dependencies"]
                 if d.startswith("torch-geometric>="))
    lowest = floor.removeprefix("torch-geometric>=")
    out = tmp_path / "old.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [folder, *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run(
        [sys.executable, "-m", "gnnperf", "run", "--variants", "baseline,sampled,sparse",
         "--epochs", "4", "--warmup", "3", "--no-progress", "--json", str(out)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["environment"]["torch_geometric"] == lowest
    assert [r["variant"] for r in doc["results"]] == ["baseline", "sampled", "sparse"]


# ------------------------------------- a model package's mistakes: one line, before training
WRONG_SIGNATURE = '''
import torch


def build(in_channels, out_channels):
    return torch.nn.Linear(in_channels, out_channels)
'''

# A wrapper whose own signature binds, around a function that takes two sizes.
WRONG_SIGNATURE_INSIDE = '''
import torch


def _two_sizes(in_channels, out_channels):
    return torch.nn.Linear(in_channels, out_channels)


def build(*sizes):
    return _two_sizes(*sizes)
'''

FORWARD_RAISES = '''
import torch


class Mismatched(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels):
        super().__init__()
        self.first = torch.nn.Linear(in_channels, hidden)
        self.second = torch.nn.Linear(in_channels, out_channels)  # should take hidden

    def forward(self, x, edge_index):
        return self.second(self.first(x).relu())


def build(in_channels, hidden, out_channels, layers):
    return Mismatched(in_channels, hidden, out_channels)
'''
FORWARD_RAISES_LINE = 12  # the line of FORWARD_RAISES that raises, in the file written


def _user_module(tmp_path, monkeypatch, name: str, source: str) -> str:
    """``name:build`` importable from :obj:`tmp_path` (each test its own
    module name: imports and the model registry are cached per process)."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:build"


def _never_trains(monkeypatch) -> None:
    from gnnperf.measure import runner
    monkeypatch.setattr(runner, "measure_variant", lambda *a, **k: pytest.fail("trained"))


def _exit_status(argv: list[str]) -> int:
    """:func:`main`'s exit status, also when argparse exits (SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _the_one_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize("name, source, said", [
    ("usermodels_signature", WRONG_SIGNATURE, "build(in_channels, out_channels)"),
    ("usermodels_signature_inside", WRONG_SIGNATURE_INSIDE,
     "TypeError: _two_sizes() takes 2 positional arguments but 4"),
], ids=["its own", "a function it calls"])
def test_a_builder_with_the_wrong_signature_is_one_line_before_training(
        tmp_path, capsys, monkeypatch, name, source, said):
    path = _user_module(tmp_path, monkeypatch, name, source)
    _never_trains(monkeypatch)
    assert main(["run", *SMALL, "--variants", "baseline", "--model", path]) == 2
    line = _the_one_line(capsys)
    assert line.startswith(f"gnnperf: error: --model {path}: ")
    assert said in line and "(in_channels, hidden, out_channels, layers)" in line


def test_a_model_whose_forward_raises_is_one_line_before_training(tmp_path, capsys, monkeypatch):
    path = _user_module(tmp_path, monkeypatch, "usermodels_forward_raises", FORWARD_RAISES)
    _never_trains(monkeypatch)
    assert main(["run", "--dataset", "cora", "--epochs", "3", "--warmup", "2", "--no-progress",
                 "--variants", "baseline", "--model", path]) == 2
    line = _the_one_line(capsys)
    assert line.startswith(f"gnnperf: error: --model {path}: forward ")
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in line
    assert f"usermodels_forward_raises.py:{FORWARD_RAISES_LINE}" in line
    assert line.endswith("; --verbose shows the traceback")
    # --verbose: the same line after the whole traceback, the user's frame in it.
    assert main(["run", "--dataset", "cora", "--epochs", "3", "--warmup", "2", "--no-progress",
                 "--variants", "baseline", "--model", path, "--verbose"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert f'usermodels_forward_raises.py", line {FORWARD_RAISES_LINE}, in forward' in err
    assert err.strip().splitlines()[-1] == line.removesuffix("; --verbose shows the traceback")


def test_a_users_model_is_checked_before_the_gate_starts_a_worker(tmp_path, capsys, monkeypatch):
    path = _user_module(tmp_path, monkeypatch, "usermodels_gate_signature", WRONG_SIGNATURE)
    from gnnperf.gate import compare
    monkeypatch.setattr(compare, "run_gate", lambda *a, **k: pytest.fail("started workers"))
    argv = ["gate", "--no-time", "--base-dir", str(ROOT), "--head-dir", str(ROOT),
            "--models", path]
    assert main(argv) == 2
    line = _the_one_line(capsys)
    assert line.startswith("gnnperf: error: ") and path in line
    assert "(in_channels, hidden, out_channels, layers)" in line
    for verbose in (["--verbose", *argv], [*argv, "--verbose"]):  # global or the command's
        assert main(verbose) == 2
        err = capsys.readouterr().err
        assert "Traceback (most recent call last)" in err and err.strip().splitlines()[-1] == line


@pytest.mark.parametrize("name, source, said", [
    ("usermodels_doctor_signature", WRONG_SIGNATURE, "(in_channels, hidden, out_channels, layers)"),
    ("usermodels_doctor_forward", FORWARD_RAISES, "forward on the graph's 2708 nodes raised "
                                                  "RuntimeError"),
], ids=["signature", "forward"])
def test_the_doctor_checks_a_users_model_before_any_check(tmp_path, capsys, monkeypatch, name,
                                                          source, said):
    path = _user_module(tmp_path, monkeypatch, name, source)
    from gnnperf import doctor
    monkeypatch.setattr(doctor.Doctor, "run", lambda *a, **k: pytest.fail("checked"))
    assert main(["doctor", "--skip-asv", "--model", f"gcn,{path}"]) == 2
    line = _the_one_line(capsys)
    assert line.startswith(f"gnnperf: error: --model {path}: ") and said in line


@pytest.mark.parametrize("argv, names, says", [
    (["run", "--fanout", "15,x"], "--fanout", "comma-separated positive integers (e.g. 15,10)"),
    (["sampler", "--fanout", "x"], "--fanout", "comma-separated positive integers (e.g. 15,10)"),
    (["run", "--seeds", "0,one"], "--seeds", "comma-separated integers >= 0 (e.g. 0,1,2)"),
    (["run", "--lr", "nan"], "--lr", "a number"),
    (["run", "--epochs", "ten"], "--epochs", "invalid int value: 'ten'"),
    (["run", "--sampler", "fast"], "--sampler", "invalid choice: 'fast'"),
    (["gate", "--processes", "six"], "--processes", "invalid int value: 'six'"),
    (["run", "--no-such-option"], "--no-such-option", "unrecognized arguments"),
])
def test_a_bad_option_value_is_one_line_not_the_usage(capsys, monkeypatch, argv, names, says):
    _never_trains(monkeypatch)
    assert _exit_status(argv) == 2
    line = _the_one_line(capsys)
    assert line.startswith("gnnperf") and "error: " in line
    assert names in line and says in line, line


def test_help_still_shows_the_whole_usage(capsys):
    assert _exit_status(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: gnnperf run") and "--fanout" in out and "--verbose" in out


def _graph_file(tmp_path, nodes: int) -> Path:
    from torch_geometric.data import Data

    from gnnperf.data import load_dataset
    graph = load_dataset(f"synthetic:nodes={nodes},degree=4,features=8,classes=3").graph
    path = tmp_path / "small.pt"
    torch.save(Data(x=graph.x, edge_index=graph.edge_index, y=graph.y), path)
    return path


@pytest.mark.parametrize("dataset, parts, says", [
    ("cora", "100000", "at most the number of nodes (2708)"),
    ("citeseer", "3328", "at most the number of nodes (3327)"),
    ("synthetic:nodes=600,degree=4,features=16,classes=3", "601",
     "at most the number of nodes (600)"),
    ("cora", "0", "--cluster-parts >= 1"),
])
def test_cluster_parts_past_the_graph_are_refused_before_it_loads(capsys, monkeypatch, dataset,
                                                                    parts, says):
    import gnnperf.data
    _never_trains(monkeypatch)
    monkeypatch.setattr(gnnperf.data, "load_dataset", lambda *a, **k: pytest.fail("loaded"))
    assert main(["run", "--dataset", dataset, "--variants", "baseline,cluster", "--epochs", "3",
                 "--warmup", "2", "--no-progress", "--cluster-parts", parts]) == 2
    line = _the_one_line(capsys)
    assert line.startswith("gnnperf: error: ") and "--cluster-parts" in line and says in line


def test_cluster_parts_past_a_graph_files_nodes_are_refused_before_training(tmp_path, capsys,
                                                                             monkeypatch):
    path = _graph_file(tmp_path, 300)
    _never_trains(monkeypatch)
    assert main(["run", "--dataset", str(path), "--variants", "cluster", "--epochs", "3",
                 "--warmup", "2", "--no-progress", "--cluster-parts", "301"]) == 2
    line = _the_one_line(capsys)
    assert "--cluster-parts" in line and "at most the number of nodes (300)" in line


def test_cluster_batch_past_the_parts_is_refused_before_training(capsys, monkeypatch):
    _never_trains(monkeypatch)
    assert main(["run", *SMALL, "--variants", "cluster", "--cluster-parts", "8",
                 "--cluster-batch", "9"]) == 2
    line = _the_one_line(capsys)
    assert "--cluster-batch" in line and "at most --cluster-parts (8)" in line


def test_bundled_node_counts_are_the_loaded_graphs(cora_dataset):
    from gnnperf.data import known_num_nodes, load_dataset
    assert known_num_nodes("cora") == cora_dataset.num_nodes == 2708
    assert known_num_nodes("citeseer") == load_dataset("citeseer").num_nodes == 3327
    assert known_num_nodes("synthetic:nodes=600,degree=4,features=16,classes=3") == 600
    assert known_num_nodes("cora", root="/elsewhere") is None  # another copy: counted once loaded


TRAINING_RAISES = '''
import torch
from torch_geometric.nn import GCNConv


class Net(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels, layers):
        super().__init__()
        self.conv = GCNConv(in_channels, out_channels)

    def forward(self, x, edge_index):
        if torch.is_grad_enabled():  # passes the probe (no_grad), fails in a step
            raise RuntimeError("boom in a training step")
        return self.conv(x, edge_index)


def build(in_channels, hidden, out_channels, layers):
    return Net(in_channels, hidden, out_channels, layers)
'''


def test_a_model_that_fails_in_a_step_is_a_failed_row_not_a_crash(tmp_path, capsys, monkeypatch):
    path = _user_module(tmp_path, monkeypatch, "usermodels_training_raises", TRAINING_RAISES)
    assert main(["run", *SMALL, "--variants", "baseline", "--model", path]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert "failed: RuntimeError: boom in a training step (at " in captured.err
    assert "usermodels_training_raises.py" in captured.err
    assert "failed" in captured.out  # the table's row


def test_the_fingerprint_says_whether_the_package_differs_from_its_commit(tmp_path):
    import subprocess
    from gnnperf.fingerprint import _git_state

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "code.py").write_text("x = 1\n")
    assert _git_state(package) == (None, None)  # no checkout: an installed wheel, say
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit, dirty = _git_state(package)
    assert len(commit) == 40 and dirty is False
    (package / "notes.txt").write_text("untracked\n")
    (tmp_path / "README").write_text("outside the package\n")
    assert _git_state(package) == (commit, False)
    (package / "code.py").write_text("x = 2\n")
    assert _git_state(package) == (commit, True)
