"""Imports modules of mamba_ssm 2.3.2 from its source tree without its compiled CUDA extension.

mamba_ssm's Triton kernels (the SSD chunked scan, the gated RMSNorm) and its Mamba2 module are plain Python, but the
package's __init__ imports selective_scan_cuda, which exists only in a built wheel. So the packages on the way
(mamba_ssm, mamba_ssm.ops, ...) are registered here as empty modules whose __path__ is the source folder, and the
wanted submodules then load from the .py files. scripts/fetch_mamba_ssm.sh prepares the source tree (and the einops
and packaging wheels for a machine without them) in third_party/; carry third_party to the GPU machine.
"""
from __future__ import annotations

import glob
import importlib
import os
import sys
import types

DEFAULT_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "third_party", "mamba_ssm-2.3.2")
PACKAGES = ("", "ops", "ops/triton", "utils", "distributed", "modules")


class _HubMixinStandIn:
    """Mamba2 derives from huggingface_hub's PyTorchModelHubMixin (save/load helpers only); a stand-in when the
    package is absent."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__()


def _add_wheels(src_root: str) -> None:
    """Pure-Python wheels (zipimport) from third_party/wheels for what the machine lacks (einops, packaging)."""
    wheels = os.path.join(os.path.dirname(os.path.abspath(src_root)), "wheels")
    for name in ("einops", "packaging"):
        try:
            importlib.import_module(name)
        except ImportError:
            sys.path[:0] = sorted(glob.glob(os.path.join(wheels, f"{name}-*.whl")))


def load(module: str, src_root: str | None = None):
    """Imports mamba_ssm.<module> (e.g. "ops.triton.ssd_combined", "modules.mamba2") from the source tree in
    src_root (the folder holding the mamba_ssm package directory)."""
    src_root = src_root or DEFAULT_SRC
    pkg_dir = os.path.join(src_root, "mamba_ssm")
    target = os.path.join(pkg_dir, *module.split(".")) + ".py"
    if not os.path.isfile(target):
        raise FileNotFoundError(f"no {os.path.relpath(target, src_root)} under {src_root}: pass the folder that holds "
                                "the mamba_ssm package (bash scripts/fetch_mamba_ssm.sh prepares "
                                "third_party/mamba_ssm-2.3.2; carry third_party to the GPU machine)")
    _add_wheels(src_root)
    for rel in PACKAGES:
        name = "mamba_ssm" + ("." + rel.replace("/", ".") if rel else "")
        existing = sys.modules.get(name)
        if existing is not None and list(getattr(existing, "__path__", [])) == [os.path.join(pkg_dir, rel)]:
            continue
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(pkg_dir, rel)]  # a package: its submodules load from the source files
        sys.modules[name] = package
    try:
        importlib.import_module("huggingface_hub")
    except ImportError:
        hub = types.ModuleType("huggingface_hub")
        hub.PyTorchModelHubMixin = _HubMixinStandIn
        sys.modules["huggingface_hub"] = hub
    return importlib.import_module(f"mamba_ssm.{module}")
