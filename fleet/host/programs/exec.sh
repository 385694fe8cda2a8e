# inv exec: the operator's command ($2) in the login user's shell, under the host's own deadline of $1 seconds.
# timeout(1) runs it in a process group of its own and signals the whole group at the deadline (TERM, then KILL
# $KILL_AFTER s later), so nothing it started is left running once fleet reports the timeout, and a retry never
# runs it twice. A host without timeout(1) runs it as is, and says so on stderr.
KILL_AFTER=5
# Not exec'd: at KILL, timeout(1) kills its own group, itself included; this shell, outside it, says 137.
if command -v timeout >/dev/null 2>&1; then
  timeout -k "$KILL_AFTER" "$1" "${SHELL:-/bin/sh}" -c "$2"
  exit $?
fi
echo "fleet: this host has no timeout(1): the command is not ended on the host at the deadline" >&2
exec "${SHELL:-/bin/sh}" -c "$2"
