"""What the benches share to state a rate honestly: its 95% interval (imported by name from bench/, the folder of
the script that runs): fleet.proportion's, the one the library's held-out policy reads too."""

from __future__ import annotations

from fleet.proportion import wilson

__all__ = ["wilson"]
