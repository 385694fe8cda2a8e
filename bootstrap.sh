#!/bin/sh
# Installs everything fleet and its sandbox need on a fresh Debian 12 machine (as root), idempotently:
# Debian packages for the sandbox hosts, then a virtualenv in .venv with fleet and its test tools.
set -eu
cd "$(dirname "$0")"

missing=""
for pair in systemd-nspawn:systemd-container mmdebstrap:mmdebstrap ssh-keygen:openssh-client ip:iproute2 \
            cpp:cpp setsid:util-linux tmux:tmux strace:strace; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
done
python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    || missing="$missing python3 python3-venv"
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then echo "bootstrap: need root to install:$missing" >&2; exit 1; fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends $missing
fi

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
# The real sglang / flashinfer-python releases the patch sets and the audit are tested against (cached once in
# ~/.cache/fleet/upstream; about 680 MB of wheels, 3 GB of text kept). A registry that cannot be reached fails here.
.venv/bin/inv upstream >/dev/null
# The real uv, for the sandbox tests and the bench of venvs built by uv (the sandbox image has none; the version is
# sandbox/uv.py's VERSION, the release tests/fixtures/venv_build was recorded from).
uv_version=$(sed -n 's/^VERSION = "\(.*\)".*/\1/p' sandbox/uv.py)
ls ~/.cache/fleet/uv/uv-"$uv_version"-*.whl >/dev/null 2>&1 || .venv/bin/python -m pip download -q \
    --disable-pip-version-check --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
    "uv==$uv_version" -d ~/.cache/fleet/uv
# Every sandbox range blackholed, so a sandbox address never leaves the machine while its fleet is down (root only).
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null 2>&1; then .venv/bin/python -m sandbox.blackhole --sandbox-ranges; fi
# The real sglang-router on every sandbox host, 0.3.2 and 0.1.9 (both API generations; sandbox/router.py), cached
# once in ~/.cache/fleet/router (about 180 MB).
.venv/bin/python -m sandbox.router fetch
echo "bootstrap: ok ($(.venv/bin/python --version), $(systemd-nspawn --version | head -n 1))"
