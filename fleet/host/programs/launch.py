# Managed by fleet: installed by `inv deploy` where a server has an API key. Edits are reported as drift.
"""Start a Python module with a secret that shows in no command line, environment or journal.

    python fleet-launch CREDENTIAL flag:NAME MODULE [ARG...] runs `python -m MODULE ARG... --NAME <secret>`
    python fleet-launch CREDENTIAL env:NAME MODULE [ARG...]  runs `python -m MODULE ARG...` with $NAME=<secret>

in this process, with <secret> read from $CREDENTIALS_DIRECTORY/CREDENTIAL (systemd's `LoadCredential=`
fills it from a 0600 file; fleet's benchmark names /etc/fleet itself). The secret is put into sys.argv or
os.environ inside the process, after it started, so /proc/PID/cmdline and /proc/PID/environ never hold it
(sglang's workers are started by multiprocessing, which hands sys.argv over a pipe). The module's stdout
and stderr, and those of every process it starts, pass through this launcher on their way out, and every
occurrence of the secret is masked there: sglang logs its whole ServerArgs, api_key included.

The standard library only, Python 3.8 and later: it runs in the host's venv, whatever fleet's own Python is.
"""

import json
import os
import runpy
import select
import signal
import sys
import time
from typing import NoReturn

MASK = b"<secret>"
EX_CONFIG = 78  # sysexits.h: a configuration error (systemd shows it as status=78/CONFIG)
LONG_LINE = 65536  # a line this long without a newline is passed on in parts
DRAIN_S = 5.0  # after the server exits, how long its children may go on writing


def die(message: str) -> NoReturn:
    sys.stderr.write("fleet-launch: " + message + "\n")
    sys.exit(EX_CONFIG)


def read_secret(name):
    folder = os.environ.get("CREDENTIALS_DIRECTORY")
    if not folder:
        die("$CREDENTIALS_DIRECTORY is not set: the unit needs LoadCredential=" + name + ":FILE")
    try:
        with open(os.path.join(folder, name), "rb") as f:
            raw = f.read()
    except OSError as exc:
        die("credential " + name + ": " + exc.strerror)
    try:
        secret = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        die("credential " + name + " is not UTF-8 text")
    if not secret or any(c.isspace() for c in secret):
        die("credential " + name + " is empty or holds whitespace")
    return secret


def forms(secret):
    """The secret as it can appear in a line: as is, inside a Python repr, inside JSON."""
    out = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1]}
    return sorted((s.encode("utf-8") for s in out), key=len, reverse=True)


def mask(data, secrets):
    for s in secrets:
        data = data.replace(s, MASK)
    return data


def write_all(fd, data):
    while data:
        try:
            data = data[os.write(fd, data):]
        except InterruptedError:
            continue
        except OSError:
            return  # the journal went away: nothing to write to


class Filter:
    """Lines from the server's pipe to our stdout, each secret masked; a secret is never cut in two."""

    def __init__(self, secrets):
        self.secrets = secrets
        self.hold = max(len(s) for s in secrets) - 1
        self.buf = b""

    def feed(self, chunk):
        self.buf += chunk
        end = self.buf.rfind(b"\n") + 1
        if end == 0 and len(self.buf) > LONG_LINE:
            masked = mask(self.buf, self.secrets)  # what is left can only be the start of a secret, at the end
            end, self.buf = len(masked) - self.hold, masked
        out, self.buf = self.buf[:end], self.buf[end:]
        return mask(out, self.secrets)

    def flush(self):
        out, self.buf = mask(self.buf, self.secrets), b""
        return out


def serve(module, args, flag, secret, out_fd):
    """The child: the server's module in this process, its output into the pipe."""
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    if flag.startswith("env:"):
        os.environ[flag[4:]] = secret
        sys.argv = [module] + args
    else:
        sys.argv = [module] + args + ["--" + flag[5:], secret]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def relay(pid, read_fd, secrets):
    """The parent: pass signals on to the server, its output to the journal; exit as the server did."""
    for sig in PASSED_ON:
        signal.signal(sig, lambda signum, frame: _pass_on(pid, signum))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)  # one held since the fork is passed on now
    status = None
    deadline = None
    lines = Filter(secrets)
    while True:
        if status is None:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status, deadline = code, _now() + DRAIN_S
        if deadline is not None and _now() > deadline:
            break
        try:
            ready, _, _ = select.select([read_fd], [], [], 0.5)
        except InterruptedError:
            continue
        if not ready:
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        write_all(1, lines.feed(chunk))
    write_all(1, lines.flush())
    if status is None:
        status = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _pass_on(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass  # it has exited already


def _now():
    return time.monotonic()


def main(argv):
    if len(argv) < 3:
        die("usage: fleet-launch CREDENTIAL flag:NAME|env:NAME MODULE [ARG...]")
    name, flag, module, args = argv[0], argv[1], argv[2], argv[3:]
    if not (flag.startswith("flag:") or flag.startswith("env:")) or not flag.split(":", 1)[1]:
        die("the second argument must be flag:NAME or env:NAME, got " + repr(flag))
    secret = read_secret(name)
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    # A stop signal that comes between the fork and relay's handlers is held, never lost: it killed this parent
    # (its default action) and left the server running with the journal's pipe, or reached neither.
    signal.pthread_sigmask(signal.SIG_BLOCK, PASSED_ON)
    pid = os.fork()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)  # the server's own: their default actions
        os.close(read_fd)
        serve(module, args, flag, secret, write_fd)
        return 0
    os.close(write_fd)
    return relay(pid, read_fd, forms(secret))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
