"""A launcher's rail choice with railwatch (checked with mypy --strict):
NCCL's exact-match list of the usable rails, or no RDMA at all."""

from __future__ import annotations

import os
import sys

import railwatch


def nccl_env(socket: str = railwatch.DEFAULT_SOCKET) -> dict[str, str]:
    """NCCL_IB_HCA for the usable rails; NCCL_IB_DISABLE when none is."""
    try:
        rails = railwatch.usable_rails(socket)
    except railwatch.AgentUnavailable as e:
        print(f"railwatch: {e}; leaving NCCL to choose", file=sys.stderr)
        return {}
    if not rails:
        return {"NCCL_IB_DISABLE": "1"}
    return {"NCCL_IB_HCA": "=" + ",".join(rails)}


if __name__ == "__main__":
    os.environ.update(nccl_env())
    print({k: v for k, v in os.environ.items() if k.startswith("NCCL_")})
