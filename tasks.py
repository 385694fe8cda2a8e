"""fleet's command line: thin Invoke tasks. Logic lives in fleet/ (and sandbox/ for the sandbox fleet)."""

from invoke import Collection, task  # noqa: F401

ns = Collection()
