"""`tokenmill warmup`: compile every numba kernel ahead of time, in parallel processes."""

from __future__ import annotations

import json
import time

from ._common import add_command, add_quiet, integer


def register(sub) -> None:
    p = add_command(sub, "warmup",
                    help="compile every kernel once, in parallel (a new install's first run is then as fast as later ones)",
                    example="tokenmill warmup --jobs 2", func=cmd_warmup)
    p.add_argument("--jobs", type=integer, default=None, metavar="N",
                   help="parallel compile processes (default: all cores)")
    p.add_argument("--json", action="store_true", help="print the seconds per kernel family as JSON")
    add_quiet(p)


def cmd_warmup(args) -> int:
    from .._jit import warmup
    from ..errors import ConfigError, TokenmillError

    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: use a positive number of processes")
    t0 = time.perf_counter()
    results = warmup(args.jobs, progress=not args.quiet)
    total = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"seconds": round(total, 2),
                          "families": {r.name: {"seconds": round(r.seconds, 2), "ok": r.ok, "error": r.error}
                                       for r in results}}, indent=1))
    else:
        for r in results:
            print(f"{r.seconds:6.1f} s  {r.name}" + ("" if r.ok else f"  FAILED: {r.error}"))
        print(f"{total:6.1f} s  in all (kernels are cached on disk; later runs load them in about a second)")
    failed = [r for r in results if not r.ok]
    if failed:
        raise TokenmillError(f"{len(failed)} warm-up job(s) failed: " + "; ".join(f"{r.name}: {r.error}" for r in failed))
    return 0
