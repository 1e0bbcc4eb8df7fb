"""Triangles and polylines for the views: the model, a command's preview, a plane's frame."""

from v2c_worker.commands import Snapshot, execute
from v2c_worker.document import MODEL, V
from v2c_worker.entities import _BASE_PLANES, _clean, _vec, frame_of, state, support_of


def tessellate(linear, angular):
    # Body by body, so faces and edges come in the entity table's order.
    return tessellate_shapes(MODEL.shapes(), linear, angular)


def tessellate_shape(shape, linear, angular):
    return tessellate_shapes([] if shape is None else [shape], linear, angular)


def tessellate_shapes(shapes, linear, angular):
    positions, triangles, face_offsets = [], [], [0]
    edge_points, edge_offsets = [], [0]
    for shape in shapes:
        if shape.isNull():
            continue
        try:
            import MeshPart

            MeshPart.meshFromShape(Shape=shape, LinearDeflection=linear, AngularDeflection=angular, Relative=False)
        except Exception:
            pass  # per-face tessellation below still meshes with the linear deflection
        for face in shape.Faces:
            pts, tris = face.tessellate(linear)
            base = len(positions) // 3
            for p in pts:
                positions.extend((_clean(p.x), _clean(p.y), _clean(p.z)))
            for t in tris:
                triangles.extend((t[0] + base, t[1] + base, t[2] + base))
            face_offsets.append(len(triangles) // 3)
        for edge in shape.Edges:
            if not edge.Degenerated:
                for p in edge.discretize(Deflection=linear):
                    edge_points.extend((_clean(p.x), _clean(p.y), _clean(p.z)))
            edge_offsets.append(len(edge_points) // 3)
    return {
        "positions": positions,
        "triangles": triangles,
        "face_offsets": face_offsets,
        "edge_points": edge_points,
        "edge_offsets": edge_offsets,
    }


def preview(cmd, linear, angular):
    """Execute `cmd` tentatively and report what it would add and remove, then roll it back.

    The document is unchanged afterwards; a failing command raises as `execute` does."""
    doc = MODEL.doc
    snapshot = Snapshot()
    before = MODEL.shape()
    before = before.copy() if before is not None and not before.isNull() else None
    result = execute(cmd)
    try:
        after = MODEL.shape()
        out = {"feature": result.get("feature"), "state": state(), "boolean_failed": False}
        out["after"] = tessellate_shapes(MODEL.shapes(), linear, angular)
        changes_solid = cmd["op"] not in ("sketch", "plane", "body", "end") and after is not None
        _difference(out, before, after if changes_solid else None, linear, angular)
        curves = []
        if cmd["op"] == "sketch":
            sketch = doc.getObject(cmd["name"])
            for edge in sketch.Shape.Edges:
                curves.append([_vec(p) for p in edge.discretize(Deflection=linear)])
        out["sketch_curves"] = curves
        out["plane_outline"] = _plane_outline(result["frame"], before) if cmd["op"] == "plane" else []
        return out
    finally:
        snapshot.restore()


# The model's shape before a revision rebuilds the document (`hold`), for the revision's
# preview (`preview_held`). A lost worker loses it: the preview then shows only the result.
HELD = {}


def hold():
    """Keep a copy of the model's shape as it is now."""
    shape = MODEL.shape()
    HELD["before"] = shape.copy() if shape is not None and not shape.isNull() else None
    return {}


def preview_held(linear, angular):
    """The document now against the shape `hold` kept: what a revision added and removed,
    in the form of `preview` (no feature, no sketch curves)."""
    after = MODEL.shape()
    out = {"feature": None, "state": state(), "boolean_failed": "before" not in HELD, "sketch_curves": [], "plane_outline": []}
    out["after"] = tessellate_shapes(MODEL.shapes(), linear, angular)
    before = HELD.pop("before", None)
    usable = after is not None and not after.isNull() and not out["boolean_failed"]
    _difference(out, before, after if usable else None, linear, angular)
    return out


def _difference(out, before, after, linear, angular):
    """`added` (after minus before) and `removed` (before minus after) into `out`, as
    tessellations; nothing for a missing `after`; `boolean_failed` when a cut fails."""
    added = removed = None
    if after is not None:
        try:
            added = after if before is None else after.cut(before)
            removed = None if before is None else before.cut(after)
        except Exception:
            out["boolean_failed"] = True
    out["added"] = tessellate_shape(added, linear, angular)
    out["removed"] = tessellate_shape(removed, linear, angular)


def _plane_outline(frame, model):
    """A square of the new plane around the model's centre (projected onto the plane), about
    as wide as the model, and a stroke along its normal: what a plane preview draws."""
    origin, x, y, n = (V(*frame[k]) for k in ("origin", "x_axis", "y_axis", "normal"))
    if model is not None and not model.isNull() and model.BoundBox.isValid():
        centre = model.BoundBox.Center
        half = max(model.BoundBox.DiagonalLength * 0.5, 1e-3)
    else:
        centre, half = origin, 10.0
    centre = centre - n * (centre - origin).dot(n)
    corners = [centre + x * (sx * half) + y * (sy * half) for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1), (-1, -1))]
    return [[_vec(p) for p in corners], [_vec(centre), _vec(centre + n * (half * 0.4))]]


def plane_frame(on):
    """The local frame a sketch attached to `on` (XY, F3, P1) gets, without keeping it."""
    doc = MODEL.doc
    snapshot = Snapshot()
    active = MODEL.body
    MODEL.referenced = MODEL.owners()
    try:
        if MODEL.body is not None:
            probe = MODEL.body.newObject("Sketcher::SketchObject", "FrameProbe")
        elif on in _BASE_PLANES:
            # An imported model (a STEP file, an FCStd without bodies) has no body: a base
            # plane is then a scratch body's, whose origin is the document's.
            MODEL.body = doc.addObject("PartDesign::Body", "FrameScratch")
            probe = MODEL.body.newObject("Sketcher::SketchObject", "FrameProbe")
        else:
            # A face of an imported shape: the probe stands in the document on its own.
            probe = doc.addObject("Sketcher::SketchObject", "FrameProbe")
        probe.Support = support_of(on)
        probe.MapMode = "FlatFace"
        doc.recompute()
        return frame_of(probe)
    finally:
        MODEL.referenced = None
        MODEL.body = active
        snapshot.restore()
