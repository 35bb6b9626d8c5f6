"""The checker's report: a rich table for people, the same as JSON for machines."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from argym.check.base import FAIL, PASS, Outcome

_STYLE = {PASS: "green", FAIL: "bold red"}


@dataclass
class Report:
    env_id: str
    kwargs: dict[str, Any]
    outcomes: list[Outcome] = field(default_factory=list)
    hung: bool = False
    """A call hung and was abandoned: its thread lives until the process exits."""

    @property
    def passed(self) -> bool:
        return all(o.result != FAIL for o in self.outcomes)

    def failed(self) -> list[str]:
        return [o.check for o in self.outcomes if o.result == FAIL]

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "kwargs": self.kwargs,
            "passed": self.passed,
            "checks": [o.to_dict() for o in self.outcomes],
        }

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    def print(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.table import Table

        console = console or Console(highlight=False)
        table = Table(title=f"argym check {self.env_id}")
        table.add_column("check", style="bold", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("evidence")
        table.add_column("time", justify="right", no_wrap=True)
        for o in self.outcomes:
            table.add_row(o.check, o.result, o.evidence, f"{o.seconds:.1f} s", style=_STYLE.get(o.result))
        console.print(table, markup=False)
        verdict = "all checks passed" if self.passed else f"FAILED: {', '.join(self.failed())}"
        console.print(verdict, style="green" if self.passed else "bold red", markup=False)
