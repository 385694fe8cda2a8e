# The host's own python, checked before root runs it (system_python_command: `sh -c TEXT fleet-interpreter PYTHON
# ARGS...`): owner.py's rule runs on it, so nothing of a user's may run first. The path, each link on the way to its
# real file (what it names walked too) and every folder above them are looked at (ls -ldn: lstat): all root's, none
# a group or anyone may write (a sticky folder as /tmp aside), none with an ACL. Then PYTHON ARGS... runs in this
# process; else one line on stderr, exit 77, nothing run. A path that leads nowhere: exit 127, as the shell says.
set -f  # the names ls prints are no patterns
py=$1
refuse() {
  echo "fleet runs nothing on $py as root: $1" >&2
  exit 77
}
look() {
  set -- "$1" $(LC_ALL=C ls -ldn -- "$1" 2>/dev/null)
  [ -n "$2" ] || { echo "fleet-interpreter: $py: not found" >&2; exit 127; }
  [ "$4" = 0 ] || refuse "$1 is not root's"
  case $2 in
    l* | d????????[tT]*) ;;  # a link's bits mean nothing; in a sticky folder none but root may swap root's entry
    ?????w*|????????w*) refuse "$1 is writable by others than root" ;;
    ??????????+*) refuse "$1 has an ACL" ;;
  esac
  case $2 in l*) return 0 ;; esac
  return 1
}
case $py in /*) ;; *) refuse "it is no absolute path" ;; esac
look / || :
cur= rest=${py#/} hops=0
while [ -n "$rest" ]; do
  name=${rest%%/*}
  case $rest in */*) rest=${rest#*/} ;; *) rest= ;; esac
  case $name in
    '' | .) continue ;;
    ..) cur=${cur%/*}; continue ;;
  esac
  if look "$cur/$name"; then
    hops=$((hops + 1))
    [ "$hops" -le 40 ] || refuse "its links loop"
    to=$(readlink -- "$cur/$name" && echo .) || refuse "$cur/$name cannot be read"
    to=${to%.}; to=${to%?}  # readlink's newline gone, a target's own trailing newlines kept ($(...) strips them)
    case $to in /*) cur= ;; esac
    rest=${to#/}${rest:+/$rest}
  else
    cur=$cur/$name
  fi
done
[ -f "$cur" ] || refuse "$cur is no file"
exec "$@"
