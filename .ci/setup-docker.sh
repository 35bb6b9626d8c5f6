# Source me (bash): `source .ci/setup-docker.sh` — installs docker.io, bubblewrap and debootstrap
# from Debian, starts a private dockerd in the background, builds the sandbox image from Debian
# packages (Docker Hub is not needed) and exports DOCKER_HOST for the tests. Idempotent.
# Stop the daemon afterwards with: argym_docker_stop
ARGYM_DOCKER_DIR="${ARGYM_DOCKER_DIR:-/var/lib/argym-docker}"
ARGYM_DOCKER_SOCK="unix://$ARGYM_DOCKER_DIR/docker.sock"
ARGYM_SANDBOX_IMAGE="${ARGYM_SANDBOX_IMAGE:-argym-sandbox:latest}"
ARGYM_SWE_IMAGE="${ARGYM_SWE_IMAGE:-argym-swe:git-pytest-1}"

_argym_docker_setup() {
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if ! command -v dockerd >/dev/null || ! command -v bwrap >/dev/null || ! command -v debootstrap >/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        $sudo apt-get update -qq >/dev/null
        $sudo apt-get install -y -qq --no-install-recommends docker.io bubblewrap debootstrap >/dev/null || return 1
    fi
    $sudo mkdir -p "$ARGYM_DOCKER_DIR"
    if ! DOCKER_HOST="$ARGYM_DOCKER_SOCK" docker version >/dev/null 2>&1; then
        $sudo sh -c "nohup dockerd --host '$ARGYM_DOCKER_SOCK' --data-root '$ARGYM_DOCKER_DIR/data' \
            --exec-root '$ARGYM_DOCKER_DIR/exec' --pidfile '$ARGYM_DOCKER_DIR/dockerd.pid' \
            --bridge none --iptables=false --ip6tables=false > '$ARGYM_DOCKER_DIR/dockerd.log' 2>&1 &"
        local i
        for i in $(seq 1 60); do
            DOCKER_HOST="$ARGYM_DOCKER_SOCK" docker version >/dev/null 2>&1 && break
            sleep 1
        done
        DOCKER_HOST="$ARGYM_DOCKER_SOCK" docker version >/dev/null 2>&1 || {
            echo "setup-docker: dockerd did not answer; see $ARGYM_DOCKER_DIR/dockerd.log" >&2; tail -20 "$ARGYM_DOCKER_DIR/dockerd.log" >&2; return 1; }
    fi
    export DOCKER_HOST="$ARGYM_DOCKER_SOCK"
    if ! docker image inspect "$ARGYM_SANDBOX_IMAGE" >/dev/null 2>&1; then
        local root="$ARGYM_DOCKER_DIR/rootfs"
        $sudo rm -rf "$root"
        $sudo debootstrap --variant=minbase --include=python3-minimal,python3 bookworm "$root" >/dev/null || {
            echo "setup-docker: debootstrap failed" >&2; return 1; }
        $sudo mkdir -p "$root/sandbox"
        $sudo tar -C "$root" -c . | docker import --change 'WORKDIR /sandbox' - "$ARGYM_SANDBOX_IMAGE" >/dev/null || return 1
        $sudo rm -rf "$root"
    fi
    # argym/SWE-v0's image: the same base plus git and Debian's pytest (the tag names the package set,
    # so a cache holding an older set rebuilds).
    if ! docker image inspect "$ARGYM_SWE_IMAGE" >/dev/null 2>&1; then
        local root="$ARGYM_DOCKER_DIR/rootfs-swe"
        $sudo rm -rf "$root"
        $sudo debootstrap --variant=minbase --include=python3-minimal,python3,python3-pytest,git,patch bookworm "$root" >/dev/null || {
            echo "setup-docker: debootstrap (swe) failed" >&2; return 1; }
        $sudo mkdir -p "$root/testbed" "$root/opt/argym"
        $sudo chown 65534:65534 "$root/testbed"
        $sudo tar -C "$root" -c . | docker import --change 'WORKDIR /testbed' - "$ARGYM_SWE_IMAGE" >/dev/null || return 1
        $sudo rm -rf "$root"
    fi
    echo "setup-docker: engine at $DOCKER_HOST, images $ARGYM_SANDBOX_IMAGE $ARGYM_SWE_IMAGE"
}

argym_docker_stop() {
    local pid
    pid="$(cat "$ARGYM_DOCKER_DIR/dockerd.pid" 2>/dev/null)" && [ -n "$pid" ] && kill "$pid" 2>/dev/null
    return 0
}

_argym_docker_setup || { echo "setup-docker: failed" >&2; return 1 2>/dev/null || exit 1; }
export ARGYM_SANDBOX_IMAGE ARGYM_SWE_IMAGE
