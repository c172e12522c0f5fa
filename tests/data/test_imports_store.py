"""Opening a store loads no optional dependency and no compiler: the extras stay optional."""

import subprocess
import sys


def test_store_import_and_open_stay_light(tmp_path, tok):
    from tokenmill import TokenStore
    from tokenmill.data import texts

    TokenStore.build(tmp_path / "s", texts(["the store"]), tok, workers=1, progress=False)
    code = ("import sys, tokenmill, tokenmill.data; s = tokenmill.TokenStore.open(sys.argv[1]); s.lengths; s.get(0); "
            "print(sorted(m for m in ('numba', 'torch', 'pyarrow', 'datasets', 'ray', 'megatron', 'matplotlib', "
            "'zstandard') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
