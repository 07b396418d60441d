"""Child side of harness.native.isolate.run_isolated: `python -m harness.native._child REQ RES`."""

from __future__ import annotations

import importlib.util
import pickle
import sys
import traceback
from pathlib import Path


def _import_function(filename: str, qualname: str):  # noqa: ANN202 - internal
    spec = importlib.util.spec_from_file_location(f"_kata_isolated_{Path(filename).stem}", filename)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {filename}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def main(argv: list[str]) -> int:
    request, result = Path(argv[0]), Path(argv[1])
    filename, qualname, args, kwargs = pickle.loads(request.read_bytes())
    try:
        func = _import_function(filename, qualname)
        value = func(*args, **kwargs)
        payload = ("ok", value, "")
    except BaseException as exc:  # report everything, SystemExit included
        tb = traceback.format_exc()
        try:
            pickle.dumps(exc)
            payload = ("error", exc, tb)
        except Exception:
            payload = ("error", None, tb)
    try:
        data = pickle.dumps(payload)
    except Exception:  # an unpicklable return value (a cffi pointer, say)
        data = pickle.dumps(
            ("error", None, f"cannot send the result back: {traceback.format_exc()}")
        )
    sys.stdout.flush()
    result.write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
