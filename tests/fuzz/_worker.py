"""A long-lived subprocess that runs fuzz targets, so that a crash (segfault, abort) in compiled code
kills this worker and fails one test with its input, instead of killing pytest.

Protocol on stdin/stdout: 8-byte little-endian length + pickle of ``(target name, args)``; the reply is
a pickle of ``(status, detail)``: ``"ok"`` (the oracle accepted the result), ``"refused"`` (a
TokenmillError, detail = its message), ``"oracle"`` (an AssertionError from the target's oracle) or
``"error"`` (any other exception: detail = the traceback).
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import traceback


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests.fuzz import targets
    from tokenmill.errors import TokenmillError

    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing a target prints may corrupt the protocol
    while True:
        head = inp.read(8)
        if len(head) < 8:
            return
        name, args = pickle.loads(inp.read(struct.unpack("<Q", head)[0]))
        try:
            detail = getattr(targets, name)(*args)
            reply = ("ok", str(detail)[:200])
        except TokenmillError as e:
            reply = ("refused", str(e))
        except AssertionError:
            reply = ("oracle", traceback.format_exc())
        except Exception:  # noqa: BLE001 (the worker reports every failure to the parent)
            reply = ("error", traceback.format_exc())
        blob = pickle.dumps(reply)
        out.write(struct.pack("<Q", len(blob)) + blob)
        out.flush()


if __name__ == "__main__":
    main()
