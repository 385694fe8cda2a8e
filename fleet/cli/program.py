"""`fleet`: the tasks of the clone's tasks.py from any folder (a site's, beside the clone), as `inv` runs them
in the clone; `fleet --version` says fleet's version. The site is found from the working folder (fleet.site)."""

from __future__ import annotations

import importlib.util
from importlib.metadata import version

from invoke.collection import Collection
from invoke.program import Program

from fleet.cli import tasking
from fleet.site import SHIPPED


def main() -> None:
    tasking.BINARY[0] = "fleet"
    spec = importlib.util.spec_from_file_location("fleet_tasks", SHIPPED / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    Program(namespace=Collection.from_module(module), name="fleet", binary="fleet",
            version=version("fleet")).run()


if __name__ == "__main__":
    main()
