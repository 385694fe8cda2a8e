# fleet's venv of one package set (fleet.host.venvs): built beside the others, published only when whole.
#   $1 python  $2 the venv's path (/var/lib/fleet/venvs/<digest>)  $3 the host's wheel folder
#   $4 the marker's text  $5... "SHA256 FILENAME" of every wheel of the venv (the lock's), each checked, then
#   installed by its path and nothing else: no --find-links over the folder, where a wheel another build left (a
#   torch-2.9.1+cu130 beside the checked torch-2.9.1) would meet the same requirement and win.
# The venv is made in <venvs>/.build/<digest>.<pid> (never moved: a venv's scripts name their own path) and
# published by renaming a symlink onto <venvs>/<digest>: a half-built venv is never used.
#   $1 is the host's own python (/usr/bin/python3), checked first (pycheck.sh: root's all the way, else exit 77 and
#   one line, nothing built): root runs it, and the venv is built on it. Never a bare `python3`: a PATH would pick it,
#   and uv reads one as "any Python 3" (a uv-managed one first, or a download).
# uv is used when a uv pycheck.sh passes runs `uv --version` (else pip), always with --python $1. Its cache is made
# beside the build and removed with it: nothing outside /var/lib/fleet grows, no index or download is tried;
# files are hardlinked from it whatever UV_LINK_MODE says (symlinks into a removed cache would be a dead venv).
# Exit 0 "built pip|uv" (or "exists"); 70 bad use; 71 a wheel is missing or not the controller's; 72 the build
# failed (pip's or uv's error lines and last lines on stderr, nothing left behind); 73 publishing failed.
# The host's own pip and uv settings never steer the build: every PIP_* and UV_* of its environment (a PIP_TARGET,
# PIP_USER, UV_PYTHON ...) and the Python variables that would change what pip imports or where it installs.
set -u
#@include pycheck.sh
for v in $(env | sed -nE 's/^((PIP|UV)_[A-Za-z0-9_]*)=.*/\1/p'); do unset "$v"; done
unset PYTHONPATH PYTHONHOME PYTHONUSERBASE VIRTUAL_ENV CONDA_PREFIX
py=$1 final=$2 wheels=$3 marker=$4
shift 4
root=${final%/*} name=${final##*/}
case "$name" in *[!0-9a-f]* | "") echo "not a venv name: $name" >&2; exit 70 ;; esac
if [ -f "$final/.fleet-venv" ]; then echo exists; exit 0; fi
[ $# -gt 0 ] || { echo "no wheels to install" >&2; exit 70; }
for arg in "$@"; do
  want=${arg%% *} file=${arg#* }
  case "$file" in */* | "" | *[!A-Za-z0-9._+-]*) echo "not a wheel's file name: $file" >&2; exit 70 ;; esac
  got=$(sha256sum -- "$wheels/$file" 2>/dev/null) || { echo "wheel $file is not on the host" >&2; exit 71; }
  [ "${got%% *}" = "$want" ] || { echo "wheel $file on the host is not the controller's (sha256 differs)" >&2; exit 71; }
  shift
  set -- "$@" "$wheels/$file"
done
mkdir -p "$root/.build" || exit 73
build="$root/.build/$name.$$" log="$root/.build/$name.$$.log" cache="$root/.build/$name.$$.uv-cache"
rm -rf "$build" "$cache"
python_checked "$py" || exit
python=$py
uv=$(command -v uv) && python_checked "$uv" 2>/dev/null && timeout 60 "$uv" --version >/dev/null 2>&1 </dev/null || uv=
if [ -n "$uv" ]; then
  tool=uv
  "$uv" venv --quiet --no-config --offline --no-project --no-python-downloads --cache-dir "$cache" --python "$python" \
      "$build" >"$log" 2>&1 &&
    "$uv" pip install --no-config --offline --no-index --no-python-downloads \
      --cache-dir "$cache" --link-mode hardlink --compile-bytecode --python "$build/bin/python" "$@" >>"$log" 2>&1 &&
    { [ ! -f "$build/.lock" ] || chmod 0644 "$build/.lock"; }  # uv makes it world-writable
else
  tool=pip
  "$python" -I -m venv "$build" >"$log" 2>&1 &&
    PIP_CONFIG_FILE=/dev/null "$build/bin/python" -I -m pip install --no-index \
      --disable-pip-version-check --no-cache-dir --no-input --quiet "$@" >>"$log" 2>&1
fi
rc=$?
rm -rf "$cache"
if [ $rc -ne 0 ]; then
  # the lines that say why (uv's "cause:" is under its "error:", and an unknown flag's above its usage), then the last
  { grep -iE '^[[:space:]]*(error|cause): ' "$log" | tail -n 3; tail -n 5 "$log"; } | cut -c1-300 >&2
  rm -rf "$build" "$log"
  exit 72
fi
rm -f "$log"
printf '%s\n' "$marker" > "$build/.fleet-venv" && sync &&
  ln -sfn ".build/$name.$$" "$root/.$name.new" && mv -T "$root/.$name.new" "$final" ||
  { rm -rf "$build" "$root/.$name.new"; exit 73; }
printf '%s %s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" "$tool" >> "$root/builds.log"
echo "built $tool"
