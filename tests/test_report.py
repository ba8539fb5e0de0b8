"""The charts: every tick label readable (none overlaps another of its axis),
one marker per variant, one panel per variant's memory timeline."""
import itertools

import pytest

from gnnperf import report
from gnnperf.measure.runner import with_roofline
from gnnperf.measure.roofline import Roofs
from gnnperf.variants import standard_variants


ROOFS = Roofs("cpu", "test CPU", 1, "x", peak_flops_per_s=60e9,
              stream_bytes_per_s={2 ** 20: 40e9, 2 ** 28: 12e9},
              gather_bytes_per_s={2 ** 20: 30e9, 2 ** 28: 6e9}, measured_s=1.0)


@pytest.fixture
def results(trained):
    return [with_roofline(trained(variant), ROOFS) for variant in standard_variants()]


def _overlapping_labels(fig) -> list[tuple[str, str, str]]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            labels = [label for label in axis.get_ticklabels(which="both")
                      if label.get_visible() and label.get_text()]
            for a, b in itertools.combinations(labels, 2):
                if a.get_window_extent(renderer).overlaps(b.get_window_extent(renderer)):
                    found.append((ax.get_title(), a.get_text(), b.get_text()))
    return found


def test_no_two_tick_labels_of_an_axis_overlap(results):
    # A log axis labelled at every 1..9 x 10^k printed "0.40.5 0.60.70.80.91".
    race = report.time_to_accuracy(results)
    for figure in (report.comparison_figure(results, "cora", ROOFS, results, race),
                   report.timeline_figure(results, "cora")):
        assert _overlapping_labels(figure) == []


def test_every_variant_has_its_own_marker_and_a_panel(results):
    fig = report.comparison_figure(results, "cora")
    scatter = fig.axes[0]
    looks = {(tuple(c.get_facecolor()[0]), c.get_paths()[0].vertices.tobytes())
             for c in scatter.collections}
    assert len(scatter.collections) == len(looks) == len(results)
    legend = scatter.get_legend()
    assert legend is not None and legend.get_bbox_to_anchor().y1 < scatter.bbox.y0 + 1
    timeline = report.timeline_figure(results, "cora")
    assert sum(ax.get_visible() for ax in timeline.axes) == len(results)


def test_the_roofline_panel_draws_every_variant_under_the_roofs(results):
    fig = report.comparison_figure(results, "cora", ROOFS)
    panel = fig.axes[1]
    assert panel.get_visible() and panel.get_title().startswith("roofline: test CPU")
    points = panel.collections
    assert len(points) == len(results)
    peak = ROOFS.peak_flops_per_s / 1e9
    for point in points:  # achieved below the peak, each at its own look
        (x, y), = point.get_offsets()
        assert 0 < y <= peak and x > 0
    assert len({(tuple(p.get_facecolor()[0]), p.get_paths()[0].vertices.tobytes())
                for p in points}) == len(results)
    # Without roofs the panel is left out, not drawn empty.
    assert not report.comparison_figure(results, "cora").axes[1].get_visible()


def test_the_convergence_panel_draws_a_line_per_run_and_the_target(results):
    race = report.time_to_accuracy(results)
    fig = report.comparison_figure(results, "cora", ROOFS, convergence=results, target=race)
    panel = fig.axes[4]
    assert panel.get_title().startswith("convergence: validation accuracy against training time")
    assert panel.get_xscale() == "log" and panel.get_ylim() == (0, 1)
    runs = [line for line in panel.get_lines() if len(line.get_xdata()) > 2]
    assert len(runs) == len(results)
    target = [line for line in panel.get_lines() if list(line.get_ydata()) == [
        race.target.accuracy] * 2]
    assert len(target) == 1  # the target, drawn across
    # A marker where each run that reached the target first did.
    reached = sum(row.reached for row in race.rows)
    assert len(panel.collections) == reached > 0
    # The colours are the other panels': a variant looks the same everywhere.
    scatter = fig.axes[0]
    from matplotlib.colors import to_rgba
    assert tuple(scatter.collections[0].get_facecolor()[0]) == to_rgba(runs[0].get_color())
    # Without results that tracked their accuracy the figure keeps four panels.
    assert len(report.comparison_figure(results, "cora", ROOFS).axes) == 4
