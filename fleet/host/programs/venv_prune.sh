# Drop fleet's venvs no release refers to any more (fleet.host.venvs.prune), and builds a dead run left.
#   $1 the venvs folder (/var/lib/fleet/venvs)  $2 the releases folder  $3... more places that name venvs (units)
# A venv is kept while any file there names it (a release's unit, the live unit): rollback never needs an install.
# Prints "pruned <digest>" per venv dropped.
set -u
root=$1
shift
[ -d "$root" ] && [ -d "${1:-}" ] || exit 0  # no venvs, or no releases to say which are used: keep all
set -- $(for d in "$@"; do [ -e "$d" ] && printf '%s\n' "$d"; done)
found=$(grep -rhoE "$root/[0-9a-f]{16}" "$@")
[ $? -le 1 ] || { echo "cannot read what names the venvs: nothing pruned" >&2; exit 3; }
keep=$(printf '%s\n' "$found" | sort -u)
for link in "$root"/*; do
  [ -L "$link" ] || continue
  case " $(echo $keep) " in *" $link "*) continue ;; esac
  target=$(readlink "$link")
  rm -f "$link" || continue
  case "$target" in .build/*/* | *..*) ;; .build/*) rm -rf "${root:?}/$target" ;; esac
  echo "pruned ${link##*/}"
done
for dir in "$root"/.build/*; do
  [ -e "$dir" ] || continue
  used=no
  for link in "$root"/*; do
    [ -L "$link" ] && [ "$(readlink "$link")" = ".build/${dir##*/}" ] && used=yes
  done
  [ "$used" = no ] && rm -rf "$dir"
done
exit 0
