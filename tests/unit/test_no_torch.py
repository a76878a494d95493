"""No torch at run time (issue 30, item 6): the services' entry modules import without torch.

The runtime image and the demo's venv carry ONNX Runtime only (torch is in the ``build-model``
extra, for the graph's build step). A fresh interpreter where importing torch, transformers or
sentence-transformers fails imports the API's and the worker's entry modules and the CLI, and none
of those packages ends up loaded.
"""

from __future__ import annotations

import subprocess
import sys

#: Packages that must never load in the services (torch and what only runs on it).
TORCH_STACK = ("torch", "transformers", "sentence_transformers")
ENTRY_MODULES = ("knowledge_service.__main__", "knowledge_service.app", "task_service.__main__", "rag_cli",
                 "shared.adapters.embedding.configured", "shared.adapters.embedding.onnx_runtime")

_PROBE = f"""
import importlib, importlib.abc, sys
BLOCKED = {TORCH_STACK!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is not available at run time")
        return None
sys.meta_path.insert(0, Block())
for m in {ENTRY_MODULES!r}:
    importlib.import_module(m)
print(sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED))
"""


def test_the_entry_modules_import_without_torch() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
