"""tools/gpu_check.sh, the prepared GPU check, run for its CPU part (every
step but the CUDA-only asv one), so the script cannot rot before a GPU runs it."""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from gnnperf import cli

ROOT = Path(__file__).resolve().parents[1]


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def in_process(argv, env, timeout):
    """Runs a step's ``python -m gnnperf ...`` through ``cli.main`` in this
    process, so the shared trainings of conftest answer its Cora runs."""
    assert argv[:2] == ["-m", "gnnperf"], argv
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv[2:])
        except SystemExit as exc:
            code = exc.code
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.mark.xdist_group("two-ranks")  # its ddp step launches two ranks
def test_the_cpu_part_runs_every_step_and_writes_both_summaries(tmp_path, reuse_trained,
                                                                monkeypatch):
    # Its Cora trainings at the shared fixture's epochs, as test_doctor's are.
    import gnnperf.doctor
    from conftest import TRAINED_EPOCHS
    monkeypatch.setattr(gnnperf.doctor, "EPOCHS", TRAINED_EPOCHS)
    monkeypatch.setattr(gnnperf.doctor, "AMP_EPOCHS", TRAINED_EPOCHS)
    gpu_check = load_gpu_check()
    out = tmp_path / "check"
    # The large-graph step on Cora too, so both are the shared trainings: the
    # step's code is what runs here; a real graph of its own would cost far
    # more (synthetic-10k: its compiled variants compile again; see
    # docs/gpu-runner.md: tools/gpu_check.sh --device cpu).
    code = gpu_check.main(["--device", "cpu", "--out", str(out),
                           "--cora-epochs", str(TRAINED_EPOCHS), "--large-graph", "cora",
                           "--large-epochs", str(TRAINED_EPOCHS)], runner=in_process)
    summary = json.loads((out / "gpu-check.json").read_text())
    status = {step["name"]: step for step in summary["steps"]}
    assert code == 0 and summary["passed"], summary
    assert [name for name, step in status.items() if step["status"] == "skipped"] == [
        "models on cora", "asv pr profile, CUDA benchmarks"]
    assert {name for name, step in status.items() if step["status"] == "pass"} == {
        "doctor", "variants on cora", "variants on cora (large-graph step)", "amp bf16",
        "amp fp16", "ddp on 2 ranks"}
    # Figures, not just a status: every comparison variant on both graphs,
    # the forced AMP dtypes and the all-reduce share of both DDP variants.
    from gnnperf.variants import standard_variants
    assert set(status["variants on cora"]["figures"]) == set(standard_variants())
    assert set(status["variants on cora (large-graph step)"]["figures"]) == set(
        standard_variants())
    assert status["amp fp16"]["figures"]["amp"]["amp_dtype"] == "float16"
    assert status["amp bf16"]["figures"]["amp"]["amp_dtype"] == "bfloat16"
    for variant in ("ddp", "sampled+ddp"):
        assert 0 < status["ddp on 2 ranks"]["figures"][variant]["allreduce_share"] < 1
    # What two ranks report (was test_distributed's two-rank report test).
    assert "scaling eff. (strong)" in (out / "ddp-on-2-ranks.log").read_text()
    ddp = json.loads((out / "ddp.json").read_text())["results"]
    assert [result["variant"] for result in ddp] == ["ddp", "sampled+ddp"]
    for result in ddp:
        extra = result["extra"]
        assert extra["world_size"] == 2 and len(extra["per_rank_epoch_ms"]) == 2
        assert result["epoch_time"]["median"] * 1e3 == pytest.approx(
            max(extra["per_rank_epoch_ms"]))
        assert 0 < extra["scaling_efficiency"] < 2 and extra["one_rank_epoch_ms"] > 0
        assert extra["allreduce_ms_per_step"] > 0
    assert "skipped" in status["doctor"]["reason"]  # the doctor's CUDA-only checks, named
    # The doctor on CPU (was test_doctor's own full run): what runs passes,
    # the CUDA-only checks are skipped and named, its trainings the shared ones.
    from test_doctor import CUDA_ONLY
    assert set(standard_variants()) <= set(reuse_trained.hits)
    doctor = json.loads((out / "doctor.json").read_text())
    checks = {check["name"]: check["status"] for check in doctor["checks"]}
    assert doctor["passed"] is True and doctor["complete"] and doctor["device"] == "cpu"
    assert {name for name, s in checks.items() if s == "skipped"} == CUDA_ONLY
    assert all(check["reason"].startswith("CUDA only") for check in doctor["checks"]
               if check["status"] == "skipped")
    assert {f"train {v}" for v in standard_variants()} <= {n for n, s in checks.items()
                                                            if s == "pass"}
    for name in ("environment", "amp dtype and loss curve", "amp fp16 with GradScaler trains",
                 "sampler invariants on cpu", "compile: no graph breaks, one graph",
                 "peak memory (CPU profiler memory events)"):
        assert checks[name] == "pass", name
    printed = (out / "doctor.log").read_text()
    assert "CUDA peak n/a" in printed and "SKIPPED timing is synchronised" in printed
    table = (out / "gpu-check.md").read_text()
    assert table.startswith("# GPU check on cpu: PASSED")
    assert "| amp fp16 | pass |" in table


def test_a_failing_step_fails_the_check_and_the_rest_still_run(tmp_path):
    gpu_check = load_gpu_check()
    ran = []

    def runner(argv, env, timeout):
        ran.append(argv)
        # The doctor "crashes" without a report; the rest exit 0 with none either.
        return types.SimpleNamespace(returncode=1, stdout="", stderr="RuntimeError: boom")
    out = tmp_path / "check"
    assert gpu_check.main(["--device", "cpu", "--out", str(out)], runner=runner) == 1
    summary = json.loads((out / "gpu-check.json").read_text())
    assert not summary["passed"]
    doctor = summary["steps"][0]
    assert doctor["status"] == "fail" and "RuntimeError: boom" in doctor["reason"]
    skipped = [step["name"] for step in summary["steps"] if step["status"] == "skipped"]
    assert skipped == ["models on cora", "asv pr profile, CUDA benchmarks"]  # CUDA-only
    assert len(ran) == len(summary["steps"]) - len(skipped)  # every other step ran
    assert "FAILED" in (out / "gpu-check.md").read_text().splitlines()[0]


def test_cuda_on_a_cpu_machine_is_one_line_before_any_step(tmp_path, capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert load_gpu_check().main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "use --device cpu" in err
    assert not os.listdir(tmp_path)


def test_a_step_runs_as_its_own_process_and_a_hung_one_is_killed_with_its_children(tmp_path):
    gpu_check = load_gpu_check()
    plan = gpu_check.plan_for("cpu", tmp_path)

    def judge(plan, proc):
        return gpu_check.StepResult("echo", "pass" if proc.stdout.strip() == "hi" else "fail")
    done = gpu_check.run_step(gpu_check.Step("echo", lambda p: ["-c", "print('hi')"], judge),
                              plan)
    assert done.status == "pass" and (tmp_path / "echo.log").read_text().endswith("hi\n\n")
    # A step that hangs, with a child of its own: both are gone at the limit.
    pid_file = tmp_path / "child.pid"
    hang = ["-c", "import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', "
                  "'import time; time.sleep(60)']); "
                  f"open({str(pid_file)!r}, 'w').write(str(child.pid)); print('started', "
                  "flush=True); time.sleep(60)"]
    step = gpu_check.Step("hang", lambda p: hang, judge, timeout_s=3)
    hung = gpu_check.run_step(step, plan)
    assert hung.status == "fail" and "timed out after 3 s" in hung.reason
    assert "started" in (tmp_path / "hang.log").read_text()
    child = Path("/proc") / pid_file.read_text() / "status"
    time.sleep(0.2)
    # Gone, or a zombie left for a container's init that reaps nothing: not running.
    assert not child.exists() or "(zombie)" in child.read_text()


def test_the_models_step_accepts_a_pair_that_cannot_combine_and_misses_no_other(tmp_path):
    # The CUDA-only models step's judge, on what `gnnperf run --model` writes:
    # an n/a row for sparse with GAT is right; a pair with no row is not.
    gpu_check = load_gpu_check()
    plan = gpu_check.plan_for("cpu", tmp_path)
    result = {"epoch_time": {"median": 0.01}, "step_peak_bytes": 2 ** 20, "test_acc": 0.8,
              "extra": {}, "compile_s": None}
    doc = {"complete": True, "config": {"variants": ["baseline", "sparse"],
                                        "models": ["sage", "gat"]},
           "results": [{**result, "variant": v, "model": m}
                       for v, m in (("baseline", "sage"), ("sparse", "sage"), ("baseline", "gat"))],
           "unavailable": {"sparse [gat]": "sparse cannot run with model gat: attention ..."}}
    judge = gpu_check._judge_run("models on cora", "models.json")
    (tmp_path / "models.json").write_text(json.dumps(doc))
    done = judge(plan, subprocess.CompletedProcess([], 0, "", ""))
    assert done.status == "pass", done.reason
    assert set(done.figures) == {"baseline [sage]", "sparse [sage]", "baseline [gat]"}
    del doc["results"][2]
    (tmp_path / "models.json").write_text(json.dumps(doc))
    done = judge(plan, subprocess.CompletedProcess([], 0, "", ""))
    assert done.status == "fail" and "baseline [gat]: no result" in done.reason
