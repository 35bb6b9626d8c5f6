#!/usr/bin/env bash
# mypy over argym as it installs: pyproject.toml maps envs/ to argym.envs (and agents/, algorithms/,
# rewards/, leaderboards/ likewise), which mypy cannot follow from the checkout, so the layout is rebuilt
# from symlinks under build/typecheck and mypy reads the package from there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
root=build/typecheck
rm -rf "$root" && mkdir -p "$root/argym"
for f in argym/*; do ln -s "$PWD/$f" "$root/argym/"; done
for d in envs agents algorithms rewards leaderboards; do ln -s "$PWD/$d" "$root/argym/$d"; done
cd "$root"
# every module of the package; pyproject.toml says which are strict
exec env MYPYPATH="$PWD" "$OLDPWD/$PY" -m mypy --config-file "$OLDPWD/pyproject.toml" -p argym
