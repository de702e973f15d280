"""The workflow's config as the Snakefile reads it: command-line overrides typed by the schema, and every
config error named with its file and line (or ``--config``) and what is allowed.

Snakemake parses ``--config key=value`` itself: a top-level value becomes an int, a float, ``True``/``False``
or else YAML read with every scalar left a string, so ``seeds=[0]`` arrives as ``['0']`` and
``timing={warmup: 3}`` as ``{'warmup': '3'}``. :func:`typed_overrides` reads those strings as YAML would in a
config file, except where the schema (``workflow/schemas/config.schema.yaml``) allows a string and not
what YAML makes of it (``label=1`` stays ``'1'``). Values from config files are left as YAML read
them, so a quoted ``"3"`` in a file is refused as a string.

:func:`check` validates the config against the schema with jsonschema and reports every error in one line
each: the file and line the value came from (:class:`Sources`), the key, the schema's complaint and what
the schema allows; :meth:`Sources.label` names where the key of a planning error was set. Errors are
:class:`~kernelscope.cases.ConfigError`; the Snakefile raises them again as Snakemake's ``WorkflowError``,
whose message Snakemake prints without the frames of kernelscope that raised it.

Snakemake reads ``--configfile`` files before the Snakefile runs, and says of one that is not valid YAML only
"Config file is not valid JSON or YAML" (``snakemake --verbose`` shows yaml's message, with its line).
:func:`check_yaml` names the file and line for the workflow's own ``config/config.yaml``, read afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from kernelscope.cases import ConfigError

#: where a value set with ``snakemake --config`` came from, in messages
COMMAND_LINE = "--config"
_TYPE_CHECKER = jsonschema.Draft202012Validator.TYPE_CHECKER
_JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


# --- the schema at a place in the config -------------------------------------------------------------------


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node`` with a local ``$ref`` (``#/definitions/timing``) replaced by its target."""
    while "$ref" in node:
        target: Any = root
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _branches(node: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The alternatives a value at ``node`` may match (``anyOf``/``oneOf`` flattened, refs resolved)."""
    node = _resolve(node, root)
    alternatives = node.get("anyOf") or node.get("oneOf")
    if not alternatives:
        return [node]
    return [b for alt in alternatives for b in _branches(alt, root)]


def _types(node: Mapping[str, Any], root: Mapping[str, Any]) -> set[str] | None:
    """The JSON types the schema allows at ``node``; None where it does not constrain them."""
    types: set[str] = set()
    for branch in _branches(node, root):
        if "type" in branch:
            types.update([branch["type"]] if isinstance(branch["type"], str) else branch["type"])
        elif "enum" in branch:
            types.update(t for t in _JSON_TYPES for v in branch["enum"] if _TYPE_CHECKER.is_type(v, t))
        else:
            return None
    return types


def _child(node: Mapping[str, Any], root: Mapping[str, Any], key: str | int) -> Mapping[str, Any]:
    """The schema of ``value[key]`` for a mapping or list ``value`` at ``node`` ({} where it says nothing)."""
    found = []
    for branch in _branches(node, root):
        types = branch.get("type")
        if types is not None and ("array" if isinstance(key, int) else "object") not in types:
            continue  # an alternative for another kind of value (ncu: a boolean, or a list)
        if isinstance(key, int):
            found.append(branch.get("items", {}))
        elif key in branch.get("properties", {}):
            found.append(branch["properties"][key])
        elif branch.get("additionalProperties", True) is not False:
            extra = branch.get("additionalProperties", True)
            found.append(extra if isinstance(extra, Mapping) else {})
    return found[0] if len(found) == 1 else {"anyOf": found} if found else {}


# --- command-line overrides --------------------------------------------------------------------------------


def _typed(value: Any, node: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    if isinstance(value, Mapping):
        return {k: _typed(v, _child(node, root, k), root) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v, _child(node, root, i), root) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    if isinstance(parsed, str):
        return value
    types = _types(node, root)
    if types is not None and "string" in types and not any(_TYPE_CHECKER.is_type(parsed, t) for t in types):
        return value  # a string the schema allows (label=1): kept
    # what a config file would hold: valid, or refused with the config file's message
    return _typed(parsed, node, root)


def typed_overrides(overrides: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``snakemake --config`` values with the strings Snakemake left read as YAML where the schema wants
    a number, a boolean, null (or a list or mapping of them)."""
    return {k: _typed(v, _child(schema, schema, k), schema) for k, v in overrides.items()}


# --- where a value came from -------------------------------------------------------------------------------


def _path_text(path: Sequence[str | int]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "the config"


def _node_at(root: yaml.Node, path: Sequence[str | int]) -> yaml.Node | None:
    """The YAML node at ``path`` (its key's node for a mapping entry), or None."""
    node: yaml.Node | None = root
    for part in path:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return None
    return node


def _key_line(root: yaml.Node, path: Sequence[str | int]) -> int | None:
    """1-based line of the entry at ``path`` (the key of a mapping entry, the item of a list)."""
    if not path:
        return None
    parent = _node_at(root, path[:-1])
    if isinstance(parent, yaml.MappingNode):
        key = next((k for k, _ in parent.value if k.value == str(path[-1])), None)
        return key.start_mark.line + 1 if key is not None else None
    node = _node_at(root, path)
    return node.start_mark.line + 1 if node is not None else None


def _has(value: Any, path: Sequence[str | int]) -> bool:
    """``path`` is set in ``value``, or lies inside a list ``value`` sets (which replaces a whole list)."""
    for part in path:
        if isinstance(value, list):
            return True
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


class Sources:
    """The config files, in the order Snakemake merges them (the workflow's config file, then each
    ``--configfile``), and the ``--config`` overrides, which win over every file."""

    def __init__(self, files: Sequence[str | Path], overrides: Mapping[str, Any]) -> None:
        self.overrides = overrides
        self.files: list[tuple[str, yaml.Node | None]] = []
        for name in files:
            try:
                root = yaml.compose(Path(name).read_text())
            except (OSError, yaml.YAMLError):
                root = None
            self.files.append((str(name), root))

    def where(self, path: Sequence[str | int]) -> str | None:
        """``config/config.yaml, line 12`` or ``--config``: where the value at ``path`` (or at the longest
        part of it that a source sets) was given; None where no source sets any of it (a schema default)."""
        for depth in range(len(path), 0, -1):
            prefix = path[:depth]
            if _has(self.overrides, prefix):
                return COMMAND_LINE
            for name, root in reversed(self.files):
                line = _key_line(root, prefix) if root is not None else None
                if line is not None:
                    return f"{name}, line {line}"
        return None

    def label(self, path: Sequence[str | int], message: str) -> str:
        where = self.where(path)
        return f"{where}: {message}" if where else message


# --- what the schema allows, in words ----------------------------------------------------------------------


def _bounds(node: Mapping[str, Any]) -> str:
    parts = [
        f"{op} {node[key]}"
        for key, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"))
        if key in node
    ]
    return (" " + " and ".join(parts)) if parts else ""


def allowed(node: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    """What the schema at ``node`` accepts, in a few words."""
    words = []
    for branch in _branches(node, root):
        if "enum" in branch:
            words.append(f"one of {branch['enum']}")
            continue
        types = branch.get("type", [])
        for t in [types] if isinstance(types, str) else types:
            if t in ("integer", "number"):
                words.append(f"{'an integer' if t == 'integer' else 'a number'}{_bounds(branch)}")
            elif t == "string":
                words.append(f"a string matching {branch['pattern']}" if "pattern" in branch else "a string")
            elif t == "boolean":
                words.append("true or false")
            elif t == "null":
                words.append("null")
            elif t == "array":
                item = allowed(branch.get("items", {}), root)
                unique = ", without repeats" if branch.get("uniqueItems") else ""
                words.append(f"a list ({item}{unique})" if item != "anything" else f"a list{unique}")
            elif t == "object":
                keys = sorted(branch.get("properties", {}))
                words.append(f"a mapping with keys {', '.join(keys)}" if keys else "a mapping")
    return " or ".join(words) or "anything"


def _schema_at(schema: Mapping[str, Any], path: Sequence[str | int]) -> Mapping[str, Any]:
    node: Mapping[str, Any] = schema
    for part in path:
        node = _child(node, schema, part)
    return node


def describe(error: jsonschema.ValidationError, schema: Mapping[str, Any], sources: Sources) -> str:
    """One line: where, which key, what is wrong, what is allowed."""
    error = jsonschema.exceptions.best_match([error])
    path = list(error.absolute_path)
    node = _schema_at(schema, path)
    if error.validator == "additionalProperties":
        known = set(_resolve(node, schema).get("properties", {}))
        unknown = sorted(k for k in error.instance if k not in known)
        return sources.label(
            [*path, unknown[0]],
            f"unknown key(s) {', '.join(unknown)} in {_path_text(path)}; allowed keys: {', '.join(sorted(known))}",
        )
    message = f"{_path_text(path)}: {error.message}"
    if error.validator in ("enum", "const"):  # the message lists the allowed values itself
        return sources.label(path, message)
    return sources.label(path, f"{message}; allowed: {allowed(node, schema)}")


def check(config: Mapping[str, Any], schema: Mapping[str, Any], sources: Sources) -> None:
    """Every schema error of ``config``, one line each, in one :class:`~kernelscope.cases.ConfigError`."""
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path]
    )
    if errors:
        lines = [describe(e, schema, sources) for e in errors]
        raise ConfigError("\n".join(["The config does not match workflow/schemas/config.schema.yaml:", *lines]))


def check_yaml(path: str | Path) -> None:
    """A config file that is not valid YAML, named with its line and column (Snakemake names neither)."""
    try:
        with open(path, encoding="utf-8") as stream:
            yaml.safe_load(stream)
    except FileNotFoundError:
        return  # Snakemake's own message names the missing file
    except yaml.YAMLError as exc:
        mark, context = getattr(exc, "problem_mark", None), getattr(exc, "context", None)
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        start = getattr(exc, "context_mark", None)
        if context and start:
            problem = f"{problem} ({context} from line {start.line + 1}, column {start.column + 1})"
        raise ConfigError(f"{where}: not valid YAML: {problem}") from None


def settle(config: dict[str, Any], settings: Any, configfile: str, schema_path: str | Path) -> Sources:
    """The Snakefile's config step, after its ``configfile:``: the ``--config`` values typed by the schema and
    merged over ``config`` again, then every schema error reported with where it came from. ``settings`` is
    ``workflow.config_settings``. Returns the sources, to say where a planning error's key was set."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    from snakemake.utils import update_config  # the merge Snakemake itself made of the untyped values

    overrides = dict(settings.config or {})
    update_config(config, typed_overrides(overrides, schema))
    files = ([] if settings.replace_workflow_config else [configfile]) + [str(f) for f in settings.configfiles]
    sources = Sources(files, overrides)
    check(config, schema, sources)
    return sources
