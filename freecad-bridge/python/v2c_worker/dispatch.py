"""One JSON request in, one JSON response out: the table of handlers the Rust side calls."""

import json
import os
import sys
import time
import traceback

import FreeCAD

from v2c_worker.commands import exception_text, execute, parameters, set_parameters
from v2c_worker.document import MODEL, OTHER, CommandFailed
from v2c_worker.entities import state
from v2c_worker.evaluation import (
    boolean_volumes,
    compare_kept,
    intersect_kept,
    keep_shape,
    load_kept,
    measure,
    mesh_shape,
    save_kept,
)
from v2c_worker.files import load, save
from v2c_worker.meshes import hold, plane_frame, preview, preview_held, tessellate


def init(user_home):
    if user_home:
        os.makedirs(user_home, exist_ok=True)
    MODEL.open()
    return FreeCAD.Version()[0] + "." + FreeCAD.Version()[1] + "." + FreeCAD.Version()[2]


def _execute(req):
    result = execute(req["command"])
    result["state"] = state()
    return result


def _reset(req):
    MODEL.reset()
    return state()


def _debug_sleep(req):
    time.sleep(req["seconds"])
    return {}


# One handler per request type (freecad-bridge's `protocol::Request`), each taking the
# request and returning what goes under "ok".
HANDLERS = {
    "reset": _reset,
    "state": lambda req: state(),
    "execute": _execute,
    "preview": lambda req: preview(req["command"], req["linear_deflection"], req["angular_deflection"]),
    "plane_frame": lambda req: plane_frame(req["on"]),
    "hold": lambda req: hold(),
    "preview_held": lambda req: preview_held(req["linear_deflection"], req["angular_deflection"]),
    "parameters": lambda req: {"parameters": parameters()},
    "set_parameters": lambda req: set_parameters(req["values"]),
    "load": lambda req: load(req["path"]),
    "save": lambda req: save(req.get("fcstd"), req.get("step")),
    "tessellate": lambda req: tessellate(req["linear_deflection"], req["angular_deflection"]),
    "measure": lambda req: measure(req.get("brep")),
    "boolean_volumes": boolean_volumes,
    "mesh_shape": mesh_shape,
    "keep_shape": keep_shape,
    "save_kept": save_kept,
    "load_kept": load_kept,
    "compare_kept": compare_kept,
    "intersect_kept": intersect_kept,
    "debug_sleep": _debug_sleep,
}


def _dispatch(req):
    handler = HANDLERS.get(req["type"])
    if handler is None:
        raise CommandFailed("unknown request type %s" % req["type"])
    return handler(req)


def handle(line):
    try:
        req = json.loads(line)
        return json.dumps({"ok": _dispatch(req)})
    except CommandFailed as exc:
        return json.dumps({"err": {"reason": exc.reason, "entity": exc.entity, "kind": exc.kind}})
    except Exception as exc:  # FreeCAD raises Base.FreeCADError, RuntimeError, ...
        traceback.print_exc(file=sys.stderr)
        return json.dumps({"err": {"reason": "FreeCAD: %s" % exception_text(exc), "entity": None, "kind": OTHER}})
