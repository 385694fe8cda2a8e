# inv status's one round trip (fleet/multihost/status.py parses it): sections split by lines @@fleet-status@@.
# usage: sh -c "$(this file)" fleet-status UNIT PORT ROOT PYTHON   (ROOT: fleet's state, /var/lib/fleet; UNIT, PORT:
#   the inventory's unit and --port, '' where not given: the unit and port of the current release's unit file win
#   over UNIT, and over the default 30000 (a playbook's serve.unit and serve.port win over the inventory's); PYTHON: the
#   host's own, /usr/bin/python3, run as PYTHON -I -S only after pycheck.sh's check: sections 4 and 8 need it; one
#   that check refuses runs nothing, and section 4 says `refused WHY`)
#   1 the unit's state (and whether a boot starts it)        2 the current release's manifest    3 /health's HTTP code
#   4 sha256 of every file the release manages     5 GPU power draw,limit    6 sglang's /metrics gauges
#   7 what a dead run left (releases in progress, the lock's owner, patch runs left applying)
#   8 the sglang router a router: playbook runs here (one JSON line), or nothing
#   9 GPU health: the health query's CSV (GPUs nvidia-smi cannot open say so), then @xid and the kernel log's
#     Xid events since boot (xid.sh)
# The sections that wait on something (the two HTTP calls with their 3 s limits, nvidia-smi's NVML start-up,
# the router's unit and /health) are independent: they run at once, each into a file of its own, and every
# section is printed whole and in order (one after the other where the host has no mktemp).
unit=$1; port=$2; root=$3
served=$(sed -n 's|.*"/etc/systemd/system/\([-A-Za-z0-9:_.@\\]*\)\.service"[[:space:]]*:.*|\1|p' \
  "$root/current/manifest.json" 2>/dev/null | head -n 1)
[ -n "$served" ] && unit=$served
[ -n "$port" ] || port=$(sed -n '/^ExecStart=/s/.* --port \([0-9][0-9]*\).*/\1/p' \
  "$root/current/files/etc__systemd__system__$unit.service" 2>/dev/null | head -n 1)
[ -n "$port" ] || port=30000
M=@@fleet-status@@
#@include pycheck.sh
py=; refused=$(python_checked "$4" 2>&1) && py=$4
health() { curl -s -o /dev/null -w '%{http_code}' -m 3 "http://127.0.0.1:$port/health"; echo; }
power() { nvidia-smi --query-gpu=power.draw,power.limit --format=csv,noheader,nounits 2>/dev/null; }
T=; command -v timeout >/dev/null 2>&1 && T="timeout 5"
#@include xid.sh
gpuhealth() {
  $T nvidia-smi --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,remapped_rows.pending,remapped_rows.failure,retired_pages.pending,gpu_recovery_action --format=csv,nounits 2>&1
  echo @xid; kernel_log
}
# /metrics needs no API key in sglang (like /health); only the gauges shown travel back.
metrics() {
  curl -s -m 3 "http://127.0.0.1:$port/metrics" 2>/dev/null \
    | grep -E '^(sglang:num_running_reqs|sglang:num_queue_reqs|sglang:gen_throughput|sglang:token_usage)[{ ]'
}
router() {
[ -n "$py" ] || return 0
"$py" -I -S - "$root/router/current/manifest.json" 2>/dev/null <<'PY'
import json, subprocess, sys, urllib.request
try: m = json.load(open(sys.argv[1]))
except (OSError, ValueError): raise SystemExit
c = m.get('config') or {}; u = c.get('unit') or 'sglang-router'; a = c.get('listen') or '127.0.0.1'
a = '127.0.0.1' if a in ('0.0.0.0', '::') else a; a = '[%s]' % a if ':' in a else a
s = subprocess.run(['systemctl', 'show', u, '-p', 'ActiveState', '--value'], capture_output=True,
                   text=True).stdout.strip()
try: h = urllib.request.urlopen('http://%s:%d/health' % (a, int(c.get('port') or 0)), timeout=3).status
except Exception as e: h = getattr(e, 'code', None)
print(json.dumps({'release': m.get('id'), 'unit': u, 'state': s, 'health': h,
                  'workers': len(c.get('workers') or [])}))
PY
}
hashes() {
[ -z "$refused" ] || { echo "refused $refused"; return; }  # refused, or no such python: nothing was hashed
"$py" -I -S - "$root/current/manifest.json" 2>/dev/null <<'PY'
import hashlib, json, sys
m = json.load(open(sys.argv[1]))
for p in list(m.get('files', {})) + list((m.get('patches') or {}).get('files', {})):
    if p.startswith('/'):
        try: print(hashlib.sha256(open(p, 'rb').read()).hexdigest(), p)
        except OSError: pass
PY
}
leftovers() {
  for m in $(grep -l '"status": "in-progress"' "$root"/releases/*/manifest.json 2>/dev/null); do
    d=${m%/manifest.json}; echo "release ${d##*/} $(tail -n 1 "$d/events.jsonl" 2>/dev/null)"
  done
  echo "lock $(cat "$root/lock/owner.json" 2>/dev/null)"
  for m in $(grep -lE '"status": "(applying|reverting)"' "$root"/backups/runs/*/manifest.json 2>/dev/null); do
    d=${m%/manifest.json}; echo "patch-run ${d##*/}"
  done
}
# fleet_out: a name nothing above uses.
if fleet_out=$(mktemp -d 2>/dev/null); then
  trap 'rm -rf "$fleet_out"' EXIT
  health > "$fleet_out/3" & power > "$fleet_out/5" & metrics > "$fleet_out/6" & router > "$fleet_out/8" &
  gpuhealth > "$fleet_out/9" 2>&1 &
  section() { cat "$fleet_out/$1"; }
else
  section() { case $1 in 3) health;; 5) power;; 6) metrics;; 8) router;; 9) gpuhealth 2>&1;; esac; }
fi
systemctl show "$unit" -p ActiveState -p SubState -p MainPID -p Result -p UnitFileState -p DropInPaths 2>/dev/null
echo $M; cat "$root/current/manifest.json" 2>/dev/null
h=$(hashes); l=$(leftovers)
wait
echo $M; section 3; echo $M
[ -n "$h" ] && printf '%s\n' "$h"
echo $M; section 5
echo $M; section 6
echo $M; printf '%s\n' "$l"
echo $M; section 8
echo $M; section 9
true
