"""FreeCAD side of the vision2cad worker.

The Rust worker embeds CPython, loads this module and hands it one JSON request at a time
(`handle`). Requests arrive already validated and *lowered* by the Rust side: sketch
primitives are in the sketch's own 2D frame, arcs are counter-clockwise with angles in
radians, and constraints are raw Sketcher tuples whose geometry index may be an entity ID
("E7", "V3") that this module turns into external (projected) geometry. This module only
talks to FreeCAD; it decides nothing that the Rust side can decide.

Every mutating request is a transaction: on any failure the objects it created are removed,
changed properties are restored, and the document recomputes to exactly its previous state.
"""

import json
import math
import os
import re
import sys
import time
import traceback

for _p in ("/usr/lib/freecad-python3/lib", "/usr/lib/freecad/Mod"):
    if _p not in sys.path:
        sys.path.append(_p)

import FreeCAD  # noqa: E402
import Part  # noqa: E402
import Sketcher  # noqa: E402,F401  (registers Sketcher::SketchObject)
import PartDesign  # noqa: E402,F401  (registers PartDesign::Body)

V = FreeCAD.Vector
EPS_VOLUME = 1e-9


# Kinds of refusal (freecad-bridge's `RefusalKind`): callers match on these, not on wording.
NO_EFFECT = "no_effect"
SEPARATE_SOLIDS = "separate_solids"
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
        self.doc = None
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


MODEL = None


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


# ---------------------------------------------------------------------------- commands


def _share_coincident_points(geos, constraints):
    """Give a line end the exact coordinates of the arc point it is coincident with.

    An arc's ends are computed from its centre and angles, so they miss the line's end by a
    few ulps. The solver merges coincident points into one unknown and keeps whichever comes
    first in its pointer-ordered maps, which depends on the heap: the same sketch then solved
    to 23 in one run and 23.000000000000004 in another, and tessellation, views and files
    differed. With the two points equal to the bit, either choice gives the same sketch."""
    for c in constraints:
        args = c["args"]
        if c["kind"] != "Coincident" or len(args) != 4:
            continue
        (ga, pa, gb, pb) = args
        if not (isinstance(ga, dict) and isinstance(gb, dict)):
            continue
        ia, ib = ga["geo"], gb["geo"]
        if not (isinstance(ia, int) and isinstance(ib, int) and 0 <= ia < len(geos) and 0 <= ib < len(geos)):
            continue
        a, b = geos[ia], geos[ib]
        a_line, b_line = isinstance(a, Part.LineSegment), isinstance(b, Part.LineSegment)
        if a_line == b_line:
            continue
        (line, end), (other, at) = ((a, pa), (b, pb)) if a_line else ((b, pb), (a, pa))
        target = {1: getattr(other, "StartPoint", None), 2: getattr(other, "EndPoint", None)}.get(at)
        if at == 3:
            target = other.Center
        if target is None or end not in (1, 2):
            continue
        start, stop = line.StartPoint, line.EndPoint
        if end == 1 and (start - target).Length < 1e-6:
            line.StartPoint = target
        elif end == 2 and (stop - target).Length < 1e-6:
            line.EndPoint = target


def add_sketch(cmd):
    sk = MODEL.body.newObject("Sketcher::SketchObject", cmd["name"])
    if sk.Name != cmd["name"]:
        raise CommandFailed("a feature named %s already exists" % cmd["name"], cmd["name"])
    sk.Support = support_of(cmd["on"])
    sk.MapMode = "FlatFace"
    geos = []
    for g in cmd["geometry"]:
        if "line" in g:
            x1, y1, x2, y2 = g["line"]
            geo = Part.LineSegment(V(x1, y1, 0), V(x2, y2, 0))
        elif "circle" in g:
            cx, cy, r = g["circle"]
            geo = Part.Circle(V(cx, cy, 0), V(0, 0, 1), r)
        else:
            cx, cy, r, a0, a1 = g["arc"]
            geo = Part.ArcOfCircle(Part.Circle(V(cx, cy, 0), V(0, 0, 1), r), a0, a1)
        geos.append(geo)
    _share_coincident_points(geos, cmd["constraints"])
    for g, geo in zip(cmd["geometry"], geos):
        sk.addGeometry(geo, bool(g.get("construction", False)))
    externals = {}

    def geo_index(ref):
        if isinstance(ref, int):
            return ref
        if ref not in externals:
            if entity_kind(ref) == "E":
                owner, sub, _ = resolve_edge(ref)
            else:
                owner, sub, _ = resolve_vertex(ref)
            sk.addExternal(owner.Name, sub)
            externals[ref] = -3 - len(externals)
        return externals[ref]

    for c in cmd["constraints"]:
        args = []
        for a in c["args"]:
            if isinstance(a, dict):
                args.append(geo_index(a["geo"]))
            else:
                args.append(a)
        try:
            sk.addConstraint(Sketcher.Constraint(c["kind"], *args))
        except Exception as exc:  # Sketcher raises plain exceptions for bad tuples
            raise CommandFailed("constraint %s %s refused: %s" % (c["kind"], c.get("label", ""), exception_text(exc)))
    MODEL.doc.recompute()
    status = sk.solve()
    dropped = []
    if status == -2:
        # Redundant only (conflicts rank first): the solver's own choice is removed and the
        # sketch solves as drawn; the caller learns which constraints went.
        dropped = _drop_redundant(sk, [c.get("label", "") for c in cmd["constraints"]])
        MODEL.doc.recompute()
        status = sk.solve()
    if status != 0 or "Invalid" in sk.State:
        reasons = {-1: "the solver failed", -2: "redundant constraints", -3: "conflicting constraints"}
        detail = reasons.get(status, sk.getStatusString())
        if status == -3:
            culprits = _conflicting(sk, [c.get("label", "") for c in cmd["constraints"]])
            if culprits:
                detail += " (%s: the sketch solves without any one of them)" % ", ".join(culprits)
        raise CommandFailed("sketch %s cannot be solved: %s" % (cmd["name"], detail), cmd["name"])
    result = {"feature": sk.Name, "frame": frame_of(sk)}
    if dropped:
        result["dropped"] = dropped
    return result


def _conflicting(sk, labels):
    """The constraints in conflict, by label: those without which the sketch solves (each is
    switched off in turn and back on)."""
    found = []
    for i in range(len(sk.Constraints)):
        try:
            sk.setActive(i, False)
            solved = sk.solve() in (0, -2)
            sk.setActive(i, True)
        except Exception:
            continue
        if solved:
            found.append(labels[i] if i < len(labels) else "#%d" % i)
    return found


def _constraint_key(c):
    return (c.Type, c.First, c.FirstPos, c.Second, c.SecondPos, c.Third, c.ThirdPos, c.Value)


def _drop_redundant(sk, labels):
    """Remove the constraints the solver finds redundant; return their labels, in order.
    Removal keeps the order of the rest, so the removed ones are found by walking both lists."""
    before = [_constraint_key(c) for c in sk.Constraints]
    sk.autoRemoveRedundants(True)
    after = [_constraint_key(c) for c in sk.Constraints]
    dropped, j = [], 0
    for i, key in enumerate(before):
        if j < len(after) and after[j] == key:
            j += 1
        else:
            dropped.append(labels[i] if i < len(labels) else "#%d" % i)
    return dropped


def _configure_extent(feat, extent, pocket):
    kind = extent["type"]
    if kind == "one_side":
        feat.Type = "Length"
        feat.Length = extent["depth"]
    elif kind == "two_sides":
        feat.Type = "TwoLengths"
        feat.Length = extent["depth"]
        feat.Length2 = extent["depth2"]
    elif kind == "symmetric":
        feat.Type = "Length"
        feat.Length = extent["depth"]
        feat.Midplane = True
    elif kind == "through_all":
        feat.Type = "ThroughAll" if pocket else "UpToLast"
        feat.Midplane = bool(extent.get("symmetric", False))


def add_extrude(cmd):
    sk = named_feature(cmd["profile"], "Sketcher::SketchObject", "sketch")
    pocket = cmd["mode"] == "cut"
    feat = MODEL.body.newObject("PartDesign::Pocket" if pocket else "PartDesign::Pad", "Pocket" if pocket else "Pad")
    feat.Profile = sk
    _configure_extent(feat, cmd["extent"], pocket)
    feat.Reversed = bool(cmd.get("reversed", False))
    return feat


def _axis_link(axis):
    if entity_kind(axis) == "E":
        owner, sub, edge = resolve_edge(axis)
        if _CURVES.get(type(edge.Curve).__name__) != "line":
            raise CommandFailed("axis %s is not a straight edge" % axis, axis)
        return (owner, [sub])
    sketch_name, _, part = axis.partition(".")
    sk = named_feature(sketch_name, "Sketcher::SketchObject", "sketch")
    if part in ("V_Axis", "H_Axis"):
        return (sk, [part])
    index = int(part)
    if index >= len(sk.Geometry) or type(sk.Geometry[index]).__name__ != "LineSegment":
        raise CommandFailed("axis %s is not a line of sketch %s" % (axis, sketch_name), axis)
    return (sk, ["Edge%d" % (index + 1)])


def add_revolve(cmd):
    sk = named_feature(cmd["profile"], "Sketcher::SketchObject", "sketch")
    cut = cmd["mode"] == "cut"
    feat = MODEL.body.newObject("PartDesign::Groove" if cut else "PartDesign::Revolution", "Groove" if cut else "Revolution")
    feat.Profile = sk
    feat.ReferenceAxis = _axis_link(cmd["axis"])
    feat.Angle = cmd["angle"]
    feat.Midplane = bool(cmd.get("symmetric", False))
    feat.Reversed = bool(cmd.get("reversed", False))
    return feat


def add_sweep(cmd):
    sk = named_feature(cmd["profile"], "Sketcher::SketchObject", "sketch")
    cut = cmd["mode"] == "cut"
    feat = MODEL.body.newObject("PartDesign::SubtractivePipe" if cut else "PartDesign::AdditivePipe", "Sweep")
    feat.Profile = sk
    path = cmd["path"]
    if "sketch" in path:
        feat.Spine = (named_feature(path["sketch"], "Sketcher::SketchObject", "sketch"), [])
    else:
        links = [resolve_edge(e) for e in path["edges"]]
        feat.Spine = (links[0][0], [sub for _, sub, _ in links])
    feat.Mode = "Frenet" if cmd.get("frenet", False) else "Standard"
    return feat


def add_loft(cmd):
    sketches = [named_feature(s, "Sketcher::SketchObject", "sketch") for s in cmd["profiles"]]
    cut = cmd["mode"] == "cut"
    feat = MODEL.body.newObject("PartDesign::SubtractiveLoft" if cut else "PartDesign::AdditiveLoft", "Loft")
    feat.Profile = sketches[0]
    feat.Sections = sketches[1:]
    feat.Ruled = bool(cmd.get("ruled", False))
    feat.Closed = bool(cmd.get("closed", False))
    return feat


def add_dress_up(cmd):
    links = [resolve_edge(e) for e in cmd["edges"]]
    owner = links[0][0]
    if cmd["op"] == "fillet":
        feat = MODEL.body.newObject("PartDesign::Fillet", "Fillet")
        feat.Radius = cmd["radius"]
    else:
        feat = MODEL.body.newObject("PartDesign::Chamfer", "Chamfer")
        feat.Size = cmd["size"]
    feat.Base = (owner, [sub for _, sub, _ in links])
    return feat


def add_plane(cmd):
    support = support_of(cmd["on"])
    plane = MODEL.body.newObject("PartDesign::Plane", cmd["name"])
    if plane.Name != cmd["name"]:
        raise CommandFailed("a feature named %s already exists" % cmd["name"], cmd["name"])
    plane.Support = [support]
    plane.MapMode = "FlatFace"
    MODEL.doc.recompute()
    at_u, at_v = cmd.get("at", (0.0, 0.0))
    current = FreeCAD.Placement(V(at_u, at_v, cmd.get("offset", 0.0)), FreeCAD.Rotation())
    base = plane.Placement
    axes = {"x": V(1, 0, 0), "y": V(0, 1, 0), "z": V(0, 0, 1)}
    for rot in cmd.get("rotations", []):
        angle = rot["angle"]
        axis = rot["axis"]
        if axis in axes:
            turn = FreeCAD.Placement(V(0, 0, 0), FreeCAD.Rotation(axes[axis], angle))
        else:
            # Rotate about a straight edge: express the edge in the plane's frame as turned
            # so far, project it onto the plane and turn about that line.
            _, _, edge = resolve_edge(axis, linked=False)
            if _CURVES.get(type(edge.Curve).__name__) != "line":
                raise CommandFailed("rotation axis %s is not a straight edge" % axis, axis)
            inv = base.multiply(current).inverse()
            a = inv.multVec(edge.Vertexes[0].Point)
            b = inv.multVec(edge.Vertexes[-1].Point)
            direction = V(b.x - a.x, b.y - a.y, 0)
            if direction.Length < 1e-9:
                raise CommandFailed("rotation axis %s is perpendicular to the plane it turns" % axis, axis)
            pivot = V(a.x, a.y, 0)
            turn = (
                FreeCAD.Placement(pivot, FreeCAD.Rotation())
                .multiply(FreeCAD.Placement(V(0, 0, 0), FreeCAD.Rotation(direction, angle)))
                .multiply(FreeCAD.Placement(-pivot, FreeCAD.Rotation()))
            )
        current = current.multiply(turn)
    plane.AttachmentOffset = current
    return {"feature": plane.Name, "frame": None, "_obj": plane}


SOLID_OPS = {
    "extrude": add_extrude,
    "revolve": add_revolve,
    "sweep": add_sweep,
    "loft": add_loft,
    "fillet": add_dress_up,
    "chamfer": add_dress_up,
}


def _failure_reason(obj):
    try:
        status = obj.getStatusString()
    except Exception:
        status = ""
    if status and status not in ("Touched", "Valid", ""):
        return status
    return "FreeCAD could not compute the feature"


def _check_solid(feat, op, mode, volume_before):
    """A feature may report success and still produce garbage: check the result."""
    if "Invalid" in feat.State or "Error" in feat.State:
        reason = _failure_reason(feat)
        # PartDesign's own words for a result it cannot hold in one body.
        kind = SEPARATE_SOLIDS if "multiple solids" in reason else OTHER
        raise CommandFailed(reason, kind=kind)
    shape = feat.Shape
    if shape.isNull() or not shape.Solids:
        raise CommandFailed("the feature produced no solid")
    if len(shape.Solids) != 1:
        raise CommandFailed(
            "the result has %d separate solids; a body must stay one solid" % len(shape.Solids), kind=SEPARATE_SOLIDS
        )
    if not shape.isValid():
        raise CommandFailed("the result is not a valid solid")
    volume = shape.Volume
    if volume <= EPS_VOLUME:
        raise CommandFailed("the result has no volume (%.3g)" % volume)
    tol = 1e-7 * max(volume, volume_before, 1.0)
    if mode == "add" and volume <= volume_before + tol:
        raise CommandFailed("the %s added no material" % op, kind=NO_EFFECT)
    if mode == "cut" and volume >= volume_before - tol:
        raise CommandFailed("the %s removed no material: the profile does not intersect the part" % op, kind=NO_EFFECT)
    if mode == "dress" and abs(volume - volume_before) <= tol:
        raise CommandFailed("the %s changed nothing" % op, kind=NO_EFFECT)


def execute(cmd):
    op = cmd["op"]
    if op == "end":
        return {"feature": None}
    if MODEL.imported:
        raise CommandFailed("the document holds an imported shape; commands need a fresh document")
    if op == "body":
        return select_body(cmd["name"])
    doc = MODEL.doc
    snapshot = Snapshot()
    own = MODEL.owner_of(MODEL.body)
    volume_before = own.Shape.Volume if own is not None else 0.0
    MODEL.referenced = MODEL.owners()
    try:
        if op == "sketch":
            result = add_sketch(cmd)
        elif op == "plane":
            result = add_plane(cmd)
            plane = result.pop("_obj")
            doc.recompute()
            if "Invalid" in plane.State:
                raise CommandFailed("plane %s cannot be attached: %s" % (plane.Name, _failure_reason(plane)))
            result["frame"] = frame_of(plane)
        else:
            feat = SOLID_OPS[op](cmd)
            doc.recompute()
            mode = cmd.get("mode", "dress")
            _check_solid(feat, op, mode, volume_before)
            result = {"feature": feat.Name}
        return result
    except CommandFailed as exc:
        snapshot.restore()
        # A refused reference names its entity; a failed computation does not.
        computed = exc.entity is None
        if computed:
            exc.entity = _subject(cmd)
        if computed and op in ("fillet", "chamfer") and "too large" not in exc.reason:
            exc.reason += " (the %s may be too large for the faces next to these edges)" % ("radius" if op == "fillet" else "size")
        adds = cmd.get("mode") == "add"
        if computed and adds and exc.kind == SEPARATE_SOLIDS:
            exc.reason += ' (a separate solid needs a body of its own: {"op": "body", "name": "B%d"})' % (len(MODEL.bodies) + 1)
        raise
    except Exception as exc:
        snapshot.restore()
        text = exception_text(exc)
        kind = SEPARATE_SOLIDS if "multiple solids" in text else OTHER
        raise CommandFailed("FreeCAD: %s" % text, _subject(cmd), kind)
    finally:
        MODEL.referenced = None


def _subject(cmd):
    """What a failure of this command is about, for the error message."""
    if cmd["op"] in ("fillet", "chamfer"):
        return ", ".join(cmd["edges"])
    if cmd["op"] == "loft":
        return ", ".join(cmd["profiles"])
    return cmd.get("profile") or cmd.get("name")


def exception_text(exc):
    """FreeCAD raises exceptions whose argument is a dict with the message inside."""
    arg = exc.args[0] if exc.args else None
    if isinstance(arg, dict):
        return arg.get("sErrMsg") or arg.get("swhat") or str(arg)
    return str(exc) or type(exc).__name__


class Snapshot:
    """What a command or a tentative step may change: the objects, the bodies, which one is
    active and each body's tip. `restore` puts the document back exactly."""

    def __init__(self):
        self.names = set(o.Name for o in MODEL.doc.Objects)
        self.bodies = list(MODEL.bodies)
        self.active = MODEL.body
        self.tips = [b.Tip for b in MODEL.bodies]

    def restore(self):
        doc = MODEL.doc
        created = [o.Name for o in doc.Objects if o.Name not in self.names]
        for name in reversed(created):
            for body in self.bodies:
                obj = doc.getObject(name)
                if obj is not None and body.hasObject(obj):
                    body.removeObject(obj)
        for name in reversed(created):
            if doc.getObject(name) is not None:
                doc.removeObject(name)
        MODEL.bodies = list(self.bodies)
        MODEL.body = self.active
        for body, tip in zip(self.bodies, self.tips):
            if tip is not None:
                body.Tip = tip
        doc.recompute()


# ---------------------------------------------------------------------------- parameters


def parameters():
    """Every editable extrusion depth, in document order."""
    out = []
    for obj in MODEL.doc.Objects:
        if obj.TypeId not in ("PartDesign::Pad", "PartDesign::Pocket"):
            continue
        kind = "pocket" if obj.TypeId == "PartDesign::Pocket" else "pad"
        if obj.Type == "Length":
            role = "symmetric_total" if obj.Midplane else "depth"
            out.append({"name": "%s.Length" % obj.Name, "feature": obj.Name, "kind": kind, "role": role, "value": float(obj.Length)})
        elif obj.Type == "TwoLengths":
            out.append({"name": "%s.Length" % obj.Name, "feature": obj.Name, "kind": kind, "role": "side1", "value": float(obj.Length)})
            out.append({"name": "%s.Length2" % obj.Name, "feature": obj.Name, "kind": kind, "role": "side2", "value": float(obj.Length2)})
    return out


def set_parameters(values):
    doc = MODEL.doc
    old = {}
    try:
        for name, value in values.items():
            feature, _, prop = name.partition(".")
            obj = doc.getObject(feature)
            if obj is None or prop not in ("Length", "Length2") or obj.TypeId not in ("PartDesign::Pad", "PartDesign::Pocket"):
                raise CommandFailed("unknown parameter %s" % name, name)
            old[name] = float(getattr(obj, prop))
            setattr(obj, prop, value)
        doc.recompute()
        bad = [o for o in doc.Objects if "Invalid" in o.State or "Error" in o.State]
        if bad:
            raise CommandFailed("recompute failed at %s: %s" % (bad[0].Name, _failure_reason(bad[0])), bad[0].Name)
        for k, owner in enumerate(MODEL.owners()):
            if owner is None and len(MODEL.bodies) > 1:
                continue  # a body with no solid yet: the edit changes nothing there
            shape = owner.Shape if owner is not None else None
            if shape is None or len(shape.Solids) != 1 or not shape.isValid() or shape.Volume <= EPS_VOLUME:
                what = "the model" if len(MODEL.bodies) == 1 else "body B%d" % (k + 1)
                raise CommandFailed("after the edit %s is no longer one valid solid" % what)
    except Exception:
        for name, value in old.items():
            feature, _, prop = name.partition(".")
            setattr(doc.getObject(feature), prop, value)
        doc.recompute()
        raise
    return state()


# ---------------------------------------------------------------------------- files


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
        added = removed = None
        if cmd["op"] not in ("sketch", "plane", "body", "end") and after is not None:
            try:
                added = after if before is None else after.cut(before)
                removed = None if before is None else before.cut(after)
            except Exception:
                out["boolean_failed"] = True
        out["added"] = tessellate_shape(added, linear, angular)
        out["removed"] = tessellate_shape(removed, linear, angular)
        curves = []
        if cmd["op"] == "sketch":
            sketch = doc.getObject(cmd["name"])
            for edge in sketch.Shape.Edges:
                curves.append([_vec(p) for p in edge.discretize(Deflection=linear)])
        out["sketch_curves"] = curves
        return out
    finally:
        snapshot.restore()


def plane_frame(on):
    """The local frame a sketch attached to `on` (XY, F3, P1) gets, without keeping it."""
    doc = MODEL.doc
    snapshot = Snapshot()
    MODEL.referenced = MODEL.owners()
    try:
        probe = MODEL.body.newObject("Sketcher::SketchObject", "FrameProbe")
        probe.Support = support_of(on)
        probe.MapMode = "FlatFace"
        doc.recompute()
        return frame_of(probe)
    finally:
        MODEL.referenced = None
        snapshot.restore()


# ---------------------------------------------------------------------------- evaluation
#
# Stateless requests on shapes kept in BREP files, so that two models built in turn in the
# one document can meet in a boolean, and a replayed worker needs no log for them.


def _read_brep(path):
    shape = _read_shape(path, "shape")
    if shape.isNull():
        raise CommandFailed("shape %s is empty" % path, path)
    return shape


def _similar(shape, t):
    """x -> scale * R (x + translate): only rigid motions and a uniform scale, which
    OpenCascade applies exactly (a general matrix would turn every surface into a B-spline)."""
    shape = shape.copy()
    if t is None:
        return shape
    tx, ty, tz = t["translate"]
    if tx or ty or tz:
        shape.translate(V(tx, ty, tz))
    r = t["rotate"]
    if r != [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]:
        m = FreeCAD.Matrix(r[0][0], r[0][1], r[0][2], 0, r[1][0], r[1][1], r[1][2], 0, r[2][0], r[2][1], r[2][2], 0, 0, 0, 0, 1)
        shape.transformShape(m)
    if t["scale"] != 1.0:
        shape.scale(t["scale"])
    return shape


def _bbox(shape):
    try:
        bb = shape.optimalBoundingBox(False)  # exact geometry, not the enlarged fast box
    except Exception:
        bb = shape.BoundBox
    return {"min": [bb.XMin, bb.YMin, bb.ZMin], "max": [bb.XMax, bb.YMax, bb.ZMax]}


def measure(brep):
    """Mass properties of the current shape (inertia about the centre of mass, unit density);
    with `brep`, also write the shape there for the requests below."""
    shape = MODEL.shape()
    if shape is None or shape.isNull():
        raise CommandFailed("the document holds no shape")
    shape = union_of_solids(shape)
    out = mass_properties(shape, True)
    if brep:
        shape.exportBrep(brep)
    return out


def union_of_solids(shape):
    """Evaluation's view of a model with several solids (several bodies, or a STEP file
    holding several): one shape, their union, so overlapping solids count once."""
    solids = shape.Solids
    if len(solids) < 2:
        return shape
    try:
        fused = solids[0].multiFuse(solids[1:])
    except Exception as exc:
        raise CommandFailed("cannot unite the %d solids of the shape: %s" % (len(solids), exception_text(exc)))
    if not fused.Solids:
        raise CommandFailed("the union of the %d solids of the shape holds no solid" % len(solids))
    return fused


def mass_properties(shape, full):
    """Volume, solids, validity and exact box; with `full`, also the area, the centre of mass
    and the inertia tensor (which evaluation needs only under inertia normalisation)."""
    solids = shape.Solids
    volume = sum(s.Volume for s in solids)
    out = {
        "volume": volume,
        "area": shape.Area if full else None,
        "solids": len(solids),
        "valid": bool(shape.isValid()) and len(solids) > 0,
        "bbox": _bbox(shape),
        "center_of_mass": None,
        "inertia": None,
    }
    if full and solids and volume > 0:
        # Several solids: combine each one's inertia with the parallel-axis theorem.
        c = V(0, 0, 0)
        for s in solids:
            c = c + s.CenterOfMass * s.Volume
        c = c * (1.0 / volume)
        total = [[0.0] * 3 for _ in range(3)]
        for s in solids:
            m = s.MatrixOfInertia
            rows = [[m.A11, m.A12, m.A13], [m.A21, m.A22, m.A23], [m.A31, m.A32, m.A33]]
            d = s.CenterOfMass - c
            dv = [d.x, d.y, d.z]
            dd = d.x * d.x + d.y * d.y + d.z * d.z
            for i in range(3):
                for j in range(3):
                    total[i][j] += rows[i][j] + s.Volume * ((dd if i == j else 0.0) - dv[i] * dv[j])
        out["center_of_mass"] = [c.x, c.y, c.z]
        out["inertia"] = total
    return out


def boolean_volumes(req):
    a = _similar(_read_brep(req["a"]), req.get("transform_a"))
    b = _similar(_read_brep(req["b"]), req.get("transform_b"))
    try:
        common = a.common(b)
    except Exception as exc:
        raise CommandFailed("boolean failed: %s" % exception_text(exc))
    return {"volume_a": a.Volume, "volume_b": b.Volume, "common": common.Volume}


def mesh_shape(req):
    """One triangle mesh of the whole (transformed) shape, vertices shared between faces."""
    shape = _similar(_read_brep(req["path"]), req.get("transform"))
    return _triangle_mesh(shape, req["linear_deflection"], req["angular_deflection"])


def _triangle_mesh(shape, linear, angular):
    import MeshPart

    mesh = MeshPart.meshFromShape(Shape=shape, LinearDeflection=linear, AngularDeflection=angular, Relative=False)
    points, facets = mesh.Topology
    positions = [c for p in points for c in (p.x, p.y, p.z)]
    triangles = [i for f in facets for i in f]
    return {"positions": positions, "triangles": triangles}


# The two shapes of one evaluation sample, kept in memory between its requests: no files,
# no document for a STEP file. A lost worker loses them; the pool then runs the sample
# again from its start.
KEPT = {}


def keep_shape(req):
    """Keep a STEP file's shape (`path`) or the document's shape under `slot`, and return its
    mass properties (inertia only when asked)."""
    if req.get("path"):
        shape = read_step(req["path"])
    else:
        shape = MODEL.shape()
        if shape is None or shape.isNull():
            raise CommandFailed("the document holds no shape")
    shape = union_of_solids(shape)
    KEPT[req["slot"]] = shape
    return mass_properties(shape, req["inertia"])


def intersect_kept(req):
    """Only the common volume of the two kept shapes, transformed: their meshes are known."""
    return _compare_kept(req, mesh=False, booleans=True)


def compare_kept(req):
    return _compare_kept(req, mesh=True, booleans=req["booleans"])


def _compare_kept(req, mesh, booleans):
    """Mesh the two kept shapes, each transformed (with `mesh`), and (with `booleans`)
    intersect them: one common, since vol(A fuse B) = vol(A) + vol(B) - vol(A common B). A
    failed boolean is reported, not raised, so the caller can fall back on the meshes."""
    shapes = []
    for slot, transform in (("prediction", req["transform_prediction"]), ("ground_truth", req["transform_ground_truth"])):
        if slot not in KEPT:
            raise CommandFailed("no %s shape is kept" % slot.replace("_", " "))
        shapes.append(_similar(KEPT[slot], transform))
    p, g = shapes
    started = time.perf_counter()

    def meshed_if_asked(shape):
        if not mesh:
            return {"positions": [], "triangles": []}
        return _triangle_mesh(shape, req["linear_deflection"], req["angular_deflection"])

    out = {
        "prediction": meshed_if_asked(p),
        "ground_truth": meshed_if_asked(g),
        "volume_prediction": sum(s.Volume for s in p.Solids),
        "volume_ground_truth": sum(s.Volume for s in g.Solids),
        "common": None,
        "boolean_error": None,
    }
    meshed = time.perf_counter()
    if booleans:
        try:
            out["common"] = p.common(g).Volume
        except Exception as exc:
            out["boolean_error"] = "boolean failed: %s" % exception_text(exc)
    out["mesh_seconds"] = meshed - started
    out["boolean_seconds"] = time.perf_counter() - meshed
    return out


# ---------------------------------------------------------------------------- dispatch


def init(user_home):
    global MODEL
    if user_home:
        os.makedirs(user_home, exist_ok=True)
    MODEL = Model()
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
    "parameters": lambda req: {"parameters": parameters()},
    "set_parameters": lambda req: set_parameters(req["values"]),
    "load": lambda req: load(req["path"]),
    "save": lambda req: save(req.get("fcstd"), req.get("step")),
    "tessellate": lambda req: tessellate(req["linear_deflection"], req["angular_deflection"]),
    "measure": lambda req: measure(req.get("brep")),
    "boolean_volumes": boolean_volumes,
    "mesh_shape": mesh_shape,
    "keep_shape": keep_shape,
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
