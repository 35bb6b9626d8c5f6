"""`argym check`: a conformance and exploit checker for any text env, argym's own or a user's.

    from argym.check import CheckConfig, run_checks
    report = run_checks(CheckConfig("argym/Code-v0", {"tasks": "functions(test_size=4)"}))
    report.print(); assert report.passed

One module per check (contract, determinism, isolation, snapshot,
bad_input, resources, exploits, timing); `runner` runs them, `report` prints
and writes the result, `corpus` holds the exploit corpus that argym's tests
share. docs/check.md says what each check needs of an env.
"""

from argym.check.base import CheckConfig, Outcome
from argym.check.corpus import Context, Exploit, register_exploit, register_family
from argym.check.report import Report
from argym.check.runner import CHECKS, run_checks

__all__ = [
    "CHECKS",
    "CheckConfig",
    "Context",
    "Exploit",
    "Outcome",
    "Report",
    "register_exploit",
    "register_family",
    "run_checks",
]
