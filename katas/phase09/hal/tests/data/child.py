"""The child process of a HAL test (GIVEN): loads libhal.so through halpy (cffi), runs a test's
script with `hal` and `out` in scope, writes `out` as JSON. argv: KATA_DIR LIBHAL SCRIPT OUT."""

import faulthandler
import json
import sys
import traceback

faulthandler.enable()  # a crash prints which call it happened in (stderr)

kata_dir, lib, script_path, out_path = sys.argv[1:5]
sys.path.insert(0, kata_dir)
import halpy  # noqa: E402

out: dict = {}
try:
    hal = halpy.Hal(lib)
    script = open(script_path).read()
    exec(compile(script, "<test script>", "exec"), {"hal": hal, "out": out, "halpy": halpy})
except halpy.Todo as e:
    out = {"__todo__": str(e)}
except BaseException:  # noqa: BLE001 - reported to the test
    out["__error__"] = traceback.format_exc(limit=6)
with open(out_path, "w") as f:
    json.dump(out, f)
