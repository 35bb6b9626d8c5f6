"""`argym board`: show, export and serve the local leaderboards."""

from __future__ import annotations

import json
from typing import Any

import click

from argym.cli.app import cli
from argym.cli.common import console, db_option, fail, parse_kwargs, user_errors


class _BoardGroup(click.Group):
    """`argym board [ENV_ID]` shows boards; `argym board export|serve` are subcommands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["show", *args]
        return super().parse_args(ctx, args)


def filter_options(f: Any) -> Any:
    for opt in reversed(
        [
            click.option("--split", default=None, help="Only boards of this split."),
            click.option("--best", "best_per_agent", is_flag=True, help="Each agent's best row only."),
            click.option("--agent", default=None, help="Only agents whose spec contains this text."),
            click.option(
                "--since", default=None, help="Only submissions on or after this date (2026-11-30)."
            ),
            click.option("--until", default=None, help="Only submissions on or before this date."),
            click.option("--key", default=None, help="Only the board with this key (a prefix is enough)."),
            db_option,
        ]
    ):
        f = opt(f)
    return f


def load_boards(env_id: str | None, env_kwargs: tuple[str, ...] = (), **filters: Any) -> list[Any]:
    """The boards of `env_id` (all if None) whose env kwargs include `env_kwargs` (key=value strings).

    An env id that no board holds and no env registers is a typo, refused with the close matches,
    not reported as a board without submissions.
    """
    from argym.leaderboards import boards
    from argym.registration import resolve

    with user_errors():
        found = boards(env_id, env_kwargs=parse_kwargs(env_kwargs), **filters)
        if env_id and not found and not boards(env_id, db=filters.get("db")):
            resolve(env_id)  # raises UnknownEnvError for an id nothing registers
        return found


@cli.group(cls=_BoardGroup)
def board() -> None:
    """Local leaderboards: `argym board [ENV_ID] [--split S]`, `board export`, `board serve`."""


@board.command(name="show")
@click.argument("env_id", required=False)
@click.argument("env_kwargs", nargs=-1)
@filter_options
@click.option("--json", "as_json", is_flag=True, help="Print the boards as JSON.")
def board_show(env_id: str | None, env_kwargs: tuple[str, ...], as_json: bool, **filters: Any) -> None:
    """Show the boards (of ENV_ID, if given), ranked, one table each.

    ENV_KWARGS (key=value) keep only the boards whose env kwargs include them.
    """
    found = load_boards(env_id, env_kwargs, **filters)
    if as_json:
        click.echo(json.dumps([b.to_dict() for b in found], indent=1))
        return
    from argym.leaderboards.render import print_boards

    print_boards(found, console())


@board.command(name="export")
@click.argument("env_id", required=False)
@click.argument("env_kwargs", nargs=-1)
@filter_options
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a static HTML page (self-contained: opens offline).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a PNG bar chart with intervals.",
)
def board_export(
    env_id: str | None,
    env_kwargs: tuple[str, ...],
    html_path: str | None,
    plot_path: str | None,
    **filters: Any,
) -> None:
    """Export the boards (of ENV_ID, if given) as a static HTML page and/or a PNG plot."""
    if not html_path and not plot_path:
        fail("say what to export: --html FILE and/or --plot FILE.")
    from argym.leaderboards import Store
    from argym.leaderboards.render import write_html, write_plot

    found = load_boards(env_id, env_kwargs, **filters)
    if html_path:
        with user_errors(), Store(filters["db"]) as store:
            details = [d for b in found for r in b.rows if (d := store.submission(r.id)) is not None]
        console().print(f"wrote {write_html(html_path, found, details)}", markup=False)
    if plot_path:
        console().print(f"wrote {write_plot(plot_path, found)}", markup=False)


@board.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port (0 picks a free one).")
@db_option
def board_serve(host: str, port: int, db: str | None) -> None:
    """Serve the boards as a local web page with a read-only JSON API (/api/boards)."""
    from argym.leaderboards.server import make_server

    with user_errors():
        server = make_server(db, host, port)
    h, p = server.server_address[:2]
    assert isinstance(h, str), "an AF_INET server's address is a (host, port) pair of str and int"
    console().print(f"argym boards at http://{h}:{p}/  (JSON: /api/boards; Ctrl-C stops)", markup=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
