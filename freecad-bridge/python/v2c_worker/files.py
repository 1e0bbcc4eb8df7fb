"""FCStd and STEP files: loading a model or a shape, saving the model."""

import os

import FreeCAD
import Part

from v2c_worker.commands import exception_text
from v2c_worker.document import MODEL, CommandFailed
from v2c_worker.entities import state


def _read_shape(path, what):
    shape = Part.Shape()
    try:
        shape.read(path)
    except Exception as exc:
        raise CommandFailed("cannot read %s %s: %s" % (what, path, exception_text(exc)), path)
    return shape


def read_step(path):
    """The shape of a STEP file: its one solid, or the compound of what it holds."""
    shape = _read_shape(path, "STEP file")
    if shape.isNull() or not shape.Faces:
        raise CommandFailed("STEP file %s holds no geometry" % path, path)
    if len(shape.Solids) == 1:
        shape = shape.Solids[0]
    return shape


def load(path):
    ext = os.path.splitext(path)[1].lower()
    if ext in (".step", ".stp"):
        shape = read_step(path)
        MODEL.reset(with_body=False)
        # Several separate solids read as bodies B1, B2, ... (one feature each), unless the
        # file also holds loose faces, which only the whole compound keeps.
        solids = shape.Solids
        parts = solids if len(solids) > 1 and len(shape.Faces) == sum(len(s.Faces) for s in solids) else [shape]
        for part in parts:
            feature = MODEL.doc.addObject("Part::Feature", "Imported")
            feature.Shape = part
            MODEL.imported.append(feature)
        MODEL.doc.recompute()
    elif ext == ".fcstd":
        try:
            doc = FreeCAD.openDocument(path)
        except Exception as exc:
            raise CommandFailed("cannot open FreeCAD document %s: %s" % (path, exception_text(exc)), path)
        if MODEL.doc is not None:
            FreeCAD.closeDocument(MODEL.doc.Name)
        MODEL.doc = doc
        MODEL.bodies = [o for o in doc.Objects if o.TypeId == "PartDesign::Body"]
        MODEL.body = MODEL.bodies[0] if MODEL.bodies else None
        MODEL.imported = []
        # The direct-code baseline names the model it built when it is not one body's tip.
        result = doc.getObject("V2C_Result")
        if result is not None:
            MODEL.bodies, MODEL.body = [], None
            MODEL.imported = [result]
        elif MODEL.body is None:
            solids = [o for o in doc.Objects if hasattr(o, "Shape") and o.Shape.Solids]
            if not solids:
                raise CommandFailed("FreeCAD document %s holds no solid" % path, path)
            MODEL.imported = [solids[-1]]
        doc.recompute()
    else:
        raise CommandFailed("unsupported model format %s (expected .step, .stp or .FCStd)" % path, path)
    return state()


def save(fcstd=None, step=None):
    if fcstd:
        MODEL.doc.saveAs(fcstd)
    if step:
        shape = MODEL.shape()
        if shape is None or shape.isNull():
            raise CommandFailed("there is no solid to export to STEP")
        shape.exportStep(step)
    return {}
