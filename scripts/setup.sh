#!/usr/bin/env bash
# One entry point that installs what cua-tui needs on a fresh Debian machine (as root) and then runs
# a job:   bash scripts/setup.sh demo | test | bench | env | link | docker
#   demo   the first-run experience (offline: no account, no API key)
#   test   the whole test suite (what CI runs; it sets up Docker first, as `docker` does)
#   bench  the benchmarks, side by side with their baselines
#   env    only install (Debian packages when missing, Python >= 3.12, the locked dependencies), and link
#          the entry point .venv/bin/cua-tui into a folder on PATH (every job does)
#   link   only that link: /usr/local/bin as root, else ~/.local/bin (CUA_TUI_BIN_DIR chooses another)
#   docker the Docker engine (installed and started when missing) and the images --backend docker uses
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-env}"
shift || true

log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages, installed only when missing ------------------------------------------------------
DEB_BASE=(ca-certificates)
# The embedded local desktop: Xvfb, a window manager, Chromium, isolation (bubblewrap; setpriv from util-linux
# drops to the run's own uid, leased per run: no user account is needed), the proxy relay; Tesseract (and its
# English data) reads the screenshots as text for the TUI's screen-text view.
DEB_DESKTOP=(xvfb xauth x11-utils openbox chromium bubblewrap socat fonts-dejavu-core util-linux tesseract-ocr tesseract-ocr-eng)
# Tests also drive the real binaries in tmux, and the seeds' way (xdotool, scrot) for the benchmark; xterm
# (its VT340 mode speaks Sixel) is the real graphics terminal the Sixel path is tested in, under Xvfb.
DEB_TEST=(tmux xdotool scrot iproute2 curl xterm postgresql)
deb_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
      log "missing Debian packages: ${missing[*]} (run as root, or install them yourself)"
      return 1
    fi
    log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# --- A Python >= 3.12 -----------------------------------------------------------------------------------
py_ok() { "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
find_python() {
  local c
  for c in "${CUA_TUI_PYTHON:-}" python3.13 python3.12 \
           "$HOME"/.pyenv/versions/3.13*/bin/python3.13 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 \
           /usr/local/bin/python3.13 /usr/local/bin/python3.12 /usr/bin/python3.13 /usr/bin/python3.12 python3; do
    [ -n "$c" ] || continue
    c="$(command -v "$c" 2>/dev/null || true)"
    if [ -n "$c" ] && py_ok "$c"; then echo "$c"; return 0; fi
  done
  return 1
}

# --- uv, then the locked environment ------------------------------------------------------------------------
UV_VERSION=0.13.9
ensure_env() {
  deb_install "${DEB_BASE[@]}" "${DEB_DESKTOP[@]}"
  local py
  if ! py="$(find_python)"; then
    deb_install python3 python3-venv python3-pip || true
    py="$(find_python)" || true
  fi
  local uv=.cache/uv/bin/uv
  if [ ! -x "$uv" ]; then
    local boot
    boot="${py:-$(command -v python3)}"
    log "installing uv $UV_VERSION into .cache/uv (with $boot)"
    # With the Python's own pip where it has one (1.7 s), not a pip of the folder's own (4.3 s on a fresh
    # clone, CI's every run); pip >= 22.3 installs into another environment with --python.
    if ! { "$boot" -m venv --without-pip .cache/uv &&
           "$boot" -m pip --python .cache/uv/bin/python install -q "uv==$UV_VERSION"; } 2>/dev/null; then
      rm -rf .cache/uv
      "$boot" -m venv .cache/uv
      .cache/uv/bin/pip install -q "uv==$UV_VERSION"
    fi
  fi
  if [ -z "${py:-}" ]; then
    log "no Python >= 3.12 found; asking uv to install one"
    "$uv" python install 3.12
    py="$("$uv" python find 3.12)"
  fi
  log "python: $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
  # Bytecode compiled once here, as pip does at install: where PYTHONDONTWRITEBYTECODE is set (this project's
  # machines set it) every process would otherwise compile every module it imports, the CLI's start twice
  # as slow (a sim run: 0.55 s against 0.31 s); the checkout's own modules too, for every run. The test job
  # (ensure_env lazy) lets its processes write what they import instead: the 8,500 files of every package
  # took 8 s to compile on a fresh install, the suite imports a fraction of them; a later job compiles the
  # rest.
  local compile=--compile-bytecode
  [ "${1:-}" != lazy ] || compile=
  "$uv" sync --frozen --quiet ${compile:+"$compile"} --python "$py"
  .venv/bin/python -m compileall -q -j 0 cua_tui >/dev/null
  link_entry_point
}

# --- The entry point on PATH, as a tool installed from a checkout is: a link, never a copy -----------------
# Into /usr/local/bin as root, else ~/.local/bin; CUA_TUI_BIN_DIR names another folder (the tests' own).
# A link of ours (to some checkout's .venv/bin/cua-tui) is replaced; anything else there is left alone.
link_entry_point() {
  local entry="$PWD/.venv/bin/cua-tui" dir link current
  if [ -n "${CUA_TUI_BIN_DIR:-}" ]; then
    dir="$CUA_TUI_BIN_DIR"
  elif [ "$(id -u)" -eq 0 ]; then
    dir=/usr/local/bin
  else
    dir="$HOME/.local/bin"
  fi
  link="$dir/cua-tui"
  if [ ! -x "$entry" ]; then
    log "no $entry to put on PATH (the environment is not installed: bash scripts/setup.sh env)"
    return 1
  fi
  if [ -L "$link" ]; then
    current="$(readlink "$link")"
    case "$current" in
      */.venv/bin/cua-tui) ;;  # ours (this checkout's, or another's: the last set-up wins)
      *) log "cua-tui: not linked, $link is a link to $current, not ours; run $entry, or remove it and run set-up again"
         return 0 ;;
    esac
  elif [ -e "$link" ]; then
    log "cua-tui: not linked, $link exists and is not ours; run $entry, or remove it and run set-up again"
    return 0
  fi
  if ! { mkdir -p "$dir" && ln -sfn "$entry" "$link"; } 2>/dev/null; then
    log "cua-tui: not linked, cannot write $dir; run $entry (or set CUA_TUI_BIN_DIR to a folder on PATH)"
    return 0
  fi
  case ":$PATH:" in
    *":$dir:"*) log "cua-tui is on PATH: $link -> $entry" ;;
    *) log "cua-tui linked: $link -> $entry, but $dir is not on PATH: add it (export PATH=\"$dir:\$PATH\"), or run $entry" ;;
  esac
}

# --- Docker: the engine, a Debian base made with debootstrap (no image registry), the desktop image -----------
DEB_DOCKER=(docker.io debootstrap)
DOCKER_BASE=cua-tui-base:bookworm
DOCKER_IMAGE=cua-tui-desktop  # :latest is what the backend runs; :<hash of the build context> is its build
docker_up() { docker version >/dev/null 2>&1; }
ensure_docker() {
  deb_install "${DEB_DOCKER[@]}"
  if ! docker_up; then
    log "starting dockerd (its log: /var/log/cua-tui-dockerd.log)"
    nohup dockerd >/var/log/cua-tui-dockerd.log 2>&1 &
    local n=0
    until docker_up; do
      n=$((n + 1))
      if [ "$n" -gt 120 ]; then log "dockerd did not answer within 60 s: see /var/log/cua-tui-dockerd.log"; return 1; fi
      sleep 0.5
    done
  fi
  if ! docker image inspect "$DOCKER_BASE" >/dev/null 2>&1; then
    # the mirror apt already uses (deb822 sources first, then sources.list), plain Debian otherwise
    local mirror root
    mirror="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
    [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    root="$(mktemp -d)"
    log "building the base image $DOCKER_BASE with debootstrap from $mirror"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
    tar -C "$root" -c . | docker import - "$DOCKER_BASE" >/dev/null
    rm -rf "$root"
  fi
  # the build context is docker/desktop as it stands (what `docker build docker/desktop` sends a registry's build)
  local ctx tag
  ctx="$(mktemp -d)"
  cp -r docker/desktop/. "$ctx/"
  tag="$(cd "$ctx" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
  if ! docker image inspect "$DOCKER_IMAGE:$tag" >/dev/null 2>&1; then
    log "building the desktop image $DOCKER_IMAGE:$tag (docker/desktop/Dockerfile)"
    if ! docker build -q --build-arg "BASE=$DOCKER_BASE" -t "$DOCKER_IMAGE:$tag" "$ctx" >"$ctx.log" 2>&1; then
      cat "$ctx.log" >&2; rm -rf "$ctx" "$ctx.log"; return 1
    fi
    rm -f "$ctx.log"
  fi
  docker tag "$DOCKER_IMAGE:$tag" "$DOCKER_IMAGE:latest"
  rm -rf "$ctx"
  log "docker: engine $(docker version --format '{{.Server.Version}}'), image $DOCKER_IMAGE:$tag (tagged latest)"
}

case "$job" in
  env)
    ensure_env ;;
  link)
    link_entry_point ;;
  demo)
    ensure_env
    exec .venv/bin/cua-tui demo "$@" ;;
  test)
    deb_install "${DEB_TEST[@]}"
    ensure_env lazy
    # pytest writes its rewritten test modules (and Python the bytecode of bench/ and the tests' helpers)
    # where PYTHONDONTWRITEBYTECODE would have every process compile them again: each pytest process then
    # collects in 3 CPU s instead of 12 (nine processes in the whole suite). The checkout's __pycache__
    # folders are ignored by git, as cua_tui's (compiled at install) are.
    export PYTHONDONTWRITEBYTECODE=
    # Once, before the parts start their workers together: the cache every worker then reads; made while
    # the Docker engine starts (7 s each on a fresh clone, one CPU each).
    warm=
    if [ "$#" -eq 0 ]; then
      .venv/bin/python -m pytest --collect-only -q >/dev/null 2>&1 &
      warm=$!
    fi
    ensure_docker
    set +e
    [ -z "$warm" ] || wait "$warm"
    if [ "$#" -eq 0 ]; then
      # The whole suite in three parts, by what each test needs (tests/conftest.py): every test but those
      # needing a desktop, the Docker engine or the machine's first call on four workers (pytest-xdist: most
      # of them wait on a timer, a pipe or a thread, so four keep two CPUs busy; 4m12s against 5m07s on
      # two, measured on this project's 2-CPU machines); beside it, the desktop and engine ones three at a
      # time (they mostly wait on their desktops, so the first part fills the CPUs they leave; the
      # engine's in turn, on one worker); once those are done, the ones needing the machine's first call,
      # one at a time (the speed gate among them), while the first part and the beside lane go on at the
      # lowest priority, in the idle class (scripts/step_aside.py): the alone part waits more than it
      # computes, and the others fill what it leaves (docs/development.md, "Where the suite's time
      # goes"). The tests marked beside run on their own all along. The reports of the parts run beside come after the first part's, each
      # whole (a part of its own, a database's, fits the same way).
      beside_log="$(mktemp)" desktops_log="$(mktemp)" alone_log="$(mktemp)"
      # At the lowest priority, on the CPU the parts leave: an install that mostly waits on the network,
      # and the static checks (the type check, the dead code, the layers, the manual's build), which
      # measure nothing.
      nice -n 19 .venv/bin/python -m pytest -n 2 --dist loadfile -m beside >"$beside_log" 2>&1 &
      beside=$!
      .venv/bin/python -m pytest -n 4 -m "not desktops" &
      first=$!
      .venv/bin/python -m pytest -n 3 --dist loadgroup -m "desktops and not alone and not beside" \
        >"$desktops_log" 2>&1
      rc2=$?
      .venv/bin/python scripts/step_aside.py 19 "$first" "$beside" 2>>"$alone_log"
      .venv/bin/python -m pytest -m "alone and not beside" >>"$alone_log" 2>&1
      rc3=$?
      wait "$first"
      rc=$?
      cat "$desktops_log" "$alone_log"
      wait "$beside"
      rc4=$?
      cat "$beside_log"
      rm -f "$beside_log" "$desktops_log" "$alone_log"
      [ "$rc" -ne 0 ] || rc=$rc2
      [ "$rc" -ne 0 ] || rc=$rc3
      [ "$rc" -ne 0 ] || rc=$rc4
    else
      .venv/bin/python -m pytest "$@"
      rc=$?
    fi
    set -e
    # pytest's 5 means "no tests collected": that is a failure of the suite, never a pass.
    exit "$rc" ;;
  bench)
    deb_install "${DEB_TEST[@]}"
    ensure_env
    if [ "${1:-all}" = docker ] || [ "${1:-all}" = all ]; then ensure_docker; fi
    exec .venv/bin/python -m bench "${@:-all}" ;;
  docker)
    ensure_env
    ensure_docker ;;
  *)
    log "unknown job '$job': use demo, test, bench, env, link or docker"; exit 2 ;;
esac
