# The venv's packages as data (included by patch_host.py and scan.py, which run on the host's own python3 -I -S,
# never the venv's: its owner may change its interpreter, .pth files and packages, and fleet runs as root). Its
# site-packages and the folders its .pth files name are searched (SITE), never put on sys.path: a venv owner's csv.py
# there would be what `import csv` (importlib.metadata's) runs as root. A .pth line of code is never run, nor is any
# package imported: find() walks the path finder one part at a time (importlib.util.find_spec would import the
# parents of a dotted name).
import glob, importlib.machinery, os, sys
def venv_site(venv):
    found = []
    for sp in sorted(glob.glob(os.path.join(glob.escape(venv), "lib", "python3*", "site-packages"))):
        found.append(sp)
        for pth in sorted(glob.glob(os.path.join(glob.escape(sp), "*.pth"))):
            try:
                lines = open(pth, encoding="utf-8", errors="replace").read().splitlines()
            except OSError:
                continue
            for line in lines:
                if line.strip() and not line.startswith(("#", "import ", "import\t")):
                    d = os.path.join(sp, line.rstrip())
                    if os.path.isdir(d):
                        found.append(os.path.abspath(d))
    try:  # a venv made with --system-site-packages sees the host's own (root's) packages too
        cfg = open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8", errors="replace").read()
    except OSError:
        cfg = ""
    if any(k.strip() == "include-system-site-packages" and v.strip().lower() == "true"
           for k, _, v in (line.partition("=") for line in cfg.splitlines())):
        import site
        found += [d for d in site.getsitepackages() if os.path.isdir(d)]
    return found
SITE = []  # type: list  # the venv's folders (use_venv); empty: the python's own sys.path
def find(name, path=None):
    """The module spec of `name` (dotted: each parent's folders searched, none imported), or None."""
    spec, where = None, path if path is not None else (SITE or None)
    parts = name.split(".")
    for i in range(len(parts)):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), where)
        if spec is None:
            return None
        where = list(spec.submodule_search_locations or [])
        if i + 1 < len(parts) and not where:
            return None
    return spec
def distributions(name=None):
    """The installed distributions SITE holds (`name`'s alone where given), read as data."""
    import importlib.metadata as md
    return md.distributions(name=name, path=SITE or sys.path)
def dist_named(name):
    return next(iter(distributions(name)), None)
def dists_of(top):
    """The names of the distributions that install the top-level package `top` (packages_distributions's reading:
    top_level.txt, else the files they record)."""
    found = []
    for d in distributions():
        tops = (d.read_text("top_level.txt") or "").split() or \
            {f.parts[0] if len(f.parts) > 1 else f.stem for f in d.files or () if f.suffix == ".py"}
        if top in tops:
            found.append(d.metadata["Name"])
    return found
def use_venv(req):
    """The venv of the request (its "venv") searched by find() and distributions(); the python fleet names in what
    it says."""
    if not req.get("venv"):
        return sys.executable
    SITE[:] = venv_site(req["venv"])
    return req["venv"].rstrip("/") + "/bin/python"
