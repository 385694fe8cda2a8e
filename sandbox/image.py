"""The shared Debian 12 root filesystem every sandbox host boots from, built once and cached.

The cache key is a hash of the recipe below, so the image is rebuilt only when the recipe changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

SUITE = "bookworm"
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "libpam-systemd", "openssh-server", "iproute2", "procps",
    "python3", "python3-venv", "curl", "sudo", "cpp", "less",
)
# Runs on the build machine with the new root as $1; chroot'ed steps use the image's own tools.
CUSTOMIZE = r"""
set -e
root="$1"
rm -f "$root/etc/hostname" "$root"/etc/ssh/ssh_host_*
: > "$root/etc/machine-id"
mkdir -p "$root/etc/ssh/sshd_config.d"
cat > "$root/etc/ssh/sshd_config.d/fleet-sandbox.conf" <<'CONF'
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UseDNS no
MaxSessions 64
MaxStartups 64:30:128
LogLevel VERBOSE
CONF
chroot "$root" useradd --create-home --shell /bin/bash fleet
echo 'fleet ALL=(ALL) NOPASSWD: ALL' > "$root/etc/sudoers.d/fleet"
chmod 0440 "$root/etc/sudoers.d/fleet"
chroot "$root" python3 -m venv /root/ml-env
# Nothing in a sandbox host should try to reach the network or wait for it.
chroot "$root" systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
"""
RECIPE_VERSION = "1"


def cache_root() -> Path:
    return Path(os.environ.get("FLEET_SANDBOX_CACHE", "/var/cache/fleet-sandbox"))


def recipe_key(packages: tuple[str, ...] = PACKAGES) -> str:
    """The image's cache key: its recipe's version, suite, `packages` and customization, hashed."""
    text = "\n".join([RECIPE_VERSION, SUITE, " ".join(packages), CUSTOMIZE])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def image_path() -> Path:
    return cache_root() / f"rootfs-{recipe_key()}"


def mirror_lines(sources_dir: Path = Path("/etc/apt")) -> list[str]:
    """The Debian mirrors this machine's apt already uses, as one-line `deb URI SUITE COMPONENTS` entries.

    The repository names no mirror host: it takes them from the machine at run time.
    """
    lines: list[str] = []
    files = [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            lines += _deb822_lines(text)
        else:
            for raw in text.splitlines():
                parts = raw.split("#", 1)[0].split()
                if len(parts) >= 4 and parts[0] == "deb" and _is_debian_suite(parts[2]):
                    lines.append(" ".join(parts))
    if not lines:
        raise RuntimeError(f"no Debian {SUITE} mirror found in {sources_dir}/sources.list*")
    return lines


def _is_debian_suite(suite: str) -> bool:
    return suite == SUITE or suite.startswith(SUITE + "-")


def _deb822_lines(text: str) -> list[str]:
    lines = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for raw in stanza.splitlines():
            if raw.startswith("#") or ":" not in raw:
                continue
            key, value = raw.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                if _is_debian_suite(suite):
                    lines.append(f"deb {uri} {suite} {fields.get('components', 'main')}")
    return lines


def ensure_image(log=print) -> Path:
    """Return the cached image for the current recipe, building it first if needed. Sandboxes brought up at once
    (the parallel suite's workers, each its own instance) build it once: the others wait on the lock, then find it
    complete, and none replaces or prunes an image another's hosts already run on."""
    dest = image_path()
    if (dest / ".complete").exists():
        return dest
    if shutil.which("mmdebstrap") is None:
        raise RuntimeError("mmdebstrap is not installed (run ./bootstrap.sh)")
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".complete").exists():
            return dest
        return _build(dest, log)


def _build(dest: Path, log) -> Path:
    log(f"building sandbox image {dest.name} (Debian {SUITE}, once per recipe)...")
    with tempfile.TemporaryDirectory(dir=cache_root(), prefix=".build-") as tmp:
        build = Path(tmp) / "rootfs"
        hook = Path(tmp) / "customize.sh"
        hook.write_text(CUSTOMIZE)
        cmd = [
            "mmdebstrap", "--quiet", "--variant=minbase", "--include=" + ",".join(PACKAGES),
            "--aptopt=Acquire::Check-Valid-Until \"false\"",
            f"--customize-hook=sh {hook} \"$1\"",
            SUITE, str(build), *mirror_lines(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"mmdebstrap failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        (build / ".complete").write_text(recipe_key() + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        build.rename(dest)
    _prune_old_images(keep=dest)
    return dest


def _prune_old_images(keep: Path) -> None:
    for old in cache_root().glob("rootfs-*"):
        if old != keep and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
