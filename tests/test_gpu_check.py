"""tools/gpu_check.sh, the prepared GPU check: the CPU parts of its two
calls (every step that runs on CPU, at the smallest sizes), its
step selection and budget with fake runners, its stack check, and one real
run killed midway, so the script cannot rot before a GPU runs it."""
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import processes_with

from gnnperf import cli

ROOT = Path(__file__).resolve().parents[1]
# A graph that trains in milliseconds an epoch: the large-graph step's code
# without a large graph's time.
TINY_GRAPH = "synthetic:nodes=400,degree=4,features=16,classes=4"
# tools/ is no package: the check imports from there as gpu_check, as
# tools/gpu_check.sh runs it (and tools/under_load.py imports it).
sys.path.insert(0, str(ROOT / "tools"))
from gpu_check import asv_step, core, process, runs  # noqa: E402
from gpu_check import cli as check  # noqa: E402
from gpu_check import plan as check_plan  # noqa: E402
from gpu_check.plan import PLANS  # noqa: E402
from gpu_check.roofs import roofs_sanity  # noqa: E402


def in_process():
    """A runner that runs a step in this process, its output into the
    step's log: ``python -m gnnperf ...`` through ``cli.main``, the stack
    check through the check's own ``main`` (so a test's fakes apply)."""
    def run(argv, env, timeout, log, cwd):
        with open(log, "a") as out, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out):
            try:
                if argv[0] == str(core.SCRIPT):
                    return check.main(argv[1:])
                assert argv[:2] == ["-m", "gnnperf"], argv
                return cli.main(argv[2:])
            except SystemExit as exc:
                return exc.code
    return run


def fake_runner(calls, seconds=None, clock=None, code=1):
    """Records each step's argv and limit; takes ``seconds[key]`` of a fake
    clock; exits :obj:`code` writing nothing (judges then fail: no report)."""
    def run(argv, env, timeout, log, cwd):
        key = Path(log).stem
        calls.append((key, timeout))
        if clock is not None:
            clock[0] += (seconds or {}).get(key, 1.0)
        return code
    return run


@pytest.mark.xdist_group("two-ranks")  # its ddp step launches a rank
def test_the_two_calls_cpu_parts_run_every_step(tmp_path, monkeypatch):
    # The smallest sizes that still run each step's own code: one variant
    # on each graph, 4 epochs, a tiny graph as the large one, the doctor's
    # comparison cut to what is cheap. The doctor's compile check is left
    # out (its compiles cost more than the rest together; test_variants
    # checks compiling once across batch shapes on CPU).
    import gnnperf.doctor
    import gnnperf.variants
    from gnnperf.doctor import SKIP, Check
    monkeypatch.setattr(gnnperf.variants, "standard_variants", lambda: ["baseline"])
    monkeypatch.setattr(gnnperf.doctor, "EPOCHS", 4)
    monkeypatch.setattr(gnnperf.doctor, "AMP_EPOCHS", 4)
    monkeypatch.setattr(gnnperf.doctor.Doctor, "compile_once", lambda self: Check(
        "compile: no graph breaks, one graph", SKIP, reason="left out by this test"))
    sizes = ["--device", "cpu", "--cora-epochs", "4", "--large-graph", TINY_GRAPH,
             "--large-epochs", "4", "--variants", "baseline"]
    status = {}
    for call in ("call1", "call2"):
        out = tmp_path / call
        # No --budget-s: on a loaded machine the real clock could leave a step
        # (the budget's rule is test_the_budget_leaves_..., on a fake clock).
        code = check.main([*sizes, "--plan", call, "--out", str(out)],
                          runner=in_process())
        summary = json.loads((out / "gpu-check.json").read_text())
        assert code == 0 and summary["passed"] and summary["complete"], summary
        assert [step["key"] for step in summary["steps"]] == list(PLANS[call])
        status[call] = {step["key"]: step for step in summary["steps"]}
        for step in summary["steps"]:  # each step's log beside the summary
            assert step["status"] == "skipped" or (out / f"{step['key']}.log").is_file()
        assert (out / "gpu-check.md").read_text().startswith("# GPU check on cpu: PASSED")
    one, two = status["call1"], status["call2"]
    assert {key for key, step in one.items() if step["status"] == "pass"} == set(PLANS["call1"])
    assert {key: step["status"] for key, step in two.items()} == {
        "stack": "pass", "roofs": "pass", "sampler": "pass", "models": "skipped",
        "asv": "skipped"}
    assert two["models"]["reason"] == two["asv"]["reason"] == "CUDA only; this run is on CPU"
    # The stack check's figures; the one-rank gloo group (the path a
    # one-GPU machine runs on NCCL) with a measured all-reduce.
    assert one["stack"]["figures"]["versions"]["torch"]
    assert one["ddp"]["name"] == "ddp on 1 rank (gloo)"
    for variant in ("ddp", "sampled+ddp"):
        figures = one["ddp"]["figures"][variant]
        assert figures["world_size"] == 1 and figures["backend"] == "gloo"
        assert 0 < figures["allreduce_share"] < 1
    ddp = json.loads((tmp_path / "call1" / "ddp.json").read_text())
    assert ddp["config"]["world_size"] == 1 and ddp["config"]["backend"] == "gloo"
    for result in ddp["results"]:
        assert result["extra"]["scaling_efficiency"] == 1.0  # its own one-rank reference
    assert one["amp-fp16"]["figures"]["amp"]["amp_dtype"] == "float16"
    assert one["amp-bf16"]["figures"]["amp"]["amp_dtype"] == "bfloat16"
    assert set(one["variants-cora"]["figures"]) == set(one["variants-large"]["figures"]) == {
        "baseline", "roofs_sanity"}  # the roofs the run was held to, judged
    assert "accuracy not judged at 4 epochs" in one["variants-cora"]["reason"]
    doctor = json.loads((tmp_path / "call1" / "doctor.json").read_text())
    checks = {check["name"]: check["status"] for check in doctor["checks"]}
    from test_doctor import CUDA_ONLY
    assert {name for name, s in checks.items() if s == "skipped"} == CUDA_ONLY | {
        "compile: no graph breaks, one graph"}
    assert {"train baseline", "amp dtype and loss curve",
            "amp fp16 with GradScaler trains", "sampler invariants on cpu",
            "peak memory (CPU profiler memory events)"} <= {
        name for name, s in checks.items() if s == "pass"}
    assert "CUDA only" in one["doctor"]["reason"]  # the skipped checks, named
    assert two["roofs"]["figures"]["roofs_sanity"].endswith("no published figures here")
    assert two["sampler"]["figures"]["sampler"]["sampler_m_edges_per_s"] > 0


def test_only_skip_and_unknown_names(tmp_path, capsys):
    calls = []
    out = tmp_path / "check"
    # Keys, names and names' slugs all select; --skip takes away.
    assert check.main(["--device", "cpu", "--out", str(out), "--only",
                       "doctor,amp fp16,variants-on-cora,roofs", "--skip", "roofs"],
                      runner=fake_runner(calls)) == 1
    assert [key for key, _ in calls] == ["doctor", "variants-cora", "amp-fp16"]
    summary = json.loads((out / "gpu-check.json").read_text())
    assert [step["key"] for step in summary["steps"]] == ["doctor", "variants-cora", "amp-fp16"]
    calls.clear()
    assert check.main(["--device", "cpu", "--out", str(out), "--plan", "call2", "--skip",
                       "stack"], runner=fake_runner(calls)) == 1
    assert [key for key, _ in calls] == ["roofs", "sampler"]  # models, asv: CUDA only
    capsys.readouterr()
    for argv, fix in ((["--only", "doctor,nope"], "valid: stack, doctor, variants-cora"),
                      (["--skip", "gpu"], "valid: stack, doctor"),
                      (["--plan", "call1", "--only", "models"], "not in --plan call1"),
                      (["--budget-s", "3"], "give more than 5 s")):
        calls.clear()
        assert check.main(["--device", "cpu", "--out", str(tmp_path / "bad"), *argv],
                          runner=fake_runner(calls)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and fix in err, err
        assert not calls
    assert not (tmp_path / "bad").exists()


def test_the_budget_leaves_what_cannot_fit_names_it_and_caps_each_limit(tmp_path, monkeypatch,
                                                                       capsys):
    clock = [0.0]
    monkeypatch.setattr(check, "_clock", lambda: clock[0])
    calls = []
    # Expected on CPU: stack 6, ddp 10, amp 8 each, doctor 45, variants-cora
    # 35, variants-large 25; each takes its expected time here. Of 100 s, 95
    # are for steps: after stack, ddp and amp (32 s) 63 are left, enough for
    # the doctor (45); then 18: too few for either variants step.
    seconds = {"stack": 6, "ddp": 10, "amp-bf16": 8, "amp-fp16": 8, "doctor": 45,
               "variants-cora": 35, "variants-large": 25}
    out = tmp_path / "check"
    code = check.main(["--device", "cpu", "--out", str(out), "--plan", "call1",
                       "--budget-s", "100"], runner=fake_runner(calls, seconds, clock))
    assert code == 1
    assert [key for key, _ in calls] == ["stack", "ddp", "amp-bf16", "amp-fp16", "doctor"]
    # Each limit is what the budget had left, never the step's own 240 s.
    limits = dict(calls)
    assert limits["stack"] == pytest.approx(95) and limits["doctor"] == pytest.approx(63)
    summary = json.loads((out / "gpu-check.json").read_text())
    assert summary["left"] == ["variants-cora", "variants-large"]
    assert not summary["passed"] and summary["complete"]
    left = {step["key"]: step for step in summary["steps"] if step["status"] == "left"}
    assert left["variants-cora"]["reason"] == "expected ~35 s, 18 s of the budget left"
    assert summary["rerun"] == "tools/gpu_check.sh --device cpu --only variants-cora,variants-large"
    printed = capsys.readouterr().out
    assert "LEFT    variants on cora: expected ~35 s" in printed
    assert "left for the budget: variants-cora, variants-large" in printed
    table = (out / "gpu-check.md").read_text()
    assert "Left (not started: the budget): variants-cora, variants-large" in table
    # An earlier run's measured seconds replace the expected ones.
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"steps": [{"key": "variants-cora", "status": "pass",
                                              "seconds": 3.0}]}))
    calls.clear()
    clock[0] = 0.0
    check.main(["--device", "cpu", "--out", str(out), "--plan", "call1", "--budget-s", "100",
                "--expect-from", str(earlier)], runner=fake_runner(calls, seconds, clock))
    assert "variants-cora" in dict(calls) and "variants-large" not in dict(calls)


def test_out_defaults_to_the_runners_out_in_one_archive(tmp_path, monkeypatch):
    # A runner collects what its command writes under $OUT (some only a few
    # files): the summary, its table and one archive of every step's files,
    # each rewritten after every step.
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    (tmp_path / "out").mkdir()
    calls = []
    check.main(["--device", "cpu", "--plan", "call2"], runner=fake_runner(calls))
    assert sorted(os.listdir(tmp_path / "out")) == [
        "gpu-check-steps.tar.gz", "gpu-check.json", "gpu-check.md"]
    with tarfile.open(tmp_path / "out" / "gpu-check-steps.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["gpu-check/roofs.log", "gpu-check/sampler.log",
                                          "gpu-check/stack.log"]
    assert json.loads((tmp_path / "out" / "gpu-check.json").read_text())["packed"]
    # Without $OUT: ./gpu-check, each file as it is.
    monkeypatch.delenv("OUT")
    monkeypatch.chdir(tmp_path)
    check.main(["--device", "cpu", "--only", "roofs"], runner=fake_runner(calls))
    assert sorted(os.listdir(tmp_path / "gpu-check")) == ["gpu-check.json", "gpu-check.md",
                                                          "roofs.log"]


def test_the_stack_check_names_what_is_missing_and_what_it_skips(tmp_path, monkeypatch):
    real = core.probe
    gone = {"asv", "pymetis", "tabulate"}
    monkeypatch.setattr(core, "probe", lambda name: (
        (False, f"ModuleNotFoundError: No module named {name!r}") if name in gone
        else real(name)))
    calls = []
    base = fake_runner(calls, code=0)
    stack = in_process()

    def runner(argv, env, timeout, log, cwd):  # the real stack check, the rest faked
        return stack(argv, env, timeout, log, cwd) if Path(log).stem == "stack" else base(
            argv, env, timeout, log, cwd)
    out = tmp_path / "check"
    assert check.main(["--device", "cpu", "--out", str(out), "--only",
                       "stack,doctor,asv"], runner=runner) == 1
    steps = {step["key"]: step for step in json.loads(
        (out / "gpu-check.json").read_text())["steps"]}
    # A dependency of every gnnperf step: the stack check fails and names it.
    assert steps["stack"]["status"] == "fail"
    reason = steps["stack"]["reason"]
    assert reason.startswith("tabulate missing (ModuleNotFoundError")
    assert "pymetis (ModuleNotFoundError: No module named 'pymetis'): the cluster variants " \
           "are n/a" in reason
    assert "asv (ModuleNotFoundError: No module named 'asv'): skips asv" in reason
    assert "tabulate (ModuleNotFoundError: No module named 'tabulate'): skips doctor, asv" in reason
    # The doctor is skipped with the reason, not run to fail after minutes.
    assert steps["doctor"]["status"] == "skipped"
    assert steps["doctor"]["reason"] == "needs tabulate, not importable here; pip install them"
    assert steps["asv"]["reason"] == "CUDA only; this run is on CPU"
    assert [key for key, _ in calls] == []  # nothing ran past the stack check
    report = json.loads((out / "stack.json").read_text())
    assert report["modules"]["pymetis"]["ok"] is False and report["modules"]["torch"]["ok"]
    # On a GPU an asv that is missing skips the asv step, naming the bundle.
    plan = core.plan_for("cpu", out)
    plan.modules.update(dict.fromkeys(core.GNNPERF_NEEDS, True), asv=False, asv_runner=True)
    asv = next(step for step in check_plan.steps(plan) if step.key == "asv")
    assert process.skip_reason(dataclasses.replace(asv, cuda_only=False), plan) == (
        "needs asv, not importable here; install the wheel bundle tools/gpu_wheels.sh fetches "
        "(its header says how)")


def test_a_killed_check_leaves_every_finished_steps_files_whole(tmp_path):
    # The real script, killed (SIGKILL to its process group, as a command
    # runner at its limit does) in its second step: the first step's files,
    # the summary (naming the step it cut) and the archive are whole, and
    # the running step died with it.
    marker = f"gpu-check-kill-{os.getpid()}-{time.monotonic_ns()}"
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "TMPDIR": str(tmp_path), "PYTHONUNBUFFERED": "1",
           "GNNPERF_TEST_MARKER": marker, "PYTHON": sys.executable}  # this venv, activated or not
    proc = subprocess.Popen(["bash", str(ROOT / "tools" / "gpu_check.sh"), "--device", "cpu",
                             "--only", "stack,variants-cora"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    summary_path = out / "gpu-check.json"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if summary_path.is_file() and json.loads(summary_path.read_text())["steps"]:
                break
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.05)
        else:
            pytest.fail("the stack check did not finish in 60 s")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    summary = json.loads(summary_path.read_text())
    assert [step["key"] for step in summary["steps"]] == ["stack"]
    assert summary["steps"][0]["status"] == "pass"
    assert summary["running"] == "variants on cora" and not summary["complete"]
    assert (out / "gpu-check.md").read_text().startswith("# GPU check on cpu: RUNNING")
    with tarfile.open(out / "gpu-check-steps.tar.gz") as tar:
        files = {Path(name).name: tar.extractfile(name).read() for name in tar.getnames()}
    assert set(files) == {"stack.json", "stack.log"}
    assert json.loads(files["stack.json"])["modules"]["torch"]["ok"]
    assert files["stack.log"].startswith(b"$ python ")
    time.sleep(0.3)  # the step's process had SIGKILL on its parent's death
    assert not processes_with(marker)


def test_a_failing_step_fails_the_check_and_the_rest_still_run(tmp_path):
    ran = []

    def runner(argv, env, timeout, log, cwd):
        ran.append(argv)
        Path(log).write_text("RuntimeError: boom\n")  # no report, and this output
        return 1
    out = tmp_path / "check"
    assert check.main(["--device", "cpu", "--out", str(out), "--skip", "stack"],
                      runner=runner) == 1
    summary = json.loads((out / "gpu-check.json").read_text())
    assert not summary["passed"]
    doctor = summary["steps"][0]
    assert doctor["status"] == "fail" and "RuntimeError: boom" in doctor["reason"]
    skipped = [step["key"] for step in summary["steps"] if step["status"] == "skipped"]
    assert skipped == ["models", "asv"]  # CUDA-only
    assert len(ran) == len(summary["steps"]) - len(skipped)  # every other step ran
    assert "FAILED" in (out / "gpu-check.md").read_text().splitlines()[0]


def test_a_half_written_report_fails_its_step_and_the_rest_still_run(tmp_path):
    # A step killed mid-write leaves a JSON cut short: that step fails with
    # the reason, it does not end the check (every step after it still runs).
    ran = []

    def runner(argv, env, timeout, log, cwd):
        ran.append(argv)
        Path(log).write_text("killed\n")
        for value in argv:  # the step's report path, cut short
            if str(value).endswith(".json"):
                Path(value).write_text('{"checks": [')
        return 0
    out = tmp_path / "check"
    assert check.main(["--device", "cpu", "--out", str(out), "--only", "doctor,amp-bf16"],
                      runner=runner) == 1
    summary = json.loads((out / "gpu-check.json").read_text())
    assert [step["status"] for step in summary["steps"]] == ["fail", "fail"], summary["steps"]
    assert "unreadable doctor.json" in summary["steps"][0]["reason"]
    assert len(ran) == 2 and summary["complete"] and not summary["passed"]


def test_cuda_on_a_cpu_machine_is_one_line_before_any_step(tmp_path, capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert check.main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "use --device cpu" in err
    assert not os.listdir(tmp_path)


def test_a_step_runs_as_its_own_process_and_a_hung_one_is_killed_with_its_children(tmp_path):
    plan = core.plan_for("cpu", tmp_path)
    plan.modules.update(dict.fromkeys(core.GNNPERF_NEEDS, True))

    def judge(plan, proc):
        return core.StepResult("echo", "pass" if proc.stdout.endswith("hi\n") else "fail")
    done = process.run_step(core.Step("echo", "echo", lambda p: ["-c", "print('hi')"],
                                      judge), plan)
    assert done.status == "pass" and (tmp_path / "echo.log").read_text() == (
        "$ python -c print('hi')\nhi\n")
    # A step that hangs, with a child of its own: both are gone at the limit,
    # and what it printed is in its log.
    pid_file = tmp_path / "child.pid"
    hang = ["-c", "import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', "
                  "'import time; time.sleep(60)']); "
                  f"open({str(pid_file)!r}, 'w').write(str(child.pid)); print('started', "
                  "flush=True); time.sleep(60)"]
    hung = process.run_step(core.Step("hang", "hang", lambda p: hang, judge), plan,
                            limit_s=1)
    assert hung.status == "fail" and "timed out after 1 s" in hung.reason
    assert "started" in (tmp_path / "hang.log").read_text()
    child = Path("/proc") / pid_file.read_text() / "status"
    time.sleep(0.2)
    # Gone, or a zombie left for a container's init that reaps nothing: not running.
    assert not child.exists() or "(zombie)" in child.read_text()


def _run_doc(results, unavailable=None, variants=("baseline", "sparse"), models=("sage", "gat")):
    result = {"epoch_time": {"median": 0.01}, "step_peak_bytes": 2 ** 20, "test_acc": 0.8,
              "extra": {}, "compile_s": None}
    return {"complete": True, "config": {"variants": list(variants), "models": list(models),
                                         "epochs": 50},
            "results": [{**result, "variant": v, "model": m} for v, m in results],
            "unavailable": unavailable or {}}


def test_the_models_step_accepts_a_pair_that_cannot_combine_and_misses_no_other(tmp_path):
    # The CUDA-only models step's judge, on what `gnnperf run --model` writes:
    # an n/a row for sparse with GAT is right; a pair with no row is not.
    plan = core.plan_for("cpu", tmp_path)
    judge = runs.judge_run("models on cora", "models.json")
    pairs = [("baseline", "sage"), ("sparse", "sage"), ("baseline", "gat")]
    cannot = {"sparse [gat]": "sparse cannot run with model gat: attention ..."}
    (tmp_path / "models.json").write_text(json.dumps(_run_doc(pairs, cannot)))
    done = judge(plan, subprocess.CompletedProcess([], 0, "", ""))
    assert done.status == "pass", done.reason
    assert set(done.figures) == {"baseline [sage]", "sparse [sage]", "baseline [gat]"}
    (tmp_path / "models.json").write_text(json.dumps(_run_doc(pairs[:2], cannot)))
    done = judge(plan, subprocess.CompletedProcess([], 0, "", ""))
    assert done.status == "fail" and "baseline [gat]: no result" in done.reason


def test_an_na_passes_only_for_a_package_the_variant_declares_and_lacks(tmp_path):
    # Finding 9: a reason that mentions an install is not enough. cluster
    # declares pymetis: its n/a passes where pymetis is missing, fails where
    # it is importable; sampled declares nothing: its "pip install" n/a fails.
    plan = core.plan_for("cpu", tmp_path)
    judge = runs.judge_run("variants on cora", "run.json")

    def judged(unavailable, pymetis):
        plan.modules["pymetis"] = pymetis
        doc = _run_doc([("baseline", "gcn")], unavailable, list(unavailable) + ["baseline"],
                       ["gcn"])
        (tmp_path / "run.json").write_text(json.dumps(doc))
        return judge(plan, subprocess.CompletedProcess([], 0, "", ""))
    cluster = {"cluster": "cluster needs pymetis: pip install 'gnnperf[cluster]'"}
    assert judged(cluster, pymetis=False).status == "pass"
    found = judged(cluster, pymetis=True)
    assert found.status == "fail" and "it needs pymetis, all importable here" in found.reason
    found = judged({"sampled": "variant sampled: needs foo: pip install foo"}, pymetis=False)
    assert found.status == "fail"
    assert "not a declared n/a here: sampled declares no package it needs" in found.reason


@pytest.mark.parametrize("name, flops, copy, plausible, says", [
    ("NVIDIA H100 80GB HBM3", 50e12, 3.0e12, True, "75% of H100 SXM's 67, copy 3.00 TB/s = 90%"),
    ("NVIDIA H100 PCIe", 45e12, 1.8e12, True, "88% of H100 PCIe's 51"),
    ("NVIDIA H200", 60e12, 4.3e12, True, "= 90% of 4.80 TB/s: plausible"),
    ("NVIDIA H100 80GB HBM3", 0.5e12, 3.0e12, False, "IMPLAUSIBLE (outside 10%-110%)"),
    ("NVIDIA H100 80GB HBM3", 50e12, 5.0e12, False, "copy 5.00 TB/s = 149%"),
    ("NVIDIA A10", 20e12, 0.5e12, True, "no published figures here"),
])
def test_the_roofs_sanity_line(name, flops, copy, plausible, says):
    roofs = {"device": "cuda:0", "device_name": name, "peak_flops_per_s": flops,
             "stream_bytes_per_s": {str(2 ** 22): copy * 3, str(2 ** 30): copy}}
    ok, line = roofs_sanity(roofs)
    assert ok is plausible and says in line, line


def test_asv_without_git_gets_a_throwaway_commit_in_a_copy(tmp_path, monkeypatch):
    # asv labels results by commit; a runner's copy of the tree may have no
    # .git. The files asv reads are committed in a scratch copy; the tree is
    # untouched.
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("asv.conf.json", "pyproject.toml"):
        (tree / name).write_text((ROOT / name).read_text())
    for name in ("benchmarks", "gnnperf"):
        (tree / name).mkdir()
        (tree / name / "__init__.py").write_text("")
    root, commit, reason = asv_step.asv_commit(tree, tmp_path / "scratch")
    assert reason == "" and root == tmp_path / "scratch" / "asv-repo" and len(commit) == 40
    shown = subprocess.run(["git", "show", "--stat", "--format=%s", commit], cwd=root,
                           capture_output=True, text=True).stdout
    assert "benchmarks/__init__.py" in shown and "gnnperf/__init__.py" in shown
    assert sorted(os.listdir(tree)) == ["asv.conf.json", "benchmarks", "gnnperf", "pyproject.toml"]
    # In a checkout, its own HEAD; without git at all, a reason to skip.
    if (ROOT / ".git").exists():
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
        assert asv_step.asv_commit(ROOT, tmp_path) == (ROOT, head, "")
    monkeypatch.setattr(asv_step.shutil, "which", lambda name: None)
    _, commit, reason = asv_step.asv_commit(tree, tmp_path / "scratch")
    assert commit == "" and reason.startswith("no .git here and no git")
