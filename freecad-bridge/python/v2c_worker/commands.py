"""Modeling commands (sketch, extrude, revolve, sweep, loft, dress-up, plane, body), each a
transaction, and the parameters an edit test changes."""

import re

import FreeCAD
import Part
import Sketcher

from v2c_worker.document import EPS_VOLUME, MODEL, NO_EFFECT, OTHER, SEPARATE_SOLIDS, UNSOLVABLE, V, CommandFailed
from v2c_worker.entities import (
    _CURVES,
    entity_kind,
    frame_of,
    named_feature,
    resolve_edge,
    resolve_vertex,
    select_body,
    state,
    support_of,
)


def _share_coincident_points(geos, constraints):
    """Give a line end the exact coordinates of the arc point it is coincident with.

    An arc's ends are computed from its centre and angles, so they miss the line's end by a
    few ulps. The solver merges coincident points into one unknown and keeps whichever comes
    first in its pointer-ordered maps, which depends on the heap: the same sketch then solved
    to 23 in one run and 23.000000000000004 in another, and tessellation, views and files
    differed. With the two points equal to the bit, either choice gives the same sketch."""
    for c in constraints:
        args = c["args"]
        # A tangent at two ends (Sketcher's endpoint-to-endpoint form) joins them too.
        if c["kind"] not in ("Coincident", "Tangent") or len(args) != 4:
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
    labels = [c.get("label", "") for c in cmd["constraints"]]
    rounds = 0
    while status == -2 and rounds < 4:
        # Redundant only (conflicts rank first): the solver's own choice is removed and the
        # sketch solves as drawn; the caller learns which constraints went. Removing one
        # set can reveal another (tangent chains), so this repeats while the solver finds
        # more.
        labels, gone = _drop_redundant(sk, labels)
        dropped += gone
        MODEL.doc.recompute()
        status = sk.solve()
        rounds += 1
    if status != 0 or "Invalid" in sk.State:
        reasons = {-1: "the solver failed", -2: "redundant constraints", -3: "conflicting constraints"}
        detail = reasons.get(status, sk.getStatusString())
        if status == -3:
            culprits = _conflicting(sk, labels)
            if culprits:
                detail += " (%s: the sketch solves without any one of them)" % ", ".join(culprits)
        # FreeCAD's own words for a constraint on geometry it cannot apply to.
        detail = re.sub(
            r"Please remove the following malformed constraints?:\s*",
            "constraints that cannot apply to the geometry they name (FreeCAD's numbers, from 1): ",
            detail,
        )
        raise CommandFailed("sketch %s cannot be solved: %s" % (cmd["name"], detail), cmd["name"], UNSOLVABLE)
    result = {"feature": sk.Name, "frame": frame_of(sk), "solved": solved_geometry(sk)}
    if dropped:
        result["dropped"] = dropped
    return result


def solved_geometry(sk):
    """The sketch's own geometry as the solver left it, in the form add_sketch reads
    (`line`, `circle`, `arc` with Sketcher's counter-clockwise angles). A replay that starts
    from these numbers starts at the solution, so the solver has nothing to move: how it
    orders its unknowns (by memory address, which differs from process to process) no longer
    decides where an under-constrained sketch lands."""
    out = []
    for geo in sk.Geometry:
        if isinstance(geo, Part.LineSegment):
            a, b = geo.StartPoint, geo.EndPoint
            out.append({"line": [a.x, a.y, b.x, b.y]})
        elif isinstance(geo, Part.ArcOfCircle):
            c = geo.Center
            out.append({"arc": [c.x, c.y, geo.Radius, geo.FirstParameter, geo.LastParameter]})
        elif isinstance(geo, Part.Circle):
            c = geo.Center
            out.append({"circle": [c.x, c.y, geo.Radius]})
        else:
            out.append(None)
    return out


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
    """Remove the constraints the solver finds redundant; return the labels of those left
    and of those removed, in order. Removal keeps the order of the rest, so the removed ones
    are found by walking both lists."""
    before = [_constraint_key(c) for c in sk.Constraints]
    sk.autoRemoveRedundants(True)
    after = [_constraint_key(c) for c in sk.Constraints]
    kept, dropped, j = [], [], 0
    for i, key in enumerate(before):
        label = labels[i] if i < len(labels) else "#%d" % i
        if j < len(after) and after[j] == key:
            kept.append(label)
            j += 1
        else:
            dropped.append(label)
    return kept, dropped


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
        # FreeCAD's words may run over several lines ("...conflicting constraints:\n2\n, 3, 4"):
        # one line, for a prompt's paragraph and a report's row.
        return re.sub(r"\s+,", ",", " ".join(status.split()))
    return "FreeCAD could not compute the feature"


class InvalidSolid(CommandFailed):
    """The feature computed, but OCC's check finds its solid broken."""


def _check_refined(feat, op, mode, volume_before):
    """Check the result; a broken one is computed once more with the feature's Refine on.

    A fuse of faces that nearly coincide (a ring's face a hair off the face of the link drawn
    around it, as a reader or the fit draws them) can leave coplanar faces whose wires
    intersect, which OCC's check calls invalid; merging the coplanar faces (FreeCAD's Refine,
    OCC's removeSplitter) repairs it. Refine stays off otherwise: it merges faces and so
    renumbers the entities a model is shown with. Replays take the same path, so a program
    builds the same model in every process."""
    try:
        _check_solid(feat, op, mode, volume_before)
    except InvalidSolid:
        if not hasattr(feat, "Refine") or feat.Refine:
            raise
        feat.Refine = True
        MODEL.doc.recompute()
        _check_solid(feat, op, mode, volume_before)


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
        raise InvalidSolid("the result is not a valid solid")
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
            _check_refined(feat, op, mode, volume_before)
            result = {"feature": feat.Name}
        return result
    except CommandFailed as exc:
        snapshot.restore()
        # A refused reference names its entity; a failed computation does not.
        computed = exc.entity is None
        if computed:
            exc.entity = _subject(cmd)
        if computed and op in ("fillet", "chamfer") and "too large" not in exc.reason:
            exc.reason += _dress_up_hint(cmd, volume_before)
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


def _dress_up_hint(cmd, volume_before):
    """Why a fillet or chamfer failed, in the reader's terms. Of several edges, each is tried
    alone (the document put back after each): a reader whose two edges failed together was
    told the radius may be too large, though each edge took it alone."""
    what = "radius" if cmd["op"] == "fillet" else "size"
    edges = cmd["edges"]
    if len(edges) < 2:
        return " (the %s may be too large for the faces next to this edge)" % what
    failing = []
    for edge in edges:
        snapshot = Snapshot()
        try:
            feat = SOLID_OPS[cmd["op"]](dict(cmd, edges=[edge]))
            MODEL.doc.recompute()
            _check_refined(feat, cmd["op"], "dress", volume_before)
        except Exception:
            failing.append(edge)
        finally:
            snapshot.restore()
    if not failing:
        return (
            " (each of these edges takes this %s alone, but not all of them together: their %ss may run"
            " into each other, or the kernel may not round them in one feature (a convex and a concave"
            " edge together); try each edge in a %s of its own, fewer edges at once or a smaller %s)"
            % (what, cmd["op"], cmd["op"], what)
        )
    return " (%s %s not take this %s even alone: it may be too large for the faces next to %s)" % (
        ", ".join(failing),
        "does" if len(failing) == 1 else "do",
        what,
        "it" if len(failing) == 1 else "them",
    )


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
