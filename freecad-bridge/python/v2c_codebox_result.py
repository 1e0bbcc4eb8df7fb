"""What the direct-code baseline's script built: its result found, checked and saved.

Part of the codebox (`v2c_codebox.py`, whose docstring says how a run goes): after the
script ran, `_collect_and_save` finds the result (step 4 there), adds `V2C_Result` and writes
`model.step` and `model.FCStd` (step 5); `_response` is the shape of every answer. Loaded
before the codebox itself, as the module `v2c_codebox_result`; it runs after the script,
under the same audit hook, and the script never calls it.
"""

import os
import shutil

STEP_NAME = "model.step"
FCSTD_NAME = "model.FCStd"
RESULT_NAME = "V2C_Result"
_FILE_PROPERTY_TYPES = ("App::PropertyFile", "App::PropertyFileIncluded")


def _response(kind, error="", **extra):
    out = {
        "ok": kind == "ok",
        "kind": kind,
        "error": error,
        "solids": 0,
        "volume": 0.0,
        "valid": False,
        "features": 0,
        "pads_pockets": 0,
        "parametric": False,
        "result_object": None,
        "output": "",
        "document": None,
        "feature_errors": [],
        "violations": [],
        "unguarded": [],
    }
    out.update(extra)
    return out


# ---------------------------------------------------------------------------- the result


def _has_solids(shape):
    try:
        return shape is not None and not shape.isNull() and len(shape.Solids) > 0
    except Exception:
        return False


def _shape(obj):
    try:
        return obj.Shape
    except Exception:
        return None


def _broken(obj):
    try:
        state = obj.State
    except Exception:
        return False
    return "Invalid" in state or "Error" in state


def _status(obj):
    try:
        status = obj.getStatusString()
    except Exception:
        status = ""
    if not status or status in ("Touched", "Valid"):
        status = "FreeCAD could not compute the feature"
    return "%s (%s): %s" % (obj.Name, obj.TypeId, status)


_CONTAINERS = ("App::DocumentObjectGroup", "App::Part", "App::Origin")
_NOT_CONSUMERS = ("PartDesign::ShapeBinder", "PartDesign::SubShapeBinder")
_ORIGIN_TYPES = ("App::Origin", "App::Plane", "App::Line")


def _final_objects(doc):
    """The objects whose solids make up the model: bodies and unconsumed top-level features."""
    objects = list(doc.Objects)
    bodies = [o for o in objects if o.isDerivedFrom("PartDesign::Body")]
    in_body = set()
    for body in bodies:
        for member in body.Group:
            in_body.add(member.Name)
        origin = getattr(body, "Origin", None)
        if origin is not None:
            in_body.add(origin.Name)
            for feature in getattr(origin, "OriginFeatures", []):
                in_body.add(feature.Name)

    def consumed(obj):
        for user in obj.InList:
            if user.TypeId in _CONTAINERS or user.TypeId in _NOT_CONSUMERS:
                continue
            if user.isDerivedFrom("PartDesign::Body") and user.hasObject(obj) and getattr(user, "BaseFeature", None) != obj:
                continue
            if _has_solids(_shape(user)):
                return True
        return False

    candidates = []
    for obj in objects:
        if obj.Name in in_body or not obj.isDerivedFrom("Part::Feature"):
            continue
        if not _has_solids(_shape(obj)) or consumed(obj):
            continue
        candidates.append(obj)
    visible = [o for o in candidates if getattr(o, "Visibility", True) is not False]
    return visible or candidates


def _documents(FreeCAD, doc_name):
    docs = FreeCAD.listDocuments()
    order = []
    if doc_name in docs:
        order.append(docs[doc_name])
    active = FreeCAD.ActiveDocument
    if active is not None and active.Name in docs and docs[active.Name] not in order:
        order.append(docs[active.Name])
    for d in docs.values():
        if d not in order:
            order.append(d)
    return order


def _collect_and_save(namespace, doc_name, out_dir, modules):
    FreeCAD, Part = modules["FreeCAD"], modules["Part"]
    docs = _documents(FreeCAD, doc_name)
    for d in docs:
        try:
            d.recompute()
        except Exception:
            pass

    result = namespace.get("result")
    shape_result = None
    objs, target = [], None
    if isinstance(result, (list, tuple)) and result and all(isinstance(s, Part.Shape) for s in result):
        result = _fuse([s for s in result if _has_solids(s)], Part) if any(_has_solids(s) for s in result) else None
    if isinstance(result, Part.Shape) and _has_solids(result):
        shape_result = result
        target = docs[0] if docs else FreeCAD.newDocument("Model")
    elif isinstance(result, FreeCAD.DocumentObject) and _has_solids(_shape(result)):
        objs, target = [result], result.Document
    else:
        for d in docs:
            objs = _final_objects(d)
            if objs:
                target = d
                break
    if shape_result is None and not objs:
        # Say what the script did build and in which state, so a failure can be read: a
        # sketch the solver refused, a pad on nothing...
        states = []
        for d in docs:
            for o in d.Objects:
                if o.TypeId in _ORIGIN_TYPES:
                    continue
                if _broken(o):
                    states.append(_status(o))
                elif o.TypeId.startswith("Sketcher::") or _has_solids(_shape(o)):
                    states.append("%s (%s): ok" % (o.Name, o.TypeId))
                else:
                    states.append("%s (%s): no solid" % (o.Name, o.TypeId))
        detail = "; ".join(states[:8]) if states else "the document is empty"
        return _response(
            "no_solid",
            "the script made no solid (no `result` shape, no body or Part feature with a solid); features: " + detail,
            feature_states=states,
        )

    feature_errors = [_status(o) for o in target.Objects if _broken(o)]
    if objs:
        relevant = set()
        for o in objs:
            relevant.add(o.Name)
            relevant.update(x.Name for x in o.OutListRecursive)
        bad = [_status(o) for o in target.Objects if o.Name in relevant and _broken(o)]
        if bad:
            return _response("invalid", "features in an error state: " + "; ".join(bad[:5]),
                             feature_errors=feature_errors, document=target.Name)

    # 5. the object the evaluator measures
    parametric = True
    if shape_result is not None:
        result_obj = target.addObject("Part::Feature", RESULT_NAME)
        result_obj.Shape = shape_result
        parametric = False
    elif len(objs) == 1 and objs[0].isDerivedFrom("PartDesign::Body"):
        result_obj = objs[0]
    else:
        result_obj = _add_parametric_result(target, objs, Part)
        if result_obj is None:
            result_obj = target.addObject("Part::Feature", RESULT_NAME)
            result_obj.Shape = _fuse([o.Shape for o in objs], Part)
            parametric = False
    target.recompute()
    shape = result_obj.Shape
    info = {
        "solids": len(shape.Solids) if not shape.isNull() else 0,
        "volume": float(shape.Volume) if not shape.isNull() else 0.0,
        "valid": bool(not shape.isNull() and shape.isValid()),
        "features": len([o for o in target.Objects if o.TypeId not in _ORIGIN_TYPES and o is not result_obj]),
        "pads_pockets": len([o for o in target.Objects if o.TypeId in ("PartDesign::Pad", "PartDesign::Pocket")]),
        "parametric": parametric,
        "result_object": result_obj.Name,
        "document": target.Name,
        "feature_errors": feature_errors,
    }
    if info["solids"] == 0:
        return _response("no_solid", "the result object %s holds no solid" % result_obj.Name, **info)
    if _broken(result_obj):
        return _response("invalid", "the result is in an error state: " + _status(result_obj), **info)
    if not info["valid"]:
        return _response("invalid", "the result shape is not a valid solid (OCC check failed)", **info)
    if info["volume"] <= 1e-9:
        return _response("invalid", "the result has no volume (%.3g)" % info["volume"], **info)

    for d in FreeCAD.listDocuments().values():
        bad_file = _file_property_violation(d, out_dir)
        if bad_file:
            return _response("sandbox", bad_file, **info)

    _remove_outputs(out_dir)
    shape.exportStep(os.path.join(out_dir, STEP_NAME))
    target.saveAs(os.path.join(out_dir, FCSTD_NAME))
    return _response("ok", "", **info)


def _fuse(shapes, Part):
    if len(shapes) == 1:
        return shapes[0].copy()
    try:
        fused = shapes[0].fuse(shapes[1:])
        if _has_solids(fused):
            return fused
    except Exception:
        pass
    return Part.makeCompound(shapes)


def _add_parametric_result(doc, objs, Part):
    """A Part::MultiFuse of the result objects (Part::Compound for one or if fusing fails)."""
    tries = ["Part::MultiFuse", "Part::Compound"] if len(objs) > 1 else ["Part::Compound"]
    for type_id in tries:
        obj = doc.addObject(type_id, RESULT_NAME)
        if type_id == "Part::MultiFuse":
            obj.Shapes = list(objs)
        else:
            obj.Links = list(objs)
        doc.recompute()
        if not _broken(obj) and _has_solids(_shape(obj)):
            return obj
        doc.removeObject(obj.Name)
    return None


def _file_property_violation(doc, out_dir):
    """PropertyFile/FileIncluded values make FreeCAD's C++ read files: only out_dir is fine."""
    for obj in doc.Objects:
        try:
            names = obj.PropertiesList
        except Exception:
            continue
        for name in names:
            try:
                if obj.getTypeIdOfProperty(name) not in _FILE_PROPERTY_TYPES:
                    continue
                value = getattr(obj, name)
            except Exception:
                continue
            if not value or not isinstance(value, str):
                continue
            real = os.path.realpath(value)
            if real == out_dir or real.startswith(out_dir + os.sep):
                continue
            # (a PropertyFileIncluded value points at FreeCAD's copy in the document's transient
            # directory: we cannot tell where it was copied from, so it is refused too)
            return "sandbox: file property %s.%s refers to %r (outside out_dir)" % (obj.Name, name, value)
    return None


def _remove_outputs(out_dir):
    for name in (STEP_NAME, FCSTD_NAME):
        path = os.path.join(out_dir, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
        except Exception:
            pass
