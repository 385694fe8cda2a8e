# $1 a venv, then a command that runs its code (its python, its packages). Run as root, the command runs as the
# one user other than root who may change that code: the owner of anything in the venv, of a folder above it, of
# its python's real file or a folder above that (runuser, HOME that user's); as root only where root alone may.
# A venv that others may change too (world-writable, group-writable but for a user's own group, or two users') is
# refused: exit 77, one line.
v=${1%/}; shift
[ "$(id -u)" = 0 ] || exec "$@"
[ -d "$v" ] || exec "$@"  # no venv: the command fails as it would (no such python)
r=$(readlink -f -- "$v") || r=$v  # a venv reached by a link: the link's folders and the real ones
py=$(readlink -f -- "$v/bin/python" 2>/dev/null) || py=
who=$(
  for p in "$v" "$r" "$py"; do
    d=$p
    while [ -n "$d" ] && [ "$d" != / ]; do  # the path's folders: whoever may rename one may swap what is below it
      d=${d%/*}; [ -n "$d" ] || d=/
      stat -c '%U %G %A %n' -- "$d"
    done
  done
  [ -z "$py" ] || stat -c '%U %G %A %n' -- "$py"
  find "$r" -xdev \( ! -user root -o \( ! -type l -perm /022 \) \) -printf '%u %g %M %p\n' 2>/dev/null
)
users=$(printf '%s\n' "$who" | awk '$1 != "root" && $1 != "" { print $1 }' | sort -u)
open=$(printf '%s\n' "$who" | awk 'substr($3, 1, 1) != "l" && substr($3, 10, 1) != "t" &&
  ((substr($3, 6, 1) == "w" && $2 != $1) || substr($3, 9, 1) == "w") { print $4; exit }')
if [ -n "$open" ]; then
  echo "fleet runs nothing of $v as root: $open is writable by others than its owner" >&2; exit 77
fi
case $users in
  "") exec "$@" ;;
  *"
"*) echo "fleet runs nothing of $v as root: it is owned by $(echo $users | tr ' ' ','), not one user" >&2; exit 77 ;;
esac
home=$(getent passwd "$users" | cut -d: -f6)
exec runuser -u "$users" -- env HOME="${home:-/}" "$@"
