"""Launch the inference server (SIMULATED sglang 0.5.9): `python -m sglang.launch_server <flags>`."""

import os
import sys

from sglang.srt.server_args import prepare_server_args
from sglang.srt.utils import configure_logger, kill_process_tree


def run_server(server_args) -> int:
    from sglang.srt.entrypoints.http_server import launch_server

    return launch_server(server_args)


if __name__ == "__main__":
    configure_logger(prefix="")
    server_args = prepare_server_args(sys.argv[1:])
    code = 1
    try:
        code = run_server(server_args)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)
    sys.exit(code)
