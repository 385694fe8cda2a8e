"""JIT specs, builds and the module cache (SIMULATED flashinfer 0.6.3).

A build is simulated faithfully where it matters: it targets the archs the module's gate handed out
(the -gencode flags), "compiles" by running the real C preprocessor over the module's sources with
-D__CUDA_ARCH__ for each target (so header edits count), takes a modelled time, and writes the
module into the JIT cache. Like ninja with depfiles, it rebuilds when a source, an included header
or the flags changed; a prebuilt AOT module wins over the sources (source patches ignored).
What ninja knows of a built target sits beside it (`.ninja_log`: the digest of its inputs); ninja never
reads the .so itself, so a truncated module whose log still matches is loaded, and fails to load
(dlopen's "file too short"), as a real one would.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from sglang_sim_core import env as sim_env
from sglang_sim_core import kernels
from sglang_sim_core.logs import flashinfer_logger

from . import env as jit_env

logger = flashinfer_logger()

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


@dataclass
class SimModule:
    """What a loaded .so holds: the archs it was built for and the kernel bodies that made it."""

    name: str
    archs: list[int]
    present: dict[int, set[str]]
    path: Path

    def has_kernel_image(self, arch: int) -> bool:
        return arch in self.archs

    def missing_kernels(self, arch: int) -> list[str]:
        return kernels.BuildResult(ok=True, present=self.present).missing(arch)


@dataclass
class JitSpec:
    name: str
    sources: list[Path]
    extra_cuda_cflags: list[str] = field(default_factory=list)
    compile_seconds: float = 120.0

    @property
    def build_dir(self) -> Path:
        return jit_env.FLASHINFER_JIT_DIR / self.name

    @property
    def jit_library_path(self) -> Path:
        return self.build_dir / f"{self.name}.so"

    @property
    def ninja_path(self) -> Path:
        return self.build_dir / "build.ninja"

    @property
    def ninja_log(self) -> Path:
        return self.build_dir / ".ninja_log"

    @property
    def aot_path(self) -> Path:
        path = jit_env.FLASHINFER_AOT_DIR / self.name / f"{self.name}.so"
        cache_pkg = jit_env.jit_cache_package_dir()
        if not path.exists() and cache_pkg is not None:
            path = cache_pkg / self.name / f"{self.name}.so"
        return path

    @property
    def is_aot(self) -> bool:
        return self.aot_path.exists()

    @property
    def archs(self) -> list[int]:
        return sorted({kernels.arch_number(m) for m in re.findall(r"compute_(\w+)", " ".join(self.extra_cuda_cflags))})

    def _deps_digest(self) -> str:
        h = hashlib.sha256(" ".join(self.extra_cuda_cflags).encode())
        seen: set[Path] = set()
        todo = list(self.sources)
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            try:
                text = path.read_text()
            except OSError:
                continue
            h.update(str(path).encode() + b"\0" + text.encode())
            for inc in _INCLUDE.findall(text):
                for base in (path.parent, jit_env.FLASHINFER_INCLUDE_DIR):
                    if (base / inc).exists():
                        todo.append(base / inc)
                        break
        return h.hexdigest()

    def _write_ninja(self) -> None:
        lines = [
            "ninja_required_version = 1.3",
            "cxx = c++",
            "nvcc = /usr/local/cuda/bin/nvcc",
            f"cuda_cflags = -I{jit_env.FLASHINFER_INCLUDE_DIR} {' '.join(self.extra_cuda_cflags)}",
            "rule cuda_compile",
            "  depfile = $out.d",
            "  deps = gcc",
            "  command = $nvcc --generate-dependencies-with-compile --dependency-output $out.d $cuda_cflags "
            "-c $in -o $out",
            "",
        ]
        objs = []
        for src in self.sources:
            obj = f"{src.stem}.cuda.o"
            objs.append(obj)
            lines.append(f"build {obj}: cuda_compile {src}")
        lines.append(f"build {self.name}.so: link {' '.join(objs)}")
        self.ninja_path.write_text("\n".join(lines) + "\n")

    def build(self, verbose: bool) -> kernels.BuildResult:
        self.build_dir.mkdir(parents=True, exist_ok=True)
        if not self.ninja_path.exists():
            self._write_ninja()
        n = len(self.sources) + 1
        if verbose:
            for i, src in enumerate(self.sources, 1):
                print(
                    f"[{i}/{n}] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile "
                    f"{' '.join(self.extra_cuda_cflags)} -c {src} -o {src.stem}.cuda.o",
                    flush=True,
                )
        result = kernels.preprocess(self.sources, jit_env.FLASHINFER_INCLUDE_DIR, self.archs)
        if not result.ok:
            first = self.sources[0]
            output = (
                f"FAILED: {first.stem}.cuda.o \n/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile "
                f"{' '.join(self.extra_cuda_cflags)} -c {first} -o {first.stem}.cuda.o \n{result.log}"
                "ninja: build stopped: subcommand failed.\n"
            )
            raise RuntimeError("Ninja build failed. Ninja output:\n" + output)
        sim_env.sleep(self.compile_seconds)
        if verbose:
            print(f"[{n}/{n}] c++ -shared -o {self.name}.so", flush=True)
        return result

    def _save(self, result: kernels.BuildResult, digest: str) -> None:
        payload = {
            "simulated_module": self.name,
            "archs": self.archs,
            "present": {str(a): sorted(m) for a, m in result.present.items()},
            "deps": digest,
        }
        tmp = self.jit_library_path.with_suffix(".so.tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, self.jit_library_path)
        log = self.ninja_log.with_suffix(".tmp")
        log.write_text(digest + "\n")
        os.replace(log, self.ninja_log)

    def load_built(self, so_path: Path) -> SimModule:
        """A module this cache built: one that does not parse is a broken shared object."""
        try:
            data = json.loads(so_path.read_text())
            return SimModule(self.name, [int(a) for a in data["archs"]],
                             {int(a): set(m) for a, m in data["present"].items()}, so_path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            raise OSError(f"{so_path}: file too short") from None

    def load(self, so_path: Path) -> SimModule:
        try:
            data = json.loads(so_path.read_text())
            archs = [int(a) for a in data["archs"]]
            present = {int(a): set(m) for a, m in data["present"].items()}
        except (OSError, ValueError, KeyError, UnicodeDecodeError):
            # a real prebuilt (AOT / flashinfer-jit-cache) module: built from pristine sources for
            # the archs upstream ships (9.0a, 10.0a)
            archs = [900, 1000]
            present = {a: {n for n, (lo, hi) in kernels.PRISTINE.items() if lo <= a < hi} for a in archs}
        return SimModule(self.name, archs, present, so_path)

    def _cached_digest(self) -> str | None:
        """What ninja's log says the target was built from (None: never built, or the .so is gone)."""
        if not self.jit_library_path.exists():
            return None
        try:
            return self.ninja_log.read_text().strip()
        except OSError:
            pass
        try:  # a cache written before the log
            return json.loads(self.jit_library_path.read_text()).get("deps")
        except (OSError, ValueError, AttributeError):
            return None

    def build_and_load(self) -> SimModule:
        if self.is_aot:
            return self.load(self.aot_path)
        verbose = os.environ.get("FLASHINFER_JIT_VERBOSE", "0") == "1"
        self.build_dir.mkdir(parents=True, exist_ok=True)
        lock_path = jit_env.FLASHINFER_JIT_DIR / f"{self.name}.lock"
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            digest = self._deps_digest()
            if self._cached_digest() != digest:
                # as flashinfer 0.6.3's build_and_load: silent unless FLASHINFER_JIT_VERBOSE=1 (ninja -v)
                start = time.monotonic()
                result = self.build(verbose)
                self._save(result, digest)
                _jit_log(f"built {self.name} for {self.archs} in {time.monotonic() - start:.1f} s")
            return self.load_built(self.jit_library_path)


def _jit_log(line: str) -> None:
    try:
        jit_env.FLASHINFER_JIT_LOG.parent.mkdir(parents=True, exist_ok=True)
        with open(jit_env.FLASHINFER_JIT_LOG, "a") as f:
            f.write(time.strftime("%Y-%m-%d %H:%M:%S ") + line + "\n")
    except OSError:
        pass


def gen_jit_spec(
    name: str,
    sources: list[Path],
    extra_cuda_cflags: list[str] | None = None,
    compile_seconds: float = 120.0,
) -> JitSpec:
    return JitSpec(name, [Path(s) for s in sources], list(extra_cuda_cflags or []), compile_seconds)


def clear_cache_dir() -> None:
    import shutil

    if jit_env.FLASHINFER_JIT_DIR.exists():
        shutil.rmtree(jit_env.FLASHINFER_JIT_DIR)
