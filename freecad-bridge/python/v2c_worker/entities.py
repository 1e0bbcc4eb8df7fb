"""The model as the Rust side sees it: entity tables (faces, edges, vertices with stable
IDs and rounded geometry), the feature list, and the resolution of entity IDs (`F3`,
`B2.E7`) back to FreeCAD sub-elements."""

import math
import re

import Part

from v2c_worker.document import MODEL, V, CommandFailed


def _clean(x, decimals=9):
    # Round-off dust (1e-32, -0.0, 22.500000000000004) differs with the process's memory
    # layout: 9 decimals (a nanometre) make equal geometry print equally.
    x = round(float(x), decimals)
    return 0.0 if x == 0.0 else x


def _vec(v, decimals=9):
    return [_clean(v.x, decimals), _clean(v.y, decimals), _clean(v.z, decimals)]


class Rounding:
    """How many decimals an entity table keeps: 9 for a model 1 unit across or larger (a
    nanometre in mm), more for a smaller one, so lengths, areas and volumes keep 9
    significant digits of the model's size (a part 0.01 across has volumes near 1e-6,
    which 9 decimals would cut to three digits). Directions keep 9 decimals."""

    def __init__(self, diagonal):
        k = max(0, -math.floor(math.log10(diagonal))) if diagonal > 0 else 0
        self.length, self.area, self.volume = 9 + k, 9 + 2 * k, 9 + 3 * k

    def l(self, x):
        return _clean(x, self.length)

    def point(self, v):
        return _vec(v, self.length)


# ---------------------------------------------------------------------------- entity table

_SURFACES = {
    "Plane": "plane",
    "Cylinder": "cylinder",
    "Cone": "cone",
    "Sphere": "sphere",
    "Toroid": "torus",
    "BSplineSurface": "bspline",
    "BezierSurface": "bspline",
}
_CURVES = {
    "Line": "line",
    "LineSegment": "line",
    "Circle": "circle",
    "ArcOfCircle": "circle",
    "Ellipse": "ellipse",
    "ArcOfEllipse": "ellipse",
    "BSplineCurve": "bspline",
    "BezierCurve": "bspline",
}


def _index_of(items):
    table = {}
    for i, item in enumerate(items):
        table.setdefault(item.hashCode(), []).append((i, item))
    return table


def _lookup(table, item):
    for i, candidate in table.get(item.hashCode(), ()):
        if candidate.isSame(item):
            return i
    raise RuntimeError("sub-shape not found in its parent shape")


def body_prefix(k):
    """The ID prefix of body k (1-based): none for B1, so a one-body model's IDs read F3."""
    return "" if k == 1 else "B%d." % k


def face_record(prefix, i, face, edge_index, r):
    surface = face.Surface
    kind = _SURFACES.get(type(surface).__name__, "other")
    rec = {
        "id": "%sF%d" % (prefix, i + 1),
        "kind": kind,
        "area": _clean(face.Area, r.area),
        "centroid": r.point(face.CenterOfMass),
        "edges": ["%sE%d" % (prefix, _lookup(edge_index, e) + 1) for e in face.Edges],
    }
    if kind == "plane":
        u0, u1, v0, v1 = face.ParameterRange
        rec["normal"] = _vec(face.normalAt((u0 + u1) / 2, (v0 + v1) / 2))
    elif kind in ("cylinder", "cone", "sphere", "torus"):
        if hasattr(surface, "Axis"):
            rec["axis"] = _vec(surface.Axis)
        rec["center"] = r.point(surface.Center)
        if kind == "torus":
            rec["radius"] = r.l(surface.MajorRadius)
            rec["minor_radius"] = r.l(surface.MinorRadius)
        elif hasattr(surface, "Radius"):
            rec["radius"] = r.l(surface.Radius)
        if kind == "cone":
            rec["semi_angle"] = _clean(surface.SemiAngle)
    return rec


def edge_record(prefix, i, edge, vertex_index, r):
    curve = None if edge.Degenerated else edge.Curve
    kind = "degenerate" if curve is None else _CURVES.get(type(curve).__name__, "other")
    rec = {"id": "%sE%d" % (prefix, i + 1), "kind": kind, "length": r.l(edge.Length)}
    verts = edge.Vertexes
    if verts:
        rec["start"] = r.point(verts[0].Point)
        rec["end"] = r.point(verts[-1].Point)
    if curve is not None:
        p0, p1 = edge.ParameterRange
        rec["midpoint"] = r.point(edge.valueAt((p0 + p1) / 2))
        rec["closed"] = bool(edge.isClosed())
        if kind == "circle":
            rec["center"] = r.point(curve.Center)
            rec["radius"] = r.l(curve.Radius)
            rec["axis"] = _vec(curve.Axis)
        elif kind == "line":
            d = verts[-1].Point - verts[0].Point if len(verts) >= 2 else V(0, 0, 0)
            if d.Length > 0:
                d.normalize()
            rec["direction"] = _vec(d)
    rec["vertices"] = ["%sV%d" % (prefix, _lookup(vertex_index, v) + 1) for v in verts]
    return rec


def entity_table(owners, active):
    """Every body's faces, edges and vertices, numbered within the body (`F3`, `B2.F3`).

    `owners` holds each body's shape owner (None for a body with no solid yet); `active`
    is the index of the active body, or None."""
    shapes = [o.Shape for o in owners if o is not None]
    table = {
        "valid": False,
        "empty": not shapes,
        "volume": 0.0,
        "area": 0.0,
        "solids": 0,
        "bbox": None,
        "bodies": [],
        "faces": [],
        "edges": [],
        "vertices": [],
    }
    several = len(owners) > 1
    if several and active is not None:
        table["active_body"] = "B%d" % (active + 1)
    if not shapes:
        if several:
            table["bodies"] = [{"id": "B%d" % (k + 1), "faces": [], "solids": 0} for k in range(len(owners))]
        return table
    every = shapes[0] if len(shapes) == 1 else Part.makeCompound(shapes)
    bb = every.BoundBox
    r = Rounding(bb.DiagonalLength)
    valid = True
    for k, owner in enumerate(owners):
        prefix = body_prefix(k + 1)
        shape = owner.Shape if owner is not None else None
        if shape is None:
            table["bodies"].append({"id": "B%d" % (k + 1), "faces": [], "solids": 0})
            continue
        faces, edges, vertices = shape.Faces, shape.Edges, shape.Vertexes
        edge_index, vertex_index = _index_of(edges), _index_of(vertices)
        valid = valid and bool(shape.isValid()) and len(shape.Solids) > 0
        table["bodies"].append(
            {"id": "B%d" % (k + 1), "faces": ["%sF%d" % (prefix, i + 1) for i in range(len(faces))], "solids": len(shape.Solids)}
        )
        table["faces"] += [face_record(prefix, i, f, edge_index, r) for i, f in enumerate(faces)]
        table["edges"] += [edge_record(prefix, i, e, vertex_index, r) for i, e in enumerate(edges)]
        table["vertices"] += [{"id": "%sV%d" % (prefix, i + 1), "point": r.point(v.Point)} for i, v in enumerate(vertices)]
    table.update(
        {
            "valid": valid,
            "volume": _clean(sum(s.Volume for s in shapes), r.volume),
            "area": _clean(sum(s.Area for s in shapes), r.area),
            "solids": sum(len(s.Solids) for s in shapes),
            "bbox": {"min": [r.l(bb.XMin), r.l(bb.YMin), r.l(bb.ZMin)], "max": [r.l(bb.XMax), r.l(bb.YMax), r.l(bb.ZMax)]},
        }
    )
    return table


def frame_of(obj):
    """Origin and axes of an attached object's local frame (a sketch or a datum plane)."""
    pl = obj.getGlobalPlacement() if hasattr(obj, "getGlobalPlacement") else obj.Placement
    rot = pl.Rotation
    return {
        "origin": _vec(pl.Base),
        "x_axis": _vec(rot.multVec(V(1, 0, 0))),
        "y_axis": _vec(rot.multVec(V(0, 1, 0))),
        "normal": _vec(rot.multVec(V(0, 0, 1))),
    }


def features():
    """Sketches, construction planes and solid features in body order, for the state; with
    several bodies each names its body."""
    out = []
    several = len(MODEL.bodies) > 1
    for k, body in enumerate(MODEL.bodies):
        for obj in body.Group:
            entry = {"name": obj.Name, "type": obj.TypeId}
            if obj.TypeId in ("Sketcher::SketchObject", "PartDesign::Plane"):
                entry["frame"] = frame_of(obj)
            if several:
                entry["body"] = "B%d" % (k + 1)
            out.append(entry)
    return out


def state():
    active = MODEL.bodies.index(MODEL.body) if MODEL.body in MODEL.bodies else None
    table = entity_table(MODEL.owners(), active)
    table["features"] = features()
    return table


# ---------------------------------------------------------------------------- references

_BASE_PLANES = {"XY": "XY_Plane", "XZ": "XZ_Plane", "YZ": "YZ_Plane"}


def _sub_index(entity_id, local_id, prefix, shape_list, what):
    if not local_id or local_id[0] != prefix or not local_id[1:].isdigit():
        raise CommandFailed("'%s' is not a %s ID" % (entity_id, what), entity_id)
    i = int(local_id[1:])
    if i < 1 or i > len(shape_list):
        body = entity_id[: len(entity_id) - len(local_id)]
        raise CommandFailed(
            "unknown %s ID %s: the current model has %s%s1..%s%s%d"
            % (what, entity_id, body, prefix, body, prefix, len(shape_list)),
            entity_id,
        )
    return i


def _split_body(entity_id):
    """`B2.F3` -> (2, "F3"); an unprefixed `F3` (or `B1.F3`) belongs to B1."""
    body, dot, local = entity_id.partition(".")
    if not dot:
        return 1, entity_id
    if len(body) < 2 or body[0] != "B" or not body[1:].isdigit() or int(body[1:]) < 1:
        raise CommandFailed("'%s' is not an entity ID (F3, or B2.F3 for body B2)" % entity_id, entity_id)
    return int(body[1:]), local


def _resolve(entity_id, prefix, what, element, linked):
    """The owner, sub-element name and shape of an entity ID. `linked`: the command links
    to the entity (attaches, projects, rounds), which PartDesign allows only inside the
    active body; otherwise only its geometry is read."""
    k, local = _split_body(entity_id)
    owners = MODEL.owners()
    if k > len(owners):
        raise CommandFailed("%s names body B%d, but the model has B1..B%d" % (entity_id, k, len(owners)), entity_id)
    owner = owners[k - 1]
    if owner is None:
        where = "the model" if len(owners) == 1 else "body B%d" % k
        raise CommandFailed("%s does not exist: %s has no solid yet" % (entity_id, where), entity_id)
    shapes = {"F": owner.Shape.Faces, "E": owner.Shape.Edges, "V": owner.Shape.Vertexes}[prefix]
    i = _sub_index(entity_id, local, prefix, shapes, what)
    if linked and MODEL.bodies and MODEL.bodies[k - 1] is not MODEL.body:
        active = MODEL.body_id(MODEL.body)
        raise CommandFailed(
            "%s belongs to body B%d, but the active body is %s: a command may only attach to, project or "
            "change entities of the active body (switch with {\"op\": \"body\", \"name\": \"B%d\"})"
            % (entity_id, k, active, k),
            entity_id,
        )
    return owner, "%s%d" % (element, i), shapes[i - 1]


def resolve_face(face_id, linked=True):
    return _resolve(face_id, "F", "face", "Face", linked)


def resolve_edge(edge_id, linked=True):
    return _resolve(edge_id, "E", "edge", "Edge", linked)


def resolve_vertex(vertex_id, linked=True):
    return _resolve(vertex_id, "V", "vertex", "Vertex", linked)


_ENTITY_ID = re.compile(r"^(B[1-9][0-9]*\.)?([FEV])[1-9][0-9]*$")


def entity_kind(text):
    """`F`, `E` or `V` for an entity ID (`E7`, `B2.E7`), None for anything else (`S1.V_Axis`)."""
    m = _ENTITY_ID.match(text)
    return m.group(2) if m else None


def named_feature(name, type_id, what):
    """A sketch or construction plane of the active body, by name."""
    obj = MODEL.doc.getObject(name)
    if obj is None or obj.TypeId != type_id:
        raise CommandFailed("unknown %s %s" % (what, name), name)
    if MODEL.body is not None and len(MODEL.bodies) > 1 and not MODEL.body.hasObject(obj):
        home = next((MODEL.body_id(b) for b in MODEL.bodies if b.hasObject(obj)), "another body")
        raise CommandFailed(
            "%s %s belongs to body %s, but the active body is %s: a command may only use the active body's "
            "sketches and planes" % (what, name, home, MODEL.body_id(MODEL.body)),
            name,
        )
    return obj


def support_of(target):
    """Attachment support for a sketch or plane placed on `target` (XY, F3, P1...)."""
    if target in _BASE_PLANES:
        return (_origin_plane(target), [""])
    if entity_kind(target) == "F":
        owner, sub, face = resolve_face(target)
        if _SURFACES.get(type(face.Surface).__name__) != "plane":
            raise CommandFailed("%s is not planar; a sketch or plane needs a planar face" % target, target)
        return (owner, [sub])
    return (named_feature(target, "PartDesign::Plane", "construction plane"), [""])


def _origin_plane(target):
    """A base plane of the active body's own origin (another body's would be out of scope)."""
    for feat in MODEL.body.Origin.OriginFeatures:
        if feat.Role == _BASE_PLANES[target]:
            return feat
    raise CommandFailed("base plane %s not found" % target, target)


def select_body(name):
    """Make body `name` (B1, B2, ...) the active one, starting it when it is the next new one."""
    k = int(name[1:]) if name[:1] == "B" and name[1:].isdigit() else 0
    n = len(MODEL.bodies)
    if k < 1 or k > n + 1:
        raise CommandFailed("there is no body %s: the bodies are B1..B%d, and the next new one is B%d" % (name, n, n + 1), name)
    if k == n + 1:
        MODEL.bodies.append(MODEL.doc.addObject("PartDesign::Body", "Body"))
    MODEL.body = MODEL.bodies[k - 1]
    MODEL.doc.recompute()
    return {"feature": None, "body": name}
