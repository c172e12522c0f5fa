"""`import tokenmill.batching` stays light: numba compiles on first pack, torch is never loaded."""

import subprocess
import sys


def test_import_loads_neither_torch_nor_numba():
    code = ("import sys, tokenmill, tokenmill.batching, tokenmill.verify; "
            "print(sorted(m for m in ('torch', 'numba') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
