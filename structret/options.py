"""Plugin options: what each plugin can be told, declared by the plugin next to its code.

A plugin declares its options as a subclass of :class:`Options` (a pydantic model) and names
it when it registers (``register(name, target, options="pkg.options:MEP")``)::

    class MEP(Options):
        extractor: str = "auto"
        \"\"\"Which entities are masked: a registered extractor, or auto (...).\"\"\"

Each field is one option: its type is checked (and a string from the command line converted),
its default is the plugin's, and the docstring under it is what ``structret plugins --options``
prints. Unknown keys are refused with the list of the plugin's options. Core never names a
plugin's option: recipes carry one table per plugin (``[mep]``), validated here.

A factory that has a parameter named ``options`` is handed the validated model instance itself
(``options.extractor``); one without gets one keyword argument per option. A factory taking
``options`` that Python code also calls with keywords (``HFEncoder(path, pooling="mean")``) reads
them through :func:`resolve_options`, so the same model checks them.

A plugin that declares nothing still works: its options are read off its factory's signature
(types and defaults, no documentation), and the factory itself is imported to do so.
"""

from __future__ import annotations

import difflib
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, TypeAdapter, ValidationError, create_model

from structret.errors import OptionError

M = TypeVar("M", bound=BaseModel)

# Arguments core passes to a factory itself; they are not options a user sets per plugin.
CORE_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "dataset": ("path", "split"),
    "backbone": ("model", "texts"),
    "index": ("dim", "metric"),
    "suite": ("root", "systems", "batch_size", "limit", "vector_cache", "split"),  # one built from folders of data
}


class Options(BaseModel):
    """Base of every plugin's options: unknown keys refused, fields documented by the
    docstring written under each one, values immutable once validated."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


@dataclass(frozen=True)
class OptionInfo:
    name: str
    type: str
    default: Any
    required: bool
    doc: str


def _type_text(annotation: Any) -> str:
    """``list[str] | None``, ``'cls' | 'mean'``: the type as a user reads it."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_text(a) for a in args)}]"
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def describe(model: type[BaseModel]) -> list[OptionInfo]:
    """Each option of ``model``: name, type, default, whether it must be given, its doc. Options
    of a shared set it inherits (``listed_last``, e.g. :class:`LMWarmupOptions`) come after its own."""
    shared = {name for base in model.__mro__[1:] if base.__dict__.get("listed_last")
              for name in base.__dict__.get("__annotations__", {})}
    infos = []
    for name, info in sorted(model.model_fields.items(), key=lambda item: item[0] in shared):
        required = info.is_required()
        default = None if required else info.get_default(call_default_factory=True)
        infos.append(OptionInfo(name, _type_text(info.annotation), default, required,
                                " ".join((info.description or "").split())))
    return infos


def listing(model: type[BaseModel]) -> str:
    """``name (type, default X), ...`` for error messages; the docs are for ``plugins --options``."""
    parts = [f"{o.name} ({o.type}, {'required' if o.required else f'default {o.default!r}'})"
             for o in describe(model)]
    return ", ".join(parts) or "(none)"


def from_signature(factory: Any, kind: str, name: str) -> type[BaseModel] | None:
    """An options model read off ``factory``'s keyword parameters, for a plugin that declares
    none; ``None`` if the signature takes ``**options`` (the plugin then checks its own)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
        return None
    try:
        hints = typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory)
    except Exception:  # an annotation that does not resolve: the option is typed Any
        hints = {}
    skip = set(CORE_ARGUMENTS.get(kind, ())) | {"self"}
    fields: dict[str, Any] = {}
    for p in signature.parameters.values():
        if p.name in skip or p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        annotation = hints.get(p.name, Any)
        fields[p.name] = (annotation, ... if p.default is p.empty else p.default)
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)
    return create_model(f"{name}-options", __config__=config, **fields)


def convert(model: type[BaseModel], key: str, value: Any, *, what: str) -> Any:
    """One option's ``value`` as ``model``'s field ``key`` types it (text from a command line becomes
    the number or flag the field is), checked alone: the factory's other arguments may come
    positionally. ``what`` names the plugin in errors."""
    field = model.model_fields[key]
    try:
        return TypeAdapter(field.annotation if field.annotation is not None else Any).validate_python(value)
    except ValidationError as exc:
        raise OptionError(f"{what}: {key}={value!r}: {exc.errors()[0]['msg']}. Its options: {listing(model)}.") from None


def validate(model: type[M], values: dict[str, Any], *, what: str) -> M:
    """``values`` checked and converted by ``model``: its instance, every option present (defaults
    filled). ``what`` names the plugin in errors ("objective 'mep'")."""
    unknown = [key for key in values if key not in model.model_fields]
    if unknown:
        known = list(model.model_fields)
        # m for M: the case alone is wrong
        close = ([k for k in known if k.lower() == unknown[0].lower()]
                 or difflib.get_close_matches(unknown[0], known, n=1))
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise OptionError(f"{what} has no option '{unknown[0]}'.{hint} Its options: {listing(model)}. "
                          f"(structret plugins --options NAME prints them with their documentation.)")
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(p) for p in error["loc"]) or "options"
            given = values.get(str(error["loc"][0])) if error["loc"] else None
            problems.append(f"{key}={given!r}: {error['msg']}" if error["loc"] else error["msg"])
        raise OptionError(f"{what}: {'; '.join(problems)}. Its options: {listing(model)}.") from None


def resolve_options(model: type[M], options: M | None, given: dict[str, Any], *, what: str) -> M:
    """The options a factory that takes ``options`` works from: ``options`` as the registry (or a
    caller) made them, with ``given`` (keywords from Python code: ``HFEncoder(path, pooling="mean")``)
    checked by the same model and laid over them; neither: ``model``'s defaults. ``what`` names the
    plugin in errors ("backbone 'hf-encoder'")."""
    if options is None:
        return validate(model, given, what=what)
    if not isinstance(options, model):
        raise OptionError(f"{what}: options must be a {model.__module__}.{model.__qualname__}, not "
                          f"{type(options).__name__}; give single options as keywords instead.")
    if not given:
        return options
    earlier = {name: getattr(options, name) for name in options.model_fields_set}
    return validate(type(options), {**earlier, **given}, what=what)


def plain(value: Any) -> Any:
    """An option value as TOML/JSON can hold it (tuples and sets become lists)."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):  # "brand,color" from --set or an old flat recipe
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


# A list option that the command line may give as "a,b,c".
Names = typing.Annotated[list[str], BeforeValidator(_split_commas)]


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):  # pydantic would take true as 1
        raise ValueError("a whole number is expected, not true/false")
    return value


# A whole number >= 1 (a count, a size): 2e6 from the command line is taken, 2.5 and true are not.
Count = typing.Annotated[int, BeforeValidator(_not_a_bool), Field(ge=1)]


def _auto_or_steps(value: Any) -> Any:
    if value == "auto":
        return value
    if isinstance(value, str) and value.strip().isdigit():  # from the command line
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"'auto' or a whole number of steps >= 0 (0 = off) is expected, got {value!r}")
    return value


class LMWarmupOptions(Options):
    """LM-head warm-up, an option of every corruption objective whose loss comes from a
    backbone's LM head (``mep``, ``span-mask``, ``mlm``, ``aspect-mlm``); the trainer runs it
    (``structret.training.warmup``).

    A head that starts random (the checkpoint has none: MiniLM, any sentence encoder) gives
    a loss of ~ln(vocabulary) whose gradients first flow into the encoder and swamp the
    other objectives. Warm-up steps train the LM head alone, before the run's own steps: the
    encoder (and a tied output matrix, which is the input embedding) is frozen and gets no
    gradient, only the corruption loss counts, at a constant ``lm_warmup_lr``. They do not
    consume the run's schedule (``max_steps``/``epochs``, the lr warm-up and decay start
    after them) and are logged with ``"phase": "lm-warmup"`` in metrics.jsonl.
    """

    listed_last: typing.ClassVar[bool] = True  # after the objective's own options in listings

    lm_warmup: typing.Annotated[typing.Literal["auto"] | int, PlainValidator(_auto_or_steps)] = "auto"
    """Steps of LM-head warm-up: auto = lm_warmup_auto_steps when the backbone's LM head starts
    random (its checkpoint has no head weights), none when it was loaded; a number forces
    that many steps (0 = off)."""
    lm_warmup_auto_steps: Count = 200
    """How many warm-up steps lm_warmup = auto gives a fresh head."""
    lm_warmup_lr: float = Field(1e-3, gt=0)
    """Learning rate of the warm-up steps (constant; a fresh head needs more than the run's lr)."""
