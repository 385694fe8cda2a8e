# inv exec: the operator's command ($2) in the login user's shell, under the host's own deadline of $1 seconds.
# Nothing the command started outlives the deadline, whatever it did to leave timeout(1)'s process group (setsid,
# a double fork): where systemd runs the host, the command runs in a transient scope of its own (a cgroup:
# systemd-run --scope; --user for a login user that is not root). timeout(1) inside it keeps the exit status (124
# after TERM, 137 when KILL was needed); then every process left in the scope is sent TERM, and KILL $KILL_AFTER s
# later. The scope's RuntimeMaxSec ends what a command that finished in time left running, and everything when
# this shell is gone (a dropped link). Without a scope only the process group is ended, and a line on stderr
# says so; without timeout(1) the command runs as is, and says so. The command is never part of a command line
# of this script: it is $2, given to the shell as one argument.
KILL_AFTER=5
shell=${SHELL:-/bin/sh}
if ! command -v timeout >/dev/null 2>&1; then
  echo "fleet: this host has no timeout(1): the command is not ended on the host at the deadline" >&2
  exec "$shell" -c "$2"
fi
user=
[ "$(id -u)" = 0 ] || user=--user
unit="fleet-exec-$(date +%s)-$$"
# RuntimeMaxSec: the deadline, the kill's grace and a second, past timeout(1)'s end (a time span sums its parts)
if [ -d /run/systemd/system ] && command -v systemd-run >/dev/null 2>&1 && command -v systemctl >/dev/null 2>&1 &&
   systemd-run $user --scope --quiet --collect -p "RuntimeMaxSec=${1}s ${KILL_AFTER}s 1s" \
     -p "TimeoutStopSec=${KILL_AFTER}s" -- true >/dev/null 2>&1 </dev/null; then
  systemd-run $user --scope --quiet --collect --unit "$unit" -p "RuntimeMaxSec=${1}s ${KILL_AFTER}s 1s" \
    -p "TimeoutStopSec=${KILL_AFTER}s" -- timeout -k "$KILL_AFTER" "$1" "$shell" -c "$2"
  rc=$?
  # 124/137: the deadline came (or the command said 124 itself: what it left is ended as well)
  case $rc in
    124|137)
      [ $rc = 124 ] && systemctl $user kill --signal=TERM "$unit.scope" >/dev/null 2>&1
      i=0
      while [ $rc = 124 ] && [ $i -lt $((KILL_AFTER * 10)) ] &&
            systemctl $user is-active --quiet "$unit.scope" >/dev/null 2>&1; do
        sleep 0.1
        i=$((i + 1))
      done
      systemctl $user kill --signal=KILL "$unit.scope" >/dev/null 2>&1 ;;
  esac
  exit $rc
fi
echo "fleet: no systemd scope here: at the deadline only the command's process group is ended" >&2
# Not exec'd: at KILL, timeout(1) kills its own group, itself included; this shell, outside it, says 137.
timeout -k "$KILL_AFTER" "$1" "$shell" -c "$2"
exit $?
