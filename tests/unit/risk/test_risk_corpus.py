"""The labeled corpus: every dangerous command flagged with its types, no benign one flagged."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

from harness.risk import TYPES, classify

CORPUS = Path(__file__).resolve().parents[2] / "data" / "risk_corpus.yaml"


def _load() -> list[dict]:
    entries = yaml.safe_load(CORPUS.read_text())
    for entry in entries:
        assert set(entry) <= {"cmd", "expect", "services", "cwd"}, entry
        assert set(entry["expect"]) <= set(TYPES), entry
    return entries


@cache
def _classified() -> list[tuple[dict, set[str]]]:
    return [(e, {r.type for r in classify(e["cmd"], services=e.get("services"),
                                          cwd=e.get("cwd"))}) for e in _load()]


def test_corpus_is_large_and_balanced():
    entries = _load()
    assert len(entries) >= 80
    assert sum(1 for e in entries if not e["expect"]) >= 30
    for kind in TYPES:
        assert sum(1 for e in entries if kind in e["expect"]) >= 6, kind


def test_precision_recall_per_type(capsys):
    rows = []
    for kind in TYPES:
        tp = fp = fn = 0
        for entry, got in _classified():
            expected = kind in entry["expect"]
            tp += expected and kind in got
            fp += not expected and kind in got
            fn += expected and kind not in got
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        rows.append(f"{kind:<20} {tp:>4} {fp:>4} {fn:>4} {precision:>9.2f} {recall:>7.2f}")
    with capsys.disabled():
        print(f"\n{'type':<20} {'tp':>4} {'fp':>4} {'fn':>4} {'precision':>9} {'recall':>7}")
        print("\n".join(rows))


def test_every_dangerous_command_is_flagged_with_its_types():
    missed = [(e["cmd"], sorted(set(e["expect"]) - got)) for e, got in _classified()
              if set(e["expect"]) - got]
    assert not missed


def test_no_unexpected_type_is_flagged():
    extra = [(e["cmd"], sorted(got - set(e["expect"]))) for e, got in _classified()
             if got - set(e["expect"])]
    assert not extra
