# python_checked PATH: the interpreter.sh check as a function (in a subshell of its own: its exits end only it).
# The path, each link on the way to its real file (what it names walked too) and every folder above them are
# looked at (ls -ldn: lstat): all root's, none a group or anyone may write (a sticky folder as /tmp aside), none
# with an ACL; so is its standard library (below). Exit 0; else one line on stderr and exit 77; a path that leads
# nowhere: exit 127, as the shell says.
# Included (`#@include pycheck.sh`) by interpreter.sh, status.sh and venv_build.sh: every python root runs.
python_checked() (
  set -f  # the names ls prints are no patterns
  py=$1
  refuse() {
    echo "fleet runs nothing on $py as root: $1" >&2
    exit 77
  }
  look() {
    set -- "$1" $(LC_ALL=C ls -ldn -- "$1" 2>/dev/null)
    [ -n "${2-}" ] || { echo "fleet-interpreter: $py: not found" >&2; exit 127; }
    [ "${4-}" = 0 ] || refuse "$1 is not root's"
    case $2 in
      l* | d????????[tT]*) ;;  # a link's bits mean nothing; in a sticky folder none but root may swap root's entry
      ?????w*|????????w*) refuse "$1 is writable by others than root" ;;
      ??????????+*) refuse "$1 has an ACL" ;;
    esac
    case $2 in l*) return 0 ;; esac
    return 1
  }
  case $py in /*) ;; *) refuse "it is no absolute path" ;; esac
  walk() {  # cur: the real path $1 leads to, every object on the way looked at
    cur= rest=${1#/} hops=0
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
  }
  look / || :
  walk "$py"
  [ -f "$cur" ] || refuse "$cur is no file"
  # Its standard library (getpath's prefix: the folder above the real file's; lib-dynload within), every module it
  # imports at start (encodings...) before owner.py runs: each object root's, none a group or anyone may write, none
  # with an ACL. lib/python3/dist-packages (Debian's) is no part of it: -S keeps it off the path.
  real=$cur prefix=${cur%/*}
  prefix=${prefix%/*}
  case ${real##*/} in python3.[0-9]*) want=${real##*/} ;; *) want='python3.[0-9]*' ;; esac
  set +f
  for lib in "$prefix"/lib/$want "$prefix"/lib64/$want "$prefix"/lib/python3[0-9]*.zip; do
    set -f
    [ -e "$lib" ] || continue
    walk "$lib"
    bad=$(find "$cur" ! -user 0 -print 2>/dev/null | head -n 1)  # the first will do: the rest, cut off, quiet
    [ -z "$bad" ] || refuse "$bad is not root's"
    bad=$(find "$cur" ! -type l \( -perm -020 -o -perm -002 \) -print 2>/dev/null | head -n 1)
    [ -z "$bad" ] || refuse "$bad is writable by others than root"
    bad=$(find "$cur" -exec ls -ldn -- {} + 2>/dev/null | sed -n '/^..........+/{p;q;}')
    [ -z "$bad" ] || refuse "$cur holds a file with an ACL"
  done
)
