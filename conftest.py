"""Root pytest configuration: doctests of optional-extra modules are skipped where the extra is missing
(``make test`` installs every extra the suite needs, so they run there and in CI)."""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:
    collect_ignore += ["src/tokenmill/torch", "src/tokenmill/verify.py"]
