"""pydantic JSON Schema -> Kubernetes structural OpenAPI v3 schema.

Structural means: every node typed, no ``$ref``, no ``anyOf`` unions of types (only the int-or-string form),
``additionalProperties`` never beside ``properties``. pydantic's draft 2020-12 output is rewritten accordingly.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

_DROP = {"title", "$defs"}


def structural_schema(model: type[BaseModel], *, keep_defaults: bool = True) -> dict[str, Any]:
    raw: dict[str, Any] = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = raw.get("$defs", {})
    return _convert(raw, defs, keep_defaults=keep_defaults, trail=())


def _resolve(node: dict[str, Any], defs: dict[str, Any], trail: tuple[str, ...]) -> dict[str, Any]:
    ref = node["$ref"]
    name = ref.rsplit("/", 1)[-1]
    if name in trail:
        raise ValueError(f"recursive model {name} cannot become a structural schema")
    merged: dict[str, Any] = copy.deepcopy(defs[name])
    # Sibling keys on the reference (the field's description, its CEL rules) win over the model's own.
    merged.update({k: v for k, v in node.items() if k != "$ref"})
    return merged


def _key_rule(names: dict[str, Any]) -> dict[str, str] | None:
    """``propertyNames`` (min/max length, pattern) as a CEL rule over the map's keys."""
    checks = []
    if "minLength" in names:
        checks.append(f"size(k) >= {int(names['minLength'])}")
    if "maxLength" in names:
        checks.append(f"size(k) <= {int(names['maxLength'])}")
    if "pattern" in names:
        checks.append(f"k.matches({names['pattern']!r})")
    unknown = set(names) - {"minLength", "maxLength", "pattern", "type"}
    if unknown:
        raise ValueError(f"propertyNames keywords {sorted(unknown)} have no structural form")
    if not checks:
        return None
    described = ", ".join(c.replace("size(k)", "length").replace("k.matches", "matching") for c in checks)
    return {"rule": f"self.all(k, {' && '.join(checks)})", "message": f"every key must have {described}"}


def _convert(
    node: dict[str, Any], defs: dict[str, Any], *, keep_defaults: bool, trail: tuple[str, ...]
) -> dict[str, Any]:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return _convert(_resolve(node, defs, trail), defs, keep_defaults=keep_defaults, trail=(*trail, name))
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"unions are not structural: {branches}")
        branch = branches[0]
        if "$ref" in branch:
            name = branch["$ref"].rsplit("/", 1)[-1]
            branch, trail = _resolve(branch, defs, trail), (*trail, name)
        # Optional[X]: the field's own keys (description, default, CEL rules) go onto X's schema.
        merged = {**branch, **{k: v for k, v in node.items() if k != "anyOf"}}
        return _convert(merged, defs, keep_defaults=keep_defaults, trail=trail)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "default" and (value is None or not keep_defaults or isinstance(value, (dict, list))):
            # Object and list defaults stay in the operator: a schema default would freeze them into every object.
            continue
        if key == "additionalProperties" and value is False:
            continue  # the API server prunes unknown fields; `false` beside `properties` is not structural
        if key == "propertyNames":
            # Not in Kubernetes' JSONSchemaProps (server-side apply refuses the CRD: "field not declared in
            # schema"): a map's key rules become a CEL rule over its keys instead.
            rule = _key_rule(value)
            if rule:
                out.setdefault("x-kubernetes-validations", []).append(rule)
            continue
        if key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key == "properties":
            out[key] = {n: _convert(p, defs, keep_defaults=keep_defaults, trail=trail) for n, p in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value, defs, keep_defaults=keep_defaults, trail=trail)
        else:
            out[key] = value
    if "properties" in out and "type" not in out:
        out["type"] = "object"
    if "required" in out:
        out["required"] = sorted(out["required"])
    return out
