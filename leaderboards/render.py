"""Views of the boards: a terminal table (rich), HTML pages, a PNG bar chart.

The HTML is self-contained — inline CSS, no scripts, fonts or images from
elsewhere — so an exported page opens offline. In a static export every
submission's detail (provenance and per-episode results) is a section of the
same page, shown when its row's link targets it (CSS ``:target``); the board
server renders the same detail as a page of its own.
"""

from __future__ import annotations

import html
import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from argym.files import write_atomic
from argym.leaderboards.board import Board, Row

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1100px;
 padding:0 1rem;color:#1d2330;background:#fafbfc}
h1{font-size:1.6rem;margin:0 0 .2rem}h2{font-size:1.15rem;margin:2rem 0 .3rem}
.sub{color:#5b6472;margin:0 0 1rem}.key{font-family:ui-monospace,monospace;font-size:12px;color:#5b6472}
table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 2px #0001;margin:.4rem 0}
th,td{padding:.4rem .5rem;text-align:left;border-bottom:1px solid #e6e8eb;white-space:nowrap}
th{background:#f0f2f5;font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.03em;color:#3c4450}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}tr.leader td{font-weight:600}
tr.tied td:first-child::after{content:" \\2248";color:#b26b00}
.bar{position:relative;height:10px;width:140px;background:#eef0f3;border-radius:5px}
.bar i{position:absolute;top:0;bottom:0;background:#9ec5fe;border-radius:5px}
.bar b{position:absolute;top:-2px;bottom:-2px;width:2px;background:#0b5ed7}
a{color:#0b5ed7;text-decoration:none}a:hover{text-decoration:underline}
.detail{display:none;background:#fff;border:1px solid #d5d9de;border-radius:6px;padding:1rem;margin:1rem 0}
.detail:target,.page .detail{display:block}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0 0 1rem}dt{color:#5b6472}
dd{margin:0;font-family:ui-monospace,monospace;font-size:12px;word-break:break-all}
.filters{margin:.5rem 0 1rem;font-size:13px}.filters input{font:inherit;padding:.15rem .3rem}
details.tr{margin:.3rem 0}details.tr summary{cursor:pointer;font-size:13px}
.msg{margin:.3rem 0 .3rem 1rem;padding:.3rem .5rem;border-left:3px solid #d5d9de;background:#fff}
.msg b{font-size:11px;text-transform:uppercase;color:#5b6472}.msg.assistant{border-color:#9ec5fe}
.msg pre,.verdict{margin:.2rem 0 0;white-space:pre-wrap;word-break:break-word;font:12px/1.4 ui-monospace,monospace}
.ok{color:#137333}.bad{color:#b3261e}.infra{color:#b26b00}.legend{color:#5b6472;font-size:12px}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def fmt_ci(r: Row) -> str:
    return f"[{r.ci_low:.3f}, {r.ci_high:.3f}]"


def _bar(r: Row) -> str:
    lo, hi, s = (100 * v for v in (r.ci_low, r.ci_high, r.score))
    return (
        f'<div class="bar" title="{r.score:.3f} {fmt_ci(r)}"><i style="left:{lo:.1f}%;width:{hi - lo:.1f}%">'
        f'</i><b style="left:calc({s:.1f}% - 1px)"></b></div>'
    )


def _page(title: str, body: str, extra_class: str = "") -> str:
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width,initial-scale=1"><title>{_e(title)}</title><style>{CSS}</style>'
        f'</head><body class="{extra_class}">{body}</body></html>\n'
    )


def board_table(b: Board, link: Callable[[Row], str]) -> str:
    """One board as an HTML table; `link(row)` is the href of a row's detail."""
    head = (
        '<tr><th class="num">#</th><th>agent</th><th class="num">score</th><th class="num">95% interval</th>'
        '<th title="the score (dark mark) and its 95% interval (band) on a 0 to 1 scale">interval (0&ndash;1)</th><th class="num">n</th><th class="num">tasks &times; k</th><th class="num">mean reward</th>'
        "<th>pass@k</th><th>sampling</th><th>submitted</th></tr>"
    )
    full = " ".join(f"{k}={v}" for k, v in sorted(b.env_kwargs.items()))  # every kwarg, on hover
    rows = []
    for r in b.rows:
        cls = "leader" if r.rank == 1 else ("tied" if r.overlaps_leader else "")
        pk = " ".join(f"{k}={v:.3f}" for k, v in r.pass_at_k.items()) or "&ndash;"
        rows.append(
            f'<tr class="{cls}" data-id="{r.id}"><td class="num">{r.rank}</td>'
            f'<td><a class="row-link" href="{_e(link(r))}">{_e(r.display_agent)}</a></td>'
            f'<td class="num">{r.score:.3f}</td><td class="num">{fmt_ci(r)}</td><td>{_bar(r)}</td>'
            f'<td class="num">{r.n}</td><td class="num">{r.n_tasks} &times; {r.samples_per_task}</td>'
            f'<td class="num">{r.mean_reward:.3f}</td><td>{pk}</td><td>{_e(r.display_sampling)}</td>'
            f"<td>{_e(r.submitted_at[:16].replace('T', ' '))}</td>"
            f"</tr>"
        )
    return (
        f'<section class="board" id="board-{_e(b.key)}"><h2 title="{_e(full)}">{_e(b.label)}</h2>'
        f'<div class="key">board {_e(b.key)} &middot; task set {_e(b.spec.get("task_set", ""))} &middot; graders '
        f"{_e(json.dumps(b.spec.get('grader_versions', {})))}</div>"
        f'<table class="rows"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></section>'
    )


def detail_html(sub: dict[str, Any], anchor: str = "", back: str = "") -> str:
    """A submission's provenance and per-episode results, as an HTML fragment."""
    board = sub["board"]
    facts = {
        "submission": sub["id"],
        "agent": sub["agent"],
        "agent kind": sub["agent_info"].get("kind", ""),
        "model": sub["agent_info"].get("model", ""),
        "weights fingerprint": sub["agent_info"].get("fingerprint", ""),
        "training run": json.dumps(sub["training_run"]) if sub["training_run"] else "",
        "score": f"{sub['score']:.4f}",
        f"{round(sub['confidence'] * 100)}% interval": f"[{sub['ci_low']:.4f}, {sub['ci_high']:.4f}]",
        "mean reward": f"{sub['mean_reward']:.4f}",
        "episodes (scored)": sub["n"],
        "infra failures": sub["infra_failures"],
        "pass@k": json.dumps(sub["pass_at_k"]) if sub["pass_at_k"] else "",
        "env": board["env_id"],
        "env kwargs": json.dumps(sub.get("env_kwargs", board["env_kwargs"])),
        "split": board["split"],
        "task set (split)": board["task_set"],
        "tasks evaluated": sub.get("task_hash", ""),
        "graders": json.dumps(board["grader_versions"]),
        "sampling": json.dumps(sub.get("sampling") or board.get("sampling", {})),
        "seed": sub["seed"],
        "argym": sub["argym_version"],
        "git commit": sub.get("git_commit") or "",
        "wall time (s)": sub.get("wall_s") if sub.get("wall_s") is not None else "",
        "submitted": sub["submitted_at"],
    }
    dl = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts.items() if v != "")
    eps = []
    for e in sub["episodes"]:
        if e["infra_failure"]:
            cls, word = "infra", "infra failure"
        else:
            cls, word = ("ok", "pass") if e["success"] else ("bad", "fail")
        eps.append(
            f'<tr><td>{_e(e["task_id"])}</td><td class="num">{e["sample"]}</td><td class="{cls}">{word}</td>'
            f'<td class="num">{e["reward"]:.3f}</td><td class="num">{e["turns"]}</td>'
            f'<td class="num">{e["tokens"]}</td></tr>'
        )
    back_link = f'<p><a href="{_e(back)}">&larr; all boards</a></p>' if back else ""
    anchor = anchor or f"sub-{sub['id']}"
    shown = [transcript_html(e) for e in sub["episodes"] if e.get("transcript")]
    transcripts = f"<h3>Transcripts</h3>{''.join(shown)}" if shown else ""
    return (
        f'<section class="detail" id="{_e(anchor)}">{back_link}'
        f"<h2>Submission {sub['id']}: {_e(sub['agent'])}</h2><dl>{dl}</dl>"
        f'<table class="episodes"><thead><tr><th>task</th><th>sample</th><th>result</th><th>reward</th>'
        f"<th>turns</th><th>tokens</th></tr></thead><tbody>{''.join(eps)}</tbody></table>{transcripts}</section>"
    )


def transcript_html(e: dict[str, Any]) -> str:
    """One episode's conversation and verdict, folded under a summary line (no script needed)."""
    t = e["transcript"]
    result = "infra failure" if e["infra_failure"] else ("pass" if e["success"] else "fail")
    msgs = "".join(
        f'<div class="msg {_e(m.get("role", ""))}"><b>{_e(m.get("role", ""))}</b><pre>{_e(m.get("content", ""))}</pre></div>'
        for m in t.get("messages", [])
    )
    verdict = t.get("verdict")
    shown = verdict if isinstance(verdict, str) else json.dumps(verdict, indent=1, sort_keys=True)
    return (
        f'<details class="tr"><summary>{_e(e["task_id"])} (sample {e["sample"]}): {result}, '
        f"reward {e['reward']:.3f}</summary>{msgs}"
        f'<div class="msg"><b>verdict</b><pre class="verdict">{_e(shown)}</pre></div></details>'
    )


LEGEND = (
    '<p class="legend">Ranked by score (success rate), ties broken by the interval\'s lower bound. '
    "&asymp; marks a row whose 95% interval overlaps the leader's. Click an agent for its provenance and "
    "per-episode results.</p>"
)


def filter_form(query: dict[str, str]) -> str:
    """A GET form for the served page's filters (agent, dates, best per agent); no script needed."""

    def field(name: str, label: str, kind: str = "text") -> str:
        return (
            f'<label>{label} <input name="{name}" type="{kind}" value="{_e(query.get(name) or "")}" '
            f'size="14"></label> '
        )

    best = " checked" if query.get("best") in ("1", "true", "yes", "on") else ""
    return (
        f'<form class="filters" method="get" action="/">{field("env", "env")}{field("agent", "agent")}'
        f"{field('since', 'since', 'date')}{field('until', 'until', 'date')}"
        f'<label><input name="best" type="checkbox" value="1"{best}> best per agent</label> '
        f'<button type="submit">filter</button> <a href="/">clear</a></form>'
    )


def boards_html(
    boards: list[Board],
    details: list[dict[str, Any]] | None = None,
    link: Callable[[Row], str] = lambda r: f"#sub-{r.id}",
    title: str = "argym leaderboards",
    query: dict[str, str] | None = None,
) -> str:
    """The boards page. With `details` (a static export) every submission's detail is in the page;
    with `query` (the server) a filter form is on top."""
    n = sum(len(b.rows) for b in boards)
    body = [f'<h1>{_e(title)}</h1><p class="sub">{len(boards)} board(s), {n} submission(s)</p>', LEGEND]
    if query is not None:
        body.append(filter_form(query))
    body += [board_table(b, link) for b in boards] or [
        "<p>No submissions yet: run <code>argym eval ENV --agent SPEC --submit</code>.</p>"
    ]
    body += [detail_html(d, back="#") for d in details or []]
    return _page(title, "".join(body))


def submission_page(sub: dict[str, Any], back: str = "/") -> str:
    return _page(f"argym submission {sub['id']}", detail_html(sub, back=back), "page")


def write_html(path: str | Path, boards: list[Board], details: list[dict[str, Any]]) -> Path:
    """Write the static, offline page (renamed into place, so a reader never sees half of it)."""
    return write_atomic(path, boards_html(boards, details))


TITLE_CHARS = 80
"""Characters of a board's title per line in the PNG (the axes beside 48-character agent names, at 9 pt)."""


def write_plot(path: str | Path, boards: list[Board], top: int = 15) -> Path:
    """A PNG: one horizontal bar chart per board (top `top` rows), score with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shown = [b for b in boards if b.rows] or boards
    lines = [len(textwrap.wrap(b.label, TITLE_CHARS)) for b in shown]  # a long title wraps, and gets room
    heights = [
        max(1.2, 0.35 * min(len(b.rows), top) + 0.9) + 0.2 * (n - 1) for b, n in zip(shown, lines)
    ] or [1.2]
    fig, axes = plt.subplots(
        len(heights), 1, figsize=(9, sum(heights)), squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    for ax, b in zip(axes[:, 0], shown):
        rows = b.rows[:top][::-1]  # leader at the top
        ys = list(range(len(rows)))
        scores = [r.score for r in rows]
        err = [[r.score - r.ci_low for r in rows], [r.ci_high - r.score for r in rows]]
        colors = ["#0b5ed7" if r.rank == 1 else ("#f0a030" if r.overlaps_leader else "#8fa6c4") for r in rows]
        ax.barh(ys, scores, xerr=err, color=colors, capsize=3, height=0.6)
        ax.set_yticks(ys, [f"{r.rank}. {r.display_agent}"[:48] for r in rows], fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.7, max(len(rows), 1) - 0.3)
        ax.set_title(textwrap.fill(b.label, TITLE_CHARS), fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("success rate (95% interval)")
    fig.tight_layout()
    try:
        return write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110))
    finally:
        plt.close(fig)


DROP_ORDER = ("date", "id", "sampling", "pass@k", "tasks×k", "reward", "n")
"""Columns left out, in this order, when a board does not fit the terminal (an agent name never wraps)."""


def print_boards(boards: list[Board], console: Any = None) -> None:
    """Rich tables in the terminal, one per board.

    No cell wraps: a row is one line. When a board is wider than the terminal, the columns of
    `DROP_ORDER` are left out one by one (the caption says which); only then is a long agent name
    cut, with an ellipsis.
    """
    from rich.console import Console
    from rich.measure import Measurement

    console = console or Console(highlight=False)
    if not boards:
        console.print("No submissions yet: `argym eval ENV --agent SPEC --submit` adds one.", markup=False)
        return
    unbounded = console.options.update_width(10_000)  # the width a table wants, not the one it gets
    for b in boards:
        dropped: list[str] = []
        table = _board_table(b, dropped)
        for col in DROP_ORDER:
            if Measurement.get(console, unbounded, table).maximum <= console.width:
                break
            if col in [c.header for c in table.columns]:
                dropped.append(col)
                table = _board_table(b, dropped)
        console.print(table)


def _board_table(b: Board, dropped: list[str]) -> Any:
    from rich import box
    from rich.table import Table

    has_k = any(r.pass_at_k for r in b.rows)
    hidden = f" · not shown (narrow terminal): {', '.join(dropped)}" if dropped else ""
    table = Table(
        title=b.label,
        caption=f"board {b.key} · ≈ interval overlaps the leader's{hidden}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    cols = (
        [("#", "right"), ("agent", "left"), ("score", "right"), ("95% interval", "right"), ("n", "right")]
        + ([("tasks×k", "right"), ("pass@k", "left")] if has_k else [])
        + [("reward", "right"), ("sampling", "left"), ("date", "left"), ("id", "right")]
    )
    for col, just in cols:
        if col not in dropped:
            table.add_column(
                col,
                justify=just,  # type: ignore[arg-type]
                no_wrap=True,  # an agent spec is one token: never broken across lines
                overflow="ellipsis",
                min_width=14 if col == "agent" else None,
            )
    for r in b.rows:
        pk = [f"{r.n_tasks}×{r.samples_per_task}", " ".join(f"{k}={v:.3f}" for k, v in r.pass_at_k.items())]
        cells = {
            "#": f"{r.rank}{'≈' if r.overlaps_leader else ''}",
            "agent": r.display_agent,
            "score": f"{r.score:.3f}",
            "95% interval": fmt_ci(r),
            "n": str(r.n),
            "tasks×k": pk[0],
            "pass@k": pk[1],
            "reward": f"{r.mean_reward:.3f}",
            "sampling": r.display_sampling,
            "date": r.submitted_at[:10],
            "id": str(r.id),
        }
        table.add_row(*(cells[str(c.header)] for c in table.columns), style="bold" if r.rank == 1 else None)
    return table
