"""The HTML report: chart contents and ordering (the browser test checks rendering)."""

from __future__ import annotations

import re

from analysis_fixtures import check, make_record

from analysis.charts import _ticks
from analysis.pipeline import analyze
from analysis.report import build_html


def run_records() -> list[dict]:
    out = []
    for agent, rewards, cost in (("strong", {"easy": 1.0, "mid": 0.5, "hard": 0.2}, 2.0),
                                 ("weak", {"easy": 0.8, "mid": 0.1}, 0.5)):
        for task, reward in rewards.items():
            checks = [check(f"{task} works", reward >= 0.5), check("fix survives restart", True),
                      check("stale marker removed", reward == 1.0)]
            out.append(make_record(task, agent=agent, reward=reward, checks=checks,
                                   cost_usd=cost))
    return out


def test_heatmap_ordered_like_figure_2(write_run):
    html = build_html(analyze([write_run(run_records())]))
    heatmap = re.search(r'<svg class="chart" id="heatmap".*?</svg>', html, re.S).group(0)
    assert heatmap.count('class="mark cell"') == 6
    rows = re.findall(r'text-anchor="end">([a-z]+) \(L4\)</text>', heatmap)
    assert rows == ["easy", "mid", "hard"]  # by mean across configurations
    columns = re.findall(r'rotate\(-35[^>]*>([a-z]+)</text>', heatmap)
    assert columns == ["strong", "weak"]  # by score
    assert "no trial (counts 0)" in heatmap  # weak never ran "hard"


def test_funnel_scatter_and_drilldown(write_run):
    html = build_html(analyze([write_run(run_records())], weights_mode="derive"))
    funnel = re.search(r'id="funnel".*?</svg>', html, re.S).group(0)
    assert funnel.count('class="mark bar"') == 3
    assert "Functional" in funnel and "Cleanup" in funnel
    scatter = re.search(r'id="scatter".*?</svg>', html, re.S).group(0)
    assert scatter.count('class="mark point"') == 2
    assert 'class="frontier"' in scatter
    assert html.count("<details><summary>") == 3
    assert "w_c" in html and "p_c" in html and "stale marker removed" in html


def test_ticks_cover_the_range():
    assert _ticks(7.15) == [0, 2, 4, 6, 8]
    assert _ticks(0.0) == [0.0, 1.0]
    assert _ticks(0.3)[-1] >= 0.3
