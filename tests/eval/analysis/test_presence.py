"""The presence heatmap (`analysis/presence.py`) of predict's figure and the case report: every label when
there are few, the highest-peaking `MAX_ROWS` in label order when there are many (a triplets probe's 100)."""

from __future__ import annotations

import numpy as np

from plstitch_eval.analysis.presence import MAX_ROWS, presence_figure, top_rows


def test_few_labels_are_all_drawn_and_many_keep_the_highest_peaks_in_order() -> None:
    rng = np.random.default_rng(0)
    few = rng.random((5, 30))
    assert top_rows(few) == [0, 1, 2, 3, 4]
    many = rng.random((100, 30)) * 0.4
    hot = sorted(rng.choice(100, MAX_ROWS, replace=False).tolist())
    many[hot, 7] = 0.9 + 0.001 * np.arange(MAX_ROWS)  # these peak above every other row
    assert top_rows(many) == hot
    peaks = many.max(1)
    assert min(peaks[hot]) > max(np.delete(peaks, hot))


def test_the_figure_shows_the_chosen_rows_and_says_how_many_of_how_many() -> None:
    times = np.arange(30, dtype=np.float64)
    values = np.zeros((100, 30))
    values[[3, 50, 99], 10:20] = 0.8
    names = [f"label{k}" for k in range(100)]
    fig = presence_figure("case", times, names, values)
    axes = fig.axes[0]
    ticks = [t.get_text() for t in axes.get_yticklabels()]
    assert len(ticks) == MAX_ROWS and {"label3", "label50", "label99"} <= set(ticks)
    assert f"{MAX_ROWS} of 100 labels shown" in axes.get_title(loc="left")
    small = presence_figure("case", times, names[:4], values[:4])
    assert [t.get_text() for t in small.axes[0].get_yticklabels()] == names[:4]
    assert "shown" not in small.axes[0].get_title(loc="left")
