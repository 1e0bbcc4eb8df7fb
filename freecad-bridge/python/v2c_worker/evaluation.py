"""Evaluation requests on shapes kept in BREP files: mass properties, exact boolean
volumes, meshes for sampling, and shapes kept in the worker between requests.

Stateless towards the document, so that two models built in turn in the one document can
meet in a boolean, and a replayed worker needs no log for them."""

import time

import FreeCAD
import Part

from v2c_worker.commands import exception_text
from v2c_worker.document import MODEL, V, CommandFailed
from v2c_worker.files import _read_shape, read_step


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


def save_kept(req):
    """Write a kept shape as binary BREP, every number as it is: another worker loads the
    very shape (a rebuild there could land elsewhere, its history being another)."""
    slot = req["slot"]
    if slot not in KEPT:
        raise CommandFailed("no %s shape is kept" % slot.replace("_", " "))
    KEPT[slot].exportBinary(req["path"])
    return {}


def load_kept(req):
    """Keep the shape of a binary BREP file that `save_kept` wrote."""
    shape = Part.Shape()
    try:
        shape.importBinary(req["path"])
    except Exception as exc:
        raise CommandFailed("cannot read %s: %s" % (req["path"], exception_text(exc)))
    if shape.isNull():
        raise CommandFailed("%s holds no shape" % req["path"])
    KEPT[req["slot"]] = shape
    return {}


def intersect_kept(req):
    """Only the common volume of the two kept shapes, transformed: their meshes are known.
    With `fuzzy`, a fuzzy boolean: faces closer than that count as one."""
    return _compare_kept(req, mesh=False, booleans=True)


def compare_kept(req):
    """Only the meshes of the two kept shapes, transformed: the boolean is a request of its
    own (`intersect_kept`), which the caller bounds in time."""
    return _compare_kept(req, mesh=True, booleans=False)


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
            fuzzy = req.get("fuzzy")
            out["common"] = (p.common(g, fuzzy) if fuzzy else p.common(g)).Volume
        except Exception as exc:
            out["boolean_error"] = "boolean failed: %s" % exception_text(exc)
    out["mesh_seconds"] = meshed - started
    out["boolean_seconds"] = time.perf_counter() - meshed
    return out
