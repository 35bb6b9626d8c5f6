"""Which asserts of a test source count, and how the harness counts them (part of the harness script).

Imported on the host too: the host counts the asserts of the tests it sends (`counted_asserts`), so an
assert the harness never reports as held counts as not passed. Stdlib only (`ast`).
"""

import ast


def assert_id(node):
    """An ``assert`` statement's name in the record: its position in the test source, ``"LINE:COL"``."""
    return f"{node.lineno}:{node.col_offset}"


def counted_asserts(tests):
    """The ids of the asserts of `tests` (source) that score, in source order: every ``assert`` but those
    whose condition is a constant (HumanEval's ``assert True, "..."``), which check nothing of the
    candidate and so would pay any answer, even one that dies at its first call."""
    found = [
        n
        for n in ast.walk(ast.parse(tests, "tests.py"))
        if isinstance(n, ast.Assert) and not isinstance(n.test, ast.Constant)
    ]
    return [assert_id(n) for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


class _Counter(ast.NodeTransformer):
    """Rewrite ``assert X, M`` into ``__argym_check(lambda: X, LINE, lambda: M, ID)``."""

    def visit_Assert(self, node):
        msg = node.msg if node.msg is not None else ast.Constant(None)
        call = ast.Call(
            func=ast.Name("__argym_check", ast.Load()),
            args=[
                ast.Lambda(_noargs(), node.test),
                ast.Constant(node.lineno),
                ast.Lambda(_noargs(), msg),
                ast.Constant(assert_id(node)),
            ],
            keywords=[],
        )
        return ast.copy_location(ast.Expr(call), node)


def _noargs():
    return ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
    )
