"""Turns measured results into a table, a JSON document and a plot."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Sequence

from tabulate import tabulate

from gnnperf.measure import SamplerThroughput, VariantResult

MIB = 2 ** 20


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def _monitored(result: VariantResult, metric: str) -> dict | None:
    """NVML mean/max of :obj:`metric`, or None (n/a) where nothing was sampled."""
    return (result.gpu_monitor or {}).get(metric)


def comparison_rows(results: Sequence[VariantResult], reference: str = "baseline") -> list[dict]:
    """One row per variant with ratios to :obj:`reference` (when it ran)."""
    ref = next((r for r in results if r.variant == reference), None)
    rows = []
    for r in results:
        speedup = _ratio(ref.epoch_time.median, r.epoch_time.median) if ref else None
        memory = _ratio(r.step_peak_bytes, ref.step_peak_bytes) if ref else None
        rows.append({
            "variant": r.variant,
            "epoch_ms": r.epoch_time.median * 1e3,
            "spread_pct": r.epoch_time.spread * 100,
            "first_epoch_s": r.first_epoch_s,
            "compile_s": r.compile_s,
            "device_warmup_s": r.device_warmup_s,
            "setup_s": sum(r.setup_seconds.values()) if r.setup_seconds else None,
            "setup": "+".join(r.setup_seconds),
            "peak_mib": None if r.step_peak_bytes is None else r.step_peak_bytes / MIB,
            "test_acc": r.test_acc,
            "at_chance": r.at_chance,
            "speedup": speedup,
            "memory_ratio": memory,
            "gpu_util_pct": _monitored(r, "gpu_util_pct"),
            "gpu_power_w": _monitored(r, "gpu_power_w"),
            "world_size": r.extra.get("world_size"),
            "allreduce_share": r.extra.get("allreduce_share"),
            "scaling_efficiency": r.extra.get("scaling_efficiency"),
        })
    return rows


def format_table(results: Sequence[VariantResult], failures: dict[str, str] | None = None,
                 reference: str = "baseline", unavailable: dict[str, str] | None = None) -> str:
    """The summary table: n/a marks what cannot be measured here (with the
    reason), never a zero; a failure says "failed" with its error; an
    accuracy no better than chance is marked."""
    def fmt(value, spec):
        return "n/a" if value is None else format(value, spec)

    def mean_max(value, spec):
        return "n/a" if value is None else f"{value['mean']:{spec}} / {value['max']:{spec}}"

    def ratio(value):
        # Three decimals below 0.1: a 0.005x memory ratio must not read 0.00x.
        return "n/a" if value is None else f"{value:.{2 if value >= 0.1 else 3}f}x"

    on_cuda = any(r.device.startswith("cuda") for r in results)
    peak_header = "CUDA peak MiB" if on_cuda else "step peak MiB (CPU)"
    rows = comparison_rows(results, reference)
    table = [[row["variant"],
              f"{row['epoch_ms']:.2f} ±{row['spread_pct']:.0f}%",
              f"{row['first_epoch_s']:.2f}",
              "" if row["setup_s"] is None else f"{row['setup_s']:.2f} ({row['setup']})",
              fmt(row["peak_mib"], ".1f"),
              f"{row['test_acc']:.3f}" + (" (at chance!)" if row["at_chance"] else ""),
              ratio(row["speedup"]),
              ratio(row["memory_ratio"]),
              mean_max(row["gpu_util_pct"], ".0f"),
              mean_max(row["gpu_power_w"], ".0f")]
             for row in rows]
    headers = ["variant", "epoch ms (median ±IQR)", "first epoch s", "setup s", peak_header,
               "test acc", f"speed-up vs {reference}", f"memory vs {reference}",
               "GPU util % mean/max", "GPU W mean/max"]
    if any(row["world_size"] for row in rows):  # ddp variants ran: their columns
        headers += ["ranks", "all-reduce share", "scaling eff. (strong)"]
        for line, row in zip(table, rows):
            line += ["" if row["world_size"] is None else str(row["world_size"]),
                     fmt(row["allreduce_share"], ".0%") if row["world_size"] else "",
                     fmt(row["scaling_efficiency"], ".2f") if row["world_size"] else ""]
    for variant, error in (failures or {}).items():
        table.append([variant, "failed", *[""] * 5, error[:60]] + [""] * (len(headers) - 8))
    for variant, reason in (unavailable or {}).items():
        table.append([variant, "n/a", *[""] * 5, reason[:60]] + [""] * (len(headers) - 8))
    text = tabulate(table, headers=headers, disable_numparse=True)
    chance = [r for r in results if r.at_chance]
    if chance:
        text += "\n" + "\n".join(
            f"warning: {r.variant} trained to chance: test accuracy {r.test_acc:.3f}, a "
            f"majority-class guess scores {r.chance_acc:.3f}" for r in chance)
    return text


def format_sampler(result: SamplerThroughput, data) -> str:
    """Sampler throughput as a small table."""
    rows = [["sampler alone", f"{result.sampler_edges_per_s / 1e6:.2f}",
             f"{result.sampler_batch_ms.median:.2f} ±{result.sampler_batch_ms.spread * 100:.0f}%"],
            ["loader (+ features, labels)", f"{result.loader_edges_per_s / 1e6:.2f}",
             f"{result.loader_batch_ms.median:.2f} ±{result.loader_batch_ms.spread * 100:.0f}%"]]
    title = (f"{result.dataset}: {data.num_nodes} nodes, {data.edge_index.size(1)} edges; "
             f"fanout {result.fanout}, batch {result.batch_size}, {result.batches} batches, "
             f"{result.edges_per_batch:.0f} sampled edges per batch, {result.device}")
    return title + "\n" + tabulate(rows, headers=["", "M edges/s", "ms per batch (median ±IQR)"],
                                   disable_numparse=True)


def write_atomic(path: str | os.PathLike, payload: bytes) -> None:
    """Writes via a temporary file and a rename, so a failure leaves no half file."""
    path = Path(path)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def to_json(results: Sequence[VariantResult], env: dict, config: dict,
            failures: dict[str, str] | None = None, reference: str = "baseline",
            complete: bool = True, unavailable: dict[str, str] | None = None) -> str:
    """The run as one JSON document; :obj:`complete` is False while variants
    of ``config["variants"]`` are still to run (or the run was cut short).
    ``failures`` failed; ``unavailable`` cannot run here (the reason names
    the fix, e.g. an optional dependency to install)."""
    return json.dumps({
        "complete": complete,
        "environment": env,
        "config": config,
        "results": [r.to_dict() for r in results],
        "reference": reference,
        "comparison": comparison_rows(results, reference),
        "failures": failures or {},
        "unavailable": unavailable or {},
    }, indent=2)


def _figure_bytes(fig, path: str | os.PathLike) -> bytes:
    import io

    import matplotlib.pyplot as plt
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(fig)
    return buffer.getvalue()


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _plain_log_ticks(axis) -> None:
    import matplotlib.ticker
    plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}")
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain)


def plot(results: Sequence[VariantResult], path: str | os.PathLike, title: str = "") -> int:
    """The comparison as one figure: time per epoch against peak memory (log
    axes, one labelled point per variant), and the hands-on chapter's summary
    chart beside it (time per epoch and peak memory per variant as bars, log
    axes). Returns the number of variants drawn."""
    plt = _pyplot()
    points = [r for r in results if r.step_peak_bytes]
    fig, (ax, ax_time, ax_memory) = plt.subplots(1, 3, figsize=(18, 5.5), dpi=110,
                                                 gridspec_kw={"width_ratios": [1.3, 1, 1]})
    markers = "osD^vP*Xh<>"
    for index, r in enumerate(points):
        # A legend rather than annotations: variants often sit on top of each other.
        ax.scatter(r.step_peak_bytes / MIB, r.epoch_time.median * 1e3, s=70,
                   marker=markers[index % len(markers)], alpha=0.85,
                   label=f"{r.variant} (acc {r.test_acc:.3f})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    on_cuda = any(r.device.startswith("cuda") for r in points)
    memory_label = ("CUDA peak memory per step (MiB)" if on_cuda
                    else "step peak above start, torch CPU tensors (MiB)")
    ax.set_xlabel(memory_label)
    ax.set_ylabel("time per epoch, median (ms)")
    ax.set_title(title or "GCN training variants")
    ax.grid(True, which="both", alpha=0.3)
    ax.margins(0.25)
    for axis in (ax.xaxis, ax.yaxis):
        _plain_log_ticks(axis)
    ax.legend(fontsize=8, loc="best")

    names = [r.variant for r in points]
    for bars_ax, values, label, colour in (
            (ax_time, [r.epoch_time.median * 1e3 for r in points], "time per epoch (ms)",
             "tab:blue"),
            (ax_memory, [r.step_peak_bytes / MIB for r in points], memory_label, "tab:orange")):
        bars = bars_ax.bar(range(len(points)), values, color=colour, alpha=0.85)
        bars_ax.bar_label(bars, labels=[f"{v:.3g}" for v in values], fontsize=7)
        bars_ax.set_yscale("log")
        bars_ax.set_xticks(range(len(points)), names, rotation=40, ha="right", fontsize=8)
        bars_ax.set_ylabel(label)
        bars_ax.grid(True, axis="y", which="both", alpha=0.3)
        _plain_log_ticks(bars_ax.yaxis)
    ax_time.set_title("time per epoch per variant")
    ax_memory.set_title("peak memory per variant")
    write_atomic(path, _figure_bytes(fig, path))
    return len(points)


def plot_timeline(results: Sequence[VariantResult], path: str | os.PathLike,
                  title: str = "") -> int:
    """Peak memory of every training step against the training iteration,
    one line per variant (the tutorial's chart: full batch climbing to its
    peak, mini-batches staying low). CUDA: ``max_memory_allocated`` per step;
    CPU: the process's RSS high-water mark per step (RSS after the step where
    the peak cannot be reset). Returns the number of lines drawn."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    drawn = 0
    on_cuda = False
    for r in results:
        timeline = r.memory_timeline
        series = timeline.get("step_peak_bytes") or timeline.get("rss_bytes")
        if not series:
            continue
        on_cuda = on_cuda or bool(timeline.get("allocated_bytes"))
        ax.plot(range(1, len(series) + 1), [v / MIB for v in series], lw=1.4,
                label=f"{r.variant} (peak {max(series) / MIB:.0f} MiB)")
        drawn += 1
    ax.set_xlabel("training iteration (optimiser step)")
    ax.set_ylabel("CUDA peak memory allocated per step (MiB)" if on_cuda
                  else "process RSS peak per step (MiB)")
    ax.set_title(title or "memory over training iterations")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    write_atomic(path, _figure_bytes(fig, path))
    return drawn
