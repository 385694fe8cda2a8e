"""sglang.srt.utils (SIMULATED sglang 0.5.9)."""

from sglang.srt.utils.common import *  # noqa: F403
from sglang.srt.utils.common import __all__  # noqa: F401
