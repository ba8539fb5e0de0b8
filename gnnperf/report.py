"""Turns measured results into a table, a JSON document and a plot."""
from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Sequence

from tabulate import tabulate

from gnnperf.io import write_atomic
from gnnperf.measure.convergence import (DEFAULT_TARGET_SHARE, Convergence, TimeToAccuracy,
                                         compare_runs, test_at_best_val)
from gnnperf.measure.runner import SamplerThroughput, VariantResult, label_parts
from gnnperf.models import DEFAULT_MODEL

MIB = 2 ** 20


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def _monitored(result: VariantResult, metric: str) -> dict | None:
    """NVML mean/max of :obj:`metric`, or None (n/a) where nothing was sampled."""
    return (result.gpu_monitor or {}).get(metric)


def comparison_rows(results: Sequence[VariantResult], reference: str = "baseline") -> list[dict]:
    """One row per variant with ratios to :obj:`reference` of the same
    model (when it ran)."""
    references = {r.model: r for r in reversed(results) if r.variant == reference}
    rows = []
    for r in results:
        ref = references.get(r.model)
        speedup = _ratio(ref.epoch_time.median, r.epoch_time.median) if ref else None
        memory = _ratio(r.step_peak_bytes, ref.step_peak_bytes) if ref else None
        rows.append({
            "variant": r.variant,
            "model": r.model,
            "epoch_ms": r.epoch_time.median * 1e3,
            "spread_pct": r.epoch_time.spread * 100,
            "first_epoch_s": r.first_epoch_s,
            "compile_s": r.compile_s,
            "device_warmup_s": r.device_warmup_s,
            "setup_s": sum(r.setup_seconds.values()) if r.setup_seconds else None,
            "setup": "+".join(r.setup_seconds),
            "peak_mib": None if r.step_peak_bytes is None else r.step_peak_bytes / MIB,
            "test_acc": r.test_acc,
            "test_acc_best_val": (test_at_best_val(r.convergence["val_acc"], r.convergence["test_acc"])
                                  if r.convergence else None),
            "at_chance": r.at_chance,
            "speedup": speedup,
            "memory_ratio": memory,
            "gpu_util_pct": _monitored(r, "gpu_util_pct"),
            "gpu_power_w": _monitored(r, "gpu_power_w"),
            "world_size": r.extra.get("world_size"),
            "allreduce_share": r.extra.get("allreduce_share"),
            "scaling_efficiency": r.extra.get("scaling_efficiency"),
            "roofline_pct": (r.roofline or {}).get("roofline_pct"),
            "bound": (r.roofline or {}).get("bound"),
            "intensity_flop_per_byte": (r.roofline or {}).get("intensity_flop_per_byte"),
            "traffic_over_compulsory": (r.roofline or {}).get("traffic_over_compulsory"),
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
    table = [[row["variant"], row["model"],
              f"{row['epoch_ms']:.2f} ±{row['spread_pct']:.0f}%",
              f"{row['first_epoch_s']:.2f}",
              "" if row["setup_s"] is None else f"{row['setup_s']:.2f} ({row['setup']})",
              fmt(row["peak_mib"], ".1f"),
              f"{row['test_acc']:.3f}" + (" (at chance!)" if row["at_chance"] else ""),
              fmt(row["test_acc_best_val"], ".3f"),
              ratio(row["speedup"]),
              ratio(row["memory_ratio"]),
              "n/a" if row["roofline_pct"] is None
              else f"{row['roofline_pct']:.{1 if row['roofline_pct'] >= 1 else 2}f} "
                   f"({row['bound']})",
              fmt(row["traffic_over_compulsory"], ".1f"),
              mean_max(row["gpu_util_pct"], ".0f"),
              mean_max(row["gpu_power_w"], ".0f")]
             for row in rows]
    headers = ["variant", "model", "epoch ms (median ±IQR)", "first epoch s", "setup s", peak_header,
               "test acc (last epoch)", "test acc (best val)", f"speed-up vs {reference}", f"memory vs {reference}",
               "roofline % (bound)", "op traffic / compulsory", "GPU util % mean/max", "GPU W mean/max"]
    if any(row["world_size"] for row in rows):  # ddp variants ran: their columns
        headers += ["ranks", "all-reduce share", "scaling eff. (strong)"]
        for line, row in zip(table, rows):
            line += ["" if row["world_size"] is None else str(row["world_size"]),
                     fmt(row["allreduce_share"], ".0%") if row["world_size"] else "",
                     fmt(row["scaling_efficiency"], ".2f") if row["world_size"] else ""]
    not_measured = [(*label_parts(label), "failed", error)
                    for label, error in (failures or {}).items()]
    not_measured += [(*label_parts(label), "n/a", reason)
                     for label, reason in (unavailable or {}).items()]
    for variant, model, what, why in not_measured:
        table.append([variant, model, what, *[""] * 5, why[:60]] + [""] * (len(headers) - 9))
    if all(model == DEFAULT_MODEL for model in [r.model for r in results]
           + [row[1] for row in not_measured]):
        headers.pop(1)  # GCN alone: no model column
        for line in table:
            line.pop(1)
    text_note = ""
    if any(row["roofline_pct"] is not None for row in rows):
        text_note = ("roofline %: the time no implementation of a step can beat at this "
                     "machine's roofs (gnnperf roofs: its FLOPs at the peak, its compulsory "
                     "traffic, each memory touched once, at the copy bandwidth) over its median "
                     "time, at most 100; op traffic / compulsory: what its operators move one "
                     "by one over that (what fusing them could save)")
    notes = dict.fromkeys(r.roofline_note for r in results if r.roofline_note)
    if notes:  # n/a roofline figures say why, once
        text_note = "\n".join(([text_note] if text_note else []) + list(notes))
    text = tabulate(table, headers=headers, disable_numparse=True)
    if text_note:
        text += "\n" + text_note
    chance = [r for r in results if r.at_chance]
    if chance:
        text += "\n" + "\n".join(
            f"warning: {r.label} trained to chance: test accuracy {r.test_acc:.3f}, a "
            f"majority-class guess scores {r.chance_acc:.3f}" for r in chance)
    return text


def time_to_accuracy(results: Sequence[VariantResult], reference: str = "baseline",
                     target_acc: float | None = None,
                     share: float = DEFAULT_TARGET_SHARE) -> TimeToAccuracy | None:
    """The time to accuracy of every variant over its seeds' runs
    (:func:`~gnnperf.measure.convergence.compare_runs`); :obj:`None` when no
    result tracked its accuracy or no target can be set."""
    runs: dict[str, list] = {}
    for r in results:
        if r.convergence is not None:
            runs.setdefault(r.label, []).append(
                (r.seed, Convergence(**r.convergence), r.epoch_time.median))
    if not runs:
        return None
    return compare_runs(runs, reference, target_acc, share)


def format_time_to_accuracy(race: TimeToAccuracy) -> str:
    """The time-to-accuracy table and its one-line verdict: per variant the
    median seconds to the target over the seeds (one-off work included,
    evaluation not), their range, the seeds that reached it, the epoch and
    the test accuracy there; "not reached", never a time, where it was not."""
    def seconds(value: float | None) -> str:
        return "not reached" if value is None else f"{value:.2f}"

    table = []
    for row in sorted(race.rows, key=lambda r: (r.median_s is None, r.median_s or 0.0)):
        spread, epochs = row.spread, [e for e in row.epochs if e is not None]
        reached = row.median_s is not None  # a row not reached shows no figure of it
        table.append([row.label, seconds(row.median_s),
                      f"{spread[0]:.2f}-{spread[1]:.2f}" if reached and len(row.seeds) > 1
                      else "",
                      f"{row.reached}/{len(row.seeds)}",
                      str(statistics.median_low(epochs)) if reached else "",
                      f"{row.median_test_acc:.3f}" if reached else "",
                      f"{row.epoch_s * 1e3:.2f}", f"{row.setup_s:.2f}", f"{row.eval_s:.2f}"])
    headers = ["variant", "s to target (median)", "range s", "reached", "epoch",
               "test acc there", "epoch ms", "one-off s", "eval s (apart)"]
    text = tabulate(table, headers=headers, disable_numparse=True)
    return f"target: {race.target.rule}\n{text}\n{race.verdict()}"


def format_sampler(result: SamplerThroughput, dataset) -> str:
    """Sampler throughput as a small table."""
    rows = [["sampler alone", f"{result.sampler_edges_per_s / 1e6:.2f}",
             f"{result.sampler_batch_ms.median:.2f} ±{result.sampler_batch_ms.spread * 100:.0f}%"],
            ["loader (+ features, labels)", f"{result.loader_edges_per_s / 1e6:.2f}",
             f"{result.loader_batch_ms.median:.2f} ±{result.loader_batch_ms.spread * 100:.0f}%"]]
    title = (f"{result.dataset}: {dataset.num_nodes} nodes, {dataset.num_edges} edges; "
             f"fanout {result.fanout}, batch {result.batch_size}, {result.batches} batches, "
             f"{result.edges_per_batch:.0f} sampled edges per batch, {result.device}")
    text = title + "\n" + tabulate(rows, headers=["", "M edges/s", "ms per batch (median ±IQR)"],
                                   disable_numparse=True)
    if result.loader_roofline is not None:
        work, roof = result.loader_work, result.loader_roofline
        text += (f"\nloader: {work['bytes_moved'] / MIB:.1f} MiB moved per batch "
                 f"({work['gather_bytes'] / max(work['bytes_moved'], 1):.0%} by gathers), "
                 f"{roof['achieved_bytes_per_s'] / 1e9:.2f} GB/s: {result.gather_roof_pct:.0f}% of "
                 f"the gather roof ({roof['gather_bytes_per_s'] / 1e9:.1f} GB/s at its "
                 f"{work['working_set_bytes'] / MIB:.0f} MiB working set), roofline "
                 f"{roof['roofline_pct']:.0f}% ({roof['bound']})")
    parts = result.loader_parts
    if parts is not None:
        gather = ""
        if parts.feature_gather_ms is not None:
            rate = ("" if parts.feature_gather_bytes_per_s is None
                    else f" ({parts.feature_gather_bytes_per_s / 1e9:.2f} GB/s"
                    + ("" if parts.feature_gather_roof_pct is None
                       else f", {parts.feature_gather_roof_pct:.0f}% of the gather roof") + ")")
            gather = f", feature gather {parts.feature_gather_ms.median:.2f}{rate}"
        text += (f"\nloader batch, median ms by part: sampling {parts.sampling_ms.median:.2f}"
                 f"{gather}, the rest {parts.rest_ms.median:.2f}")
    return text


def to_json(results: Sequence[VariantResult], env: dict, config: dict,
            failures: dict[str, str] | None = None, reference: str = "baseline",
            complete: bool = True, unavailable: dict[str, str] | None = None,
            accuracy: TimeToAccuracy | None = None) -> str:
    """The run as one JSON document; :obj:`complete` is False while variants
    of ``config["variants"]`` are still to run (or the run was cut short).
    ``failures`` failed; ``unavailable`` cannot run here (the reason names
    the fix, e.g. an optional dependency to install). ``results`` holds
    every seed's runs, ``comparison`` the first seed's rows,
    ``time_to_accuracy`` the runs' time to the target (:obj:`None` until
    the run is complete)."""
    seeds = [r.seed for r in results]
    first = [r for r in results if r.seed == seeds[0]] if seeds else []
    from gnnperf.schemas import SCHEMA_VERSION
    return json.dumps({
        "schema_version": SCHEMA_VERSION,  # the format: gnnperf/schemas/run.json
        "complete": complete,
        "environment": env,
        "config": config,
        "results": [r.to_dict() for r in results],
        "reference": reference,
        "comparison": comparison_rows(first, reference),
        "failures": failures or {},
        "unavailable": unavailable or {},
        "time_to_accuracy": accuracy.to_dict() if accuracy is not None else None,
    }, indent=2)


def _figure_bytes(fig, path: str | os.PathLike) -> bytes:
    import io

    import matplotlib.pyplot as plt
    buffer = io.BytesIO()
    # "tight": the legend below the scatter is part of the picture.
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png", bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# Okabe and Ito's colour-blind-safe palette (their yellow left out: too pale
# on white), crossed with markers so that no two of 77 variants look alike.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000")
MARKERS = "osD^vP*Xh<>"


def style(index: int) -> dict:
    """Colour and marker of the :obj:`index`-th variant of a chart."""
    return {"color": COLOURS[index % len(COLOURS)], "marker": MARKERS[index % len(MARKERS)]}


def _sparse_log_ticks(axis) -> None:
    """Labels at 1, 2 and 5 times powers of ten only, unlabelled minor ticks:
    on a log axis every label at 1..9 x 10^k overlaps its neighbours."""
    import matplotlib.ticker
    axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_locator(matplotlib.ticker.LogLocator(base=10, subs="auto"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def comparison_figure(results: Sequence[VariantResult], title: str = "", roofs=None,
                      convergence: Sequence[VariantResult] = (),
                      target: TimeToAccuracy | None = None):
    """The comparison as one figure: time per epoch against peak memory (log
    axes, one marker per variant, the legend outside the data), the roofline
    (:func:`roofline_axes`, where the results have roofline figures), and the
    hands-on chapter's summary chart below (time per epoch and peak memory
    per variant as bars on linear axes from zero: a bar's height is its
    value, so twice as tall is twice as slow; the scatter above keeps log
    axes, where points, not bar lengths, carry the values); with
    :obj:`convergence` (results that tracked their accuracy, any seeds),
    the validation accuracy against training time below them
    (:func:`convergence_axes`)."""
    plt = _pyplot()
    points = [r for r in results if r.step_peak_bytes]
    curves = [r for r in convergence if r.convergence]
    rows = 3 if curves else 2
    fig = plt.figure(figsize=(17, 13 + 7 * (rows == 3)), dpi=100)
    grid = fig.add_gridspec(rows, 2, height_ratios=[1.25, 1, 1.1][:rows])
    ax, ax_roof = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    ax_time, ax_memory = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    if curves:
        convergence_axes(fig.add_subplot(grid[2, :]), [r.label for r in points], curves, target)
    for index, r in enumerate(points):
        ax.scatter(r.step_peak_bytes / MIB, r.epoch_time.median * 1e3, s=70,
                   edgecolors="black", linewidths=0.5, **style(index),
                   label=f"{r.label} (acc {r.test_acc:.3f})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    on_cuda = any(r.device.startswith("cuda") for r in points)
    memory_label = ("CUDA peak memory per step (MiB)" if on_cuda
                    else "step peak above start, torch CPU tensors (MiB)")
    ax.set_xlabel(memory_label)
    ax.set_ylabel("time per epoch, median (ms)")
    ax.set_title(f"time against memory: {title}" if title else "time against memory")
    ax.grid(True, which="both", alpha=0.3)
    ax.margins(0.15)
    for axis in (ax.xaxis, ax.yaxis):
        _sparse_log_ticks(axis)
    # Below the axes, not on them: variants often sit where a legend would.
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2,
              frameon=False)
    if roofs is not None and any(r.roofline for r in points):
        roofline_axes(ax_roof, points, roofs)
    else:
        ax_roof.set_visible(False)

    names = [r.label for r in points]
    for bars_ax, values, label, colour in (
            (ax_time, [r.epoch_time.median * 1e3 for r in points], "time per epoch (ms)",
             COLOURS[0]),
            (ax_memory, [r.step_peak_bytes / MIB for r in points], memory_label, COLOURS[1])):
        bars = bars_ax.bar(range(len(points)), values, color=colour, alpha=0.85)
        # 3 significant digits, without e-notation past 1000 ("2371", not "2.37e+03"):
        # the label names a bar too short to read against the axis.
        bars_ax.bar_label(bars, labels=[f"{v:.3g}" if v < 1000 else f"{v:.0f}" for v in values],
                          fontsize=7)
        # Linear from zero: a log axis starting above zero makes two close epoch
        # times look several-fold apart. Headroom above the tallest bar for its label.
        bars_ax.set_yscale("linear")
        bars_ax.set_ylim(0, max(values, default=1) * 1.1 or 1)
        # Upright names: slanted ones' boxes overlap their neighbours'.
        bars_ax.set_xticks(range(len(points)), names, rotation=90, fontsize=8)
        bars_ax.set_ylabel(label)
        bars_ax.grid(True, axis="y", alpha=0.3)
    ax_time.set_title("time per epoch per variant")
    ax_memory.set_title("peak memory per variant")
    fig.tight_layout()
    return fig


def convergence_axes(ax, order: Sequence[str], curves: Sequence[VariantResult],
                     target: TimeToAccuracy | None) -> None:
    """Validation accuracy against training seconds (log axis: one-off work
    included, evaluation not) per variant, each seed's run a line in the
    variant's colour (the colours of :obj:`order`, the other panels'), the
    point where it first reached the target marked, the target drawn."""
    labels = list(dict.fromkeys([*order, *(r.label for r in curves)]))
    named: set[str] = set()
    for r in curves:
        curve = Convergence(**r.convergence)
        look = style(labels.index(r.label))
        ax.plot(curve.elapsed(), curve.val_acc, lw=1.3, color=look["color"], alpha=0.85,
                label=None if r.label in named else r.label)
        named.add(r.label)
        hit = curve.reached(target.target.accuracy) if target is not None else None
        if hit is not None:
            ax.scatter(hit.seconds, curve.val_acc[hit.epoch - 1], s=60, zorder=3,
                       edgecolors="black", linewidths=0.5, **look)
    if target is not None:
        ax.axhline(target.target.accuracy, color="0.3", ls="--", lw=1)
        ax.annotate(f"target: {target.target.rule}", (0.01, target.target.accuracy),
                    xycoords=("axes fraction", "data"), fontsize=8, color="0.2",
                    xytext=(0, 4), textcoords="offset points")
    ax.set_xscale("log")
    _sparse_log_ticks(ax.xaxis)
    ax.set_xlabel("training seconds (one-off work counted at the start; evaluation apart)")
    ax.set_ylabel("validation accuracy")
    ax.set_ylim(0, 1)
    seeds = len({r.seed for r in curves})
    ax.set_title("convergence: validation accuracy against training time"
                 + (f" ({seeds} seeds, a line each; a marker where it first reaches the target)"
                    if seeds > 1 else " (a marker where it first reaches the target)"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4,
              frameon=False)


def roofline_axes(ax, points: Sequence[VariantResult], roofs) -> None:
    """The roofline on :obj:`ax`: each variant's step at its arithmetic
    intensity (FLOPs per compulsory byte) and achieved FLOP/s, a thin line
    up to the bound its own roofs set (its headroom), and the machine's
    roofs: peak GEMM FLOP/s and the copy bandwidth from DRAM and from cache
    (:class:`~gnnperf.measure.roofline.Roofs`), the roofs the bound uses."""
    drawn = [(index, r) for index, r in enumerate(points) if r.roofline]
    # Steps without FLOPs (intensity 0) have no place on a log axis: not drawn.
    drawn = [(index, r) for index, r in drawn if r.roofline["intensity_flop_per_byte"] > 0]
    intensities = [r.roofline["intensity_flop_per_byte"] for _, r in drawn] or [1.0]
    low, high = min(intensities) / 4, max(max(intensities) * 4, 2 * roofs.peak_flops_per_s
                                           / max(roofs.stream_bytes_per_s.values()))
    span = [low * (high / low) ** (i / 64) for i in range(65)]
    dram = max(roofs.stream_bytes_per_s)
    peak = roofs.peak_flops_per_s / 1e9  # GFLOP/s: readable tick labels
    # Named at the left edge, where the data (GCN steps' intensities) rarely
    # is, above their lines.
    ceilings = (("copy from cache", max(roofs.stream_bytes_per_s.values()), ":", 4),
                ("copy from DRAM", roofs.stream_bytes_per_s[dram], "-", 4))
    for name, bandwidth, line, offset in ceilings:
        slope = bandwidth / 1e9
        ax.plot(span, [min(peak, i * slope) for i in span], line, color="0.35", lw=1.2)
        at = low * 1.15
        ax.annotate(f"{name} {slope:.0f} GB/s", (at, at * slope), fontsize=7, color="0.2",
                    xytext=(2, offset), textcoords="offset points")
    ax.annotate(f"peak fp32 GEMM {peak:.0f} GFLOP/s", (high, peak), fontsize=7, color="0.2",
                ha="right", xytext=(0, 4), textcoords="offset points")
    for index, r in drawn:
        roof = r.roofline
        achieved = roof["achieved_flops_per_s"] / 1e9
        bound = achieved * 100 / roof["roofline_pct"]
        ax.plot([roof["intensity_flop_per_byte"]] * 2, [achieved, bound], lw=0.8,
                color=style(index)["color"], alpha=0.6)
        pct = roof["roofline_pct"]
        ax.scatter(roof["intensity_flop_per_byte"], achieved, s=70, edgecolors="black",
                   linewidths=0.5, zorder=3, **style(index),
                   label=f"{r.label}: {pct:.{1 if pct >= 1 else 2}f}% of its bound "
                         f"({roof['bound']})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_xlabel("arithmetic intensity (FLOPs per compulsory byte: each memory the step "
                  "touches, once)")
    ax.set_ylabel("achieved GFLOP/s per step")
    ax.set_title(f"roofline: {roofs.device_name}, {roofs.threads} thread(s); a line up to "
                 f"each variant's bound")
    ax.grid(True, which="both", alpha=0.3)
    for axis in (ax.xaxis, ax.yaxis):
        _sparse_log_ticks(axis)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2,
              frameon=False)


def plot(results: Sequence[VariantResult], path: str | os.PathLike, title: str = "",
         roofs=None, convergence: Sequence[VariantResult] = (),
         target: TimeToAccuracy | None = None) -> int:
    """Writes :func:`comparison_figure`; returns the number of variants drawn."""
    figure = comparison_figure(results, title, roofs, convergence, target)
    write_atomic(path, _figure_bytes(figure, path))
    return sum(1 for r in results if r.step_peak_bytes)


def _timeline_series(result: VariantResult) -> tuple[list[int], str] | None:
    timeline = result.memory_timeline
    if timeline.get("step_peak_bytes"):
        return timeline["step_peak_bytes"], (
            "CUDA allocated peak" if timeline.get("allocated_bytes") else "RSS peak")
    if timeline.get("rss_bytes"):
        return timeline["rss_bytes"], "RSS"
    return None


def timeline_figure(results: Sequence[VariantResult], title: str = ""):
    """Memory of every warm-up step (the steps the timeline probes, off the
    clock) above the variant's first step against the fraction of them, one
    small panel per variant (their scales differ by orders of magnitude),
    each with its own y axis."""
    plt = _pyplot()
    drawn = [(r, found) for r in results if (found := _timeline_series(r)) is not None]
    columns = min(4, max(len(drawn), 1))
    rows = max(1, -(-len(drawn) // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.6 * rows), dpi=110,
                             squeeze=False)
    for index, (r, (series, what)) in enumerate(drawn):
        ax = axes[index // columns][index % columns]
        start = series[0]
        steps = len(series)
        ax.plot([(i + 1) / steps for i in range(steps)], [(v - start) / MIB for v in series],
                lw=1.4, color=style(index)["color"])
        ax.set_title(f"{r.label}: {what} {series[0] / MIB:.0f} MiB at step 1", fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.set_xlim(0, 1)
        # At least 1 MiB of y range, 0 included: each panel has its own scale,
        # and a 0.01 MiB rise must not fill a panel as a 10 MiB one does.
        low, high = ax.get_ylim()
        low = min(low, 0.0)
        ax.set_ylim(low, max(high, low + 1.0))
        ax.yaxis.get_major_locator().set_params(nbins=4)
        if index + columns >= len(drawn):  # the lowest panel of its column
            ax.set_xlabel("fraction of the warm-up steps", fontsize=8)
    for index in range(len(drawn), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    for row in axes:
        row[0].set_ylabel("MiB above step 1", fontsize=8)
    device = "CUDA" if any(r.memory_timeline.get("allocated_bytes") for r, _ in drawn) \
        else "process RSS (CPU)"
    fig.suptitle(title or f"memory over training, {device}", fontsize=10)
    fig.tight_layout()
    return fig


def plot_timeline(results: Sequence[VariantResult], path: str | os.PathLike,
                  title: str = "") -> int:
    """Writes :func:`timeline_figure`; returns the number of panels drawn."""
    write_atomic(path, _figure_bytes(timeline_figure(results, title), path))
    return sum(1 for r in results if _timeline_series(r) is not None)
