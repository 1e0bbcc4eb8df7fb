"""FreeCAD side of the vision2cad worker.

The Rust worker embeds CPython, loads this package (its modules in `MODULES` order) and
hands it one JSON request at a time (`dispatch.handle`). Requests arrive already validated
and *lowered* by the Rust side: sketch primitives are in the sketch's own 2D frame, arcs are
counter-clockwise with angles in radians, and constraints are raw Sketcher tuples whose
geometry index may be an entity ID ("E7", "V3") that this package turns into external
(projected) geometry. This package only talks to FreeCAD; it decides nothing that the Rust
side can decide.

Every mutating request is a transaction: on any failure the objects it created are removed,
changed properties are restored, and the document recomputes to exactly its previous state.

Modules, each importing only those before it:
  document    the document (`MODEL`) and `CommandFailed`
  entities    entity tables, feature list, entity IDs -> sub-elements
  commands    modeling commands and parameters
  files       FCStd and STEP
  meshes      tessellation, previews, plane frames
  evaluation  mass properties, booleans, meshes and kept shapes for metrics
  dispatch    the handler table and `handle`
"""

import sys

for _p in ("/usr/lib/freecad-python3/lib", "/usr/lib/freecad/Mod"):
    if _p not in sys.path:
        sys.path.append(_p)

import FreeCAD  # noqa: E402,F401
import Part  # noqa: E402,F401
import Sketcher  # noqa: E402,F401  (registers Sketcher::SketchObject)
import PartDesign  # noqa: E402,F401  (registers PartDesign::Body)

MODULES = ("document", "entities", "commands", "files", "meshes", "evaluation", "dispatch")
