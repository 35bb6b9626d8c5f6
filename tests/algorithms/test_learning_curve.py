"""The learning-curve PNG: whole-number steps, the warm-start point at step 0, lines at 0 visible, a title
naming env, algorithm and model, a legend that says what each line is."""

from __future__ import annotations

import matplotlib.pyplot as plt

from argym.algorithms.config import load_config
from argym.algorithms.metrics import curve_title, learning_curve_figure, plot_learning_curve

RECORDS = [
    {"step": 0, "eval/success": 0.0},
    *({"step": s, "train/success": 0.0 if s < 3 else 0.5} for s in range(1, 6)),
    {"step": 5, "eval/success": 0.4},
]


def test_the_curve_reads_on_its_own(tmp_path):
    cfg = load_config(None, ["algo=grpo"])
    title = curve_title(cfg)
    assert cfg.env.id in title and "GRPO" in title and "tiny policy" in title
    fig = learning_curve_figure(RECORDS, title)
    try:
        ax = fig.axes[0]
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks and all(float(t).is_integer() for t in ticks) and lo < 0 < hi
        assert ax.get_ylim()[0] < 0 < 1 < ax.get_ylim()[1]  # a line at 0 (or 1) is not under the frame
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "step 0: after the warm start, before RL" in legend
        assert any("held-out" in t for t in legend) and any("per step" in t for t in legend)
        assert cfg.env.id in ax.get_title()
    finally:
        plt.close(fig)
    assert plot_learning_curve(RECORDS, tmp_path / "c.png", title).stat().st_size > 5000
