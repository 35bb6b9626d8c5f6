"""The training recipes shipped in the package: ``argym train grpo_math`` finds ``configs/grpo_math.yaml``.

The repository's ``configs/`` is the one source; it installs as the package
`argym.configs`, so a recipe resolves the same from a wheel as from a checkout.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PACKAGE = "argym.configs"


def recipe_names() -> list[str]:
    """The shipped recipes' names (file names without ``.yaml``), sorted."""
    return sorted(
        p.name.removesuffix(".yaml") for p in resources.files(PACKAGE).iterdir() if p.name.endswith(".yaml")
    )


def find_recipe(name: str) -> Path | None:
    """The shipped recipe `name` (``grpo_math`` or ``grpo_math.yaml``), or None if there is none."""
    stem = name.removesuffix(".yaml")
    if "/" in stem or stem not in recipe_names():
        return None
    return Path(str(resources.files(PACKAGE) / f"{stem}.yaml"))


def summary(path: Path) -> str:
    """A recipe's one-line description: the first sentence of its opening comment (every shipped one has one)."""
    words: list[str] = []
    for line in path.read_text().splitlines():
        text = line.lstrip("# ").strip()
        if not line.startswith("#") or text.startswith("argym "):  # the comment's usage line ends it
            break
        words.append(text)
    first, dot, _ = " ".join(words).partition(". ")
    return first + ("." if dot else "")
