"""Policies a playbook holds as typed sections of their own, kept apart so fleet/playbook.py stays one sitting.

    canary      how a canary is judged against its baseline (`canary:`; fleet.deploy.judge, fleet.multihost.canary)

May use: the primitives (fields) and pydantic; used by fleet.playbook and the layers above it.
"""

from fleet.policy.canary import Canary

__all__ = ["Canary"]
