"""A command that runs a venv's code (its python, its packages), run as the venv's owner (owner.py's rule).

usage: python -I -S -c TEXT fleet-as_owner VENV COMMAND...   run as root: COMMAND as the one user other than root
                                                              who may change the venv (its groups, HOME, USER; none
                                                              of root's session, root's folder not its working
                                                              folder: become()), as root where root alone may
       python -I -S -c TEXT fleet-as_owner --who VENV [PATH...]  prints `uid:gid` of that user, nothing for root;
                                                              each PATH (a file or a folder, walked whole) counts
                                                              as part of the venv: what else its python loads
       python -I -S -c TEXT fleet-as_owner --as OWNER COMMAND  COMMAND as OWNER, what --who printed before ("": root):
                                                              the rule asked once for several commands
A venv others may change too is refused: exit 77, one line `fleet runs nothing of VENV as root: WHY`. Not run as
root, COMMAND runs as it is.
"""
import sys
#@include owner.py
# ruff: noqa: F821
# mypy: disable-error-code="name-defined"
# (venv_owner, decide, drop, Refused: owner.py's, put in place of the include line when the text is shipped)
# root's session, never the owner's: runuser -u keeps them all (and root's working folder); the owner's code must not
# be pointed at root's runtime folder, bus, agent or config
ROOTS = ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
         "XDG_STATE_HOME", "XDG_SESSION_ID", "MAIL", "SSH_AUTH_SOCK", "OLDPWD", "PWD")
def owned(path, uid):
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid
def root_alone(path):
    """Whether root alone may change the folder `path` and those above it (owner.py's rule): root's code may start
    in it."""
    try:
        real = os.path.realpath(path)
        return not os.lstat(real).st_mode & 0o022 and decide(paths=[real]) is None  # a sticky /tmp: anyone adds
    except (Refused, OSError):
        return False
def become(who):
    """This process as `who` (drop()), with the owner's environment: HOME, USER, LOGNAME its, root's session (ROOTS)
    gone, XDG_RUNTIME_DIR the owner's own /run/user/UID where that is its folder; in the working folder where it is
    the owner's (a benchmark's $d/w), else in its home where it may enter it, else in /."""
    uid, _, name, home = who
    here = owned(".", uid)
    drop(who)
    for var in ROOTS:
        os.environ.pop(var, None)
    for folder in ([] if here else [home, "/"]):
        try:
            os.chdir(folder)
            break
        except OSError:
            pass
    os.environ.update(HOME=home, **({"USER": name, "LOGNAME": name} if name else {}))
    if owned("/run/user/%d" % uid, uid):
        os.environ["XDG_RUNTIME_DIR"] = "/run/user/%d" % uid
    try:
        os.environ["PWD"] = os.getcwd()
    except OSError:
        pass
def run_as(who, argv):
    if who is not None:
        become(who)
    elif os.geteuid() == 0 and not root_alone("."):  # sudo keeps the login user's folder, and python -c, -m put it first on sys.path
        os.chdir("/")
        os.environ["PWD"] = "/"
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        sys.stderr.write("fleet-as_owner: %s: %s\n" % (argv[0], e.strerror))
        sys.exit(127 if e.errno == errno.ENOENT else 126)
def decided(owner):
    """(uid, gid, name, home) of OWNER, `uid:gid` as --who printed it; None for "" (root)."""
    if not owner:
        return None
    uid, gid = (int(x) for x in owner.split(":"))
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return uid, gid, None, "/"
    return uid, gid, pw.pw_name, pw.pw_dir or "/"
def main(args):
    if args[:1] == ["--as"]:
        return run_as(decided(args[1]) if os.geteuid() == 0 else None, args[2:])
    who_only = args[:1] == ["--who"]
    venv, argv = (args[1], None) if who_only else (args[0], args[1:])
    if os.geteuid() != 0:
        return None if who_only else run_as(None, argv)
    try:
        who = venv_owner(venv, also=tuple(args[2:]) if who_only else ())
    except Refused as e:
        sys.stderr.write("fleet runs nothing of %s as root: %s\n" % (venv.rstrip("/") or "/", e.strerror))
        sys.exit(77)
    if who_only:
        if who is not None:
            print("%d:%d" % (who[0], who[1]))
        return None
    return run_as(who, argv)
main(sys.argv[2:])
