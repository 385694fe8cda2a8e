"""inv audit's scan on the host (fleet/patches/audit.py ships this text as `python -c` over one round trip).

usage: python -c TEXT BASE64_JSON {"scope": {package: [glob, ...]}}; prints `FLEET-JSON:{packages, files, sms,
sm_error}`: every preprocessor conditional and #error of C/CUDA files as [line, text, code lines after it], and
every gate-looking line of Python files as [line, text, the def or class it sits in]; each package with its
distribution and version (which releases a gate upstream keeps on purpose is known for). fleet.patches.audit.scan_text
does the same locally for text that is not on a host (patched contents, the upstream corpus); a test keeps the two
equal.
"""
import base64, glob, json, os, re, subprocess, sys
req = json.loads(base64.b64decode(sys.argv[1]))
#@include venv_site.py
# ruff: noqa: F821
# mypy: disable-error-code="name-defined"
# (find, use_venv, dist_named, dists_of: venv_site.py's, put in place of the include line when the text is shipped)
PYTHON = use_venv(req)
DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|error)\b")
PYGATE = re.compile(r"supported_major_versions|\bmajor\s+(not\s+)?in\b|_supported\b|get_platform\(\)\.is_")
DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)|^\s*class\s+(\w+)")


def enclosing_def(lines, index):
    level = len(lines[index]) - len(lines[index].lstrip())
    for j in range(index - 1, -1, -1):
        raw = lines[j]
        indent = len(raw) - len(raw.lstrip())
        if not raw.strip() or indent >= level:
            continue
        m = DEF.match(raw)
        if m:
            return m.group(1) or m.group(2)
        level = indent
    return ""


def dist_of(top):
    try:
        for name in dists_of(top):
            d = dist_named(name)
            if d is not None:
                return {"dist": name, "version": d.version}
    except Exception:
        pass
    return {}


def is_code(line):
    t = line.strip()
    return bool(t) and not t.startswith(("//", "/*", "*", "#"))
res = {"packages": {}, "files": {}, "sms": [], "sm_error": None}  # type: dict
smi = None  # type: subprocess.Popen | None
try:  # started first: NVML's start-up (a second or more on an 8-GPU host) overlaps the scan below
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
except Exception as e:
    smi, res["sm_error"] = None, "nvidia-smi: %s" % e
for pkg, patterns in req["scope"].items():
    spec = find(pkg)
    if spec is None or not spec.submodule_search_locations:
        res["packages"][pkg] = {"error": "not importable by %s" % PYTHON}; continue
    root = list(spec.submodule_search_locations)[0]
    res["packages"][pkg] = dict(dist_of(pkg), path=root)
    paths = set()
    for pat in patterns:
        paths.update(glob.glob(os.path.join(root, pat), recursive=True))
    for path in sorted(paths):
        if not os.path.isfile(path):
            continue
        kind = "py" if path.endswith(".py") else "c"
        try:
            text = open(path, encoding="utf-8", errors="replace").read().split("\n")
        except OSError:
            continue
        keep, i = [], 0  # type: list, int
        while i < len(text):
            start, line = i + 1, text[i]
            if kind == "c":
                while line.endswith("\\") and i + 1 < len(text):
                    i += 1; line = line[:-1] + " " + text[i]
                if DIRECTIVE.match(line):
                    keep.append([start, line, 0])
                elif keep and is_code(line):
                    keep[-1][2] += 1
            elif PYGATE.search(line):
                keep.append([start, line, enclosing_def(text, i)])
            i += 1
        if keep:
            res["files"][pkg + "/" + os.path.relpath(path, root)] = {"kind": kind, "lines": keep}
if smi is not None:
    try:
        out, err = smi.communicate(timeout=30)
        for line in out.split("\n"):
            if line.strip():
                a, b = line.strip().split("."); res["sms"].append(int(a) * 10 + int(b))
        if not res["sms"]:
            res["sm_error"] = "nvidia-smi exit %d: %s" % (smi.returncode, (err or out).strip()[:200])
    except subprocess.TimeoutExpired:
        smi.kill(); smi.communicate()
        res["sm_error"] = "nvidia-smi: no answer within 30 s after the scan"
    except Exception as e:
        res["sm_error"] = "nvidia-smi: %s" % e
print("FLEET-JSON:" + json.dumps(res))
