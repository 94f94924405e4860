"""gyre as a torch.distributed backend.

    import gyre_torch                      # registers the backend "gyre"
    torch.distributed.init_process_group("gyre", ...)
"""
import inspect

import torch
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND"]

BACKEND = "gyre"


def _create(store, rank, size, timeout):
    return _C.create_backend(store, rank, size, timeout)


def _register():
    if BACKEND in getattr(dist.Backend, "backend_list", []) or hasattr(dist.Backend, "GYRE"):
        return
    parameters = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in parameters:  # torch 2.x: one backend object per device type
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    else:  # torch 1.13: a ProcessGroup
        dist.Backend.register_backend(BACKEND, _create)


_register()
