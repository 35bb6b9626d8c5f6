"""Runs the checks on one env, in order, each under its own try: a check that cannot run is a failure."""

from __future__ import annotations

import time
from collections.abc import Callable

from argym.callables import import_modules
from argym.check import (
    bad_input,
    contract,
    determinism,
    exploits,
    isolation,
    resources,
    snapshot,
    timing,
    tokens,
)
from argym.check.base import FAIL, CheckConfig, Outcome, Subject, short
from argym.check.report import Report

CHECKS: dict[str, Callable[[Subject], Outcome]] = {
    m.NAME: m.check
    for m in (contract, determinism, isolation, snapshot, bad_input, resources, exploits, tokens, timing)
}
"""Every check by name, in the order they run (timing last: it judges every call the others made); tokens runs
only when a model is given (`CheckConfig.tokens`) or it is named in `only`."""


def run_checks(
    config: CheckConfig,
    exploit_modules: tuple[str, ...] = (),
    progress: Callable[[Outcome], None] | None = None,
) -> Report:
    """Check `config.env_id`; `exploit_modules` register more corpus entries (`argym.check.corpus`)."""
    import_modules(config.imports)
    import_modules(exploit_modules)
    unknown = [n for n in config.only if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; the checks are {list(CHECKS)}.")
    names = [  # --quick: the costly ones say n/a
        n
        for n in CHECKS
        if (n in config.only if config.only else n != tokens.NAME or config.tokens is not None)
    ]
    subject = Subject(config)
    report = Report(config.env_id, config.kwargs)
    try:
        for name in names:
            start = time.monotonic()
            try:
                outcome = CHECKS[name](subject)
            except Exception as e:
                outcome = Outcome(
                    name, FAIL, f"the check could not run: {type(e).__name__}: {short(str(e), 600)}"
                )
            outcome.seconds = time.monotonic() - start
            report.outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    finally:
        subject.close_all()
    report.hung = bool(subject.timings.hangs)
    return report
