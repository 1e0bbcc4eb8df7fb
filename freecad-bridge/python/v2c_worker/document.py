"""The document the worker models in, and the refusal every module raises.

One `MODEL` exists per worker process (a worker serves one session); `dispatch.init`
opens its document once FreeCAD is loaded.
"""

import FreeCAD
import Part


V = FreeCAD.Vector
EPS_VOLUME = 1e-9


# Kinds of refusal (freecad-bridge's `RefusalKind`): callers match on these, not on wording.
NO_EFFECT = "no_effect"
SEPARATE_SOLIDS = "separate_solids"
UNSOLVABLE = "unsolvable"
OTHER = "other"


class CommandFailed(Exception):
    """A command FreeCAD refused; `entity` names the referenced entity when there is one,
    `kind` says what sort of refusal it is."""

    def __init__(self, reason, entity=None, kind=OTHER):
        super().__init__(reason)
        self.reason = reason
        self.entity = entity
        self.kind = kind


# ---------------------------------------------------------------------------- the document


class Model:
    """The document: PartDesign bodies B1, B2, ... (one separate solid each), or a loaded
    shape. Commands work on the active body; B1 is active in a fresh document."""

    def __init__(self):
        # No document until `open`: FreeCAD may only be asked for one once the worker's
        # user home is in place.
        self.doc = None
        self.bodies, self.body, self.imported, self.referenced = [], None, [], None

    def open(self):
        self.reset()

    def reset(self, with_body=True):
        if self.doc is not None:
            FreeCAD.closeDocument(self.doc.Name)
        self.doc = FreeCAD.newDocument("vision2cad")
        self.bodies = [self.doc.addObject("PartDesign::Body", "Body")] if with_body else []
        self.body = self.bodies[0] if with_body else None  # the active body
        self.imported = []  # Part::Features holding a loaded STEP's solids, or a loaded model
        self.referenced = None  # while a command runs: the owners its entity IDs refer to
        self.doc.recompute()

    def body_id(self, body):
        return "B%d" % (self.bodies.index(body) + 1)

    # The features whose shapes are "the model", one per body in body order: sub-element
    # names (Face3) refer to them. While a command runs, the new feature becomes its body's
    # tip before it has a shape, so IDs keep referring to the shapes the command was
    # written against.
    def owners(self):
        if self.referenced is not None:
            return self.referenced
        if self.imported:
            return list(self.imported)
        out = []
        for body in self.bodies:
            tip = body.Tip
            out.append(tip if tip is not None and not tip.Shape.isNull() else None)
        return out

    def owner_of(self, body):
        return self.owners()[self.bodies.index(body)]

    def shapes(self):
        """The shape of each body (or loaded solid) that has one, in body order."""
        return [o.Shape for o in self.owners() if o is not None]

    def shape(self):
        """The whole model: one body's shape, or the compound of every body's shape."""
        shapes = self.shapes()
        if not shapes:
            return None
        return shapes[0] if len(shapes) == 1 else Part.makeCompound(shapes)


MODEL = Model()
