"""Loading recipes: find the file, follow ``extends``, validate every key, apply overrides and profiles."""

from __future__ import annotations

import copy
import dataclasses
import math
import tomllib
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Union, get_args, get_origin

from agentrl_plugins.errors import RecipeError, did_you_mean
from agentrl_plugins.recipe_schema import REQUIRED_COMPONENTS, SECTIONS, TOP_LEVEL_KEYS, Choice, Recipe
from agentrl_plugins.types import TERMINATION_REASONS

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

_MISSING = object()


def read_toml(path: Path) -> dict[str, Any]:
    """A recipe file's table; a file that cannot be read or parsed is a :class:`RecipeError` saying why."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise RecipeError(f"{path}: not valid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise RecipeError(f"{path}: not a text file (TOML is UTF-8): {error.reason} at byte {error.start}") from None
    except RecursionError:
        raise RecipeError(f"{path}: nested too deeply to be a recipe") from None
    except OSError as error:
        raise RecipeError(f"{path}: cannot read it: {error.strerror or error}") from None


def resolve_raw(name_or_path: str, find: typing.Callable[[str], Path], _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The recipe's raw table with every ``extends`` parent merged beneath it.

    A recipe that names another environment than its parent does not inherit the parent's profiles: they
    were tuned for the parent's environment, whose options they may set.
    """
    path = Path(name_or_path) if name_or_path.endswith(".toml") else find(name_or_path)
    seen = _seen + (str(path.resolve()),)
    if seen[-1] in _seen:
        raise RecipeError(f"{path}: recipe extends itself through {' -> '.join(seen)}")
    raw = read_toml(path)
    parent = raw.get("extends")
    if parent is None:
        return raw
    if not isinstance(parent, str):
        raise RecipeError(f"{path}: 'extends' must be a recipe name, got {parent!r}")
    base = resolve_raw(parent, find, seen)
    if _environment_name(raw) not in (None, _environment_name(base)):
        base.pop("profiles", None)
    return _deep_merge(base, raw)


def _environment_name(raw: dict[str, Any]) -> Any:
    section = raw.get("environment")
    return section.get("name") if isinstance(section, dict) else None


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in top.items():
        if key == "choices" and isinstance(value, list) and isinstance(merged.get(key, []), list):
            merged[key] = merged.get(key, []) + value
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def build_recipe(raw: dict[str, Any], origin: str = "recipe") -> Recipe:
    """Validate a raw table against the schema: unknown keys and wrong types are errors."""
    known = set(SECTIONS) | set(TOP_LEVEL_KEYS)
    for key in raw:
        if key not in known:
            raise RecipeError(f"{origin}: unknown key {key!r}.{did_you_mean(key, known)}")
    for required in ("name", "description"):
        if not isinstance(raw.get(required), str):
            raise RecipeError(f"{origin}: {required!r} must be a string")
    sections = {}
    for section, cls in SECTIONS.items():
        table = raw.get(section, {})
        if not isinstance(table, dict):
            raise RecipeError(f"{origin}: [{section}] must be a table, got {table!r}")
        sections[section] = _build_section(cls, table, section, origin)
    recipe = Recipe(
        name=raw["name"],
        description=raw["description"],
        extends=_typed(raw.get("extends"), typing.Optional[str], "extends", origin),
        sources=_typed(raw.get("sources", {}), dict[str, str], "sources", origin),
        choices=[_build_choice(item, origin) for item in _typed(raw.get("choices", []), list, "choices", origin)],
        profiles=_typed(raw.get("profiles", {}), dict[str, dict], "profiles", origin),
        **sections,
    )
    _check_semantics(recipe, origin)
    for key in list(recipe.sources) + [choice.key for choice in recipe.choices]:
        get_value(recipe, key, origin)
    for profile, overrides in recipe.profiles.items():
        apply_overrides(recipe, overrides, f"{origin} profile {profile!r}")
    return recipe


def _build_section(cls: type, table: dict[str, Any], section: str, origin: str) -> Any:
    hints = typing.get_type_hints(cls)
    for key in table:
        if key not in hints:
            raise RecipeError(f"{origin}: unknown key '{section}.{key}'.{did_you_mean(key, hints)}")
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in table
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise RecipeError(f"{origin}: a {section} entry needs {', '.join(f'{section}.{name}' for name in missing)}")
    values = {key: _typed(value, hints[key], f"{section}.{key}", origin) for key, value in table.items()}
    return cls(**values)


def _build_choice(item: Any, origin: str) -> Choice:
    if not isinstance(item, dict):
        raise RecipeError(f"{origin}: each [[choices]] entry must be a table")
    return _build_section(Choice, item, "choices", origin)


def _typed(value: Any, annotation: Any, key: str, origin: str) -> Any:
    """``value`` if it fits ``annotation`` (ints widen to floats), else a RecipeError."""
    origin_type, args = get_origin(annotation), get_args(annotation)
    if annotation is Any:
        return value
    if origin_type is Union:
        if value is None and type(None) in args:
            return None
        inner = [arg for arg in args if arg is not type(None)]
        return _typed(value, inner[0], key, origin)
    if origin_type is Literal:
        if value not in args:
            raise RecipeError(f"{origin}: '{key}' must be one of {list(args)}, got {value!r}."
                              f"{did_you_mean(str(value), [str(a) for a in args])}")
        return value
    if origin_type is list:
        if not isinstance(value, list):
            raise RecipeError(f"{origin}: '{key}' must be a list, got {value!r}")
        return [_typed(item, args[0], f"{key}[{i}]", origin) for i, item in enumerate(value)] if args else value
    if origin_type is dict:
        if not isinstance(value, dict):
            raise RecipeError(f"{origin}: '{key}' must be a table, got {value!r}")
        return {k: _typed(v, args[1], f"{key}.{k}", origin) for k, v in value.items()} if args else value
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation in (int, float) and isinstance(value, bool) or not isinstance(value, annotation):
        raise RecipeError(f"{origin}: '{key}' must be {_KINDS.get(annotation, annotation.__name__)}, got "
                          f"{type(value).__name__} {value!r}")
    if annotation is int and not -(2 ** 63) <= value < 2 ** 63:
        raise RecipeError(f"{origin}: '{key}' must fit a 64-bit integer, got {value!r}")
    return value


_KINDS = {dict: "a table", list: "a list", str: "a string"}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _at_least_one(value: Any) -> bool:
    return value >= 1


RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "advantage.gamma": (lambda v: _finite(v) and 0 <= v <= 1, "in [0, 1]"),
    "advantage.step_weight": (lambda v: _finite(v) and v >= 0, "finite and >= 0"),
    "loss.norm_constant": (lambda v: v is None or v >= 1, "at least 1 (or unset)"),
    "loss.clip_low": (lambda v: _finite(v) and 0 <= v < 1, "in [0, 1)"),
    "loss.clip_high": (lambda v: _finite(v) and v >= 0, "finite and >= 0"),
    "loss.clip_c": (lambda v: v is None or (_finite(v) and v > 1), "finite and > 1 (or unset)"),
    "loss.kl_coef": (lambda v: _finite(v) and v >= 0, "finite and >= 0"),
    "loss.entropy_coef": (_finite, "finite"),
    "correction.cap": (lambda v: _finite(v) and v > 0, "finite and > 0"),
    "correction.low": (lambda v: _finite(v) and v > 0, "finite and > 0"),
    "correction.high": (_finite, "finite"),
    "distillation.coef": (lambda v: _finite(v) and v > 0, "finite and > 0"),
    "mismatch.min_pearson": (lambda v: _finite(v) and -1 <= v <= 1, "in [-1, 1]"),
    "rollout.tasks_per_step": (_at_least_one, "at least 1"),
    "rollout.temperature": (lambda v: _finite(v) and v >= 0, "finite and >= 0"),
    "rollout.top_p": (lambda v: _finite(v) and 0 < v <= 1, "in (0, 1]"),
    "rollout.top_k": (lambda v: v == -1 or v >= 1, "-1 (off) or at least 1"),
    "rollout.max_turns": (_at_least_one, "at least 1"),
    "rollout.max_new_tokens_per_turn": (_at_least_one, "at least 1"),
    "rollout.max_context_tokens": (_at_least_one, "at least 1"),
    "rollout.timeout_s": (lambda v: _finite(v) and v > 0, "finite and > 0"),
    "optim.lr": (lambda v: _finite(v) and v > 0, "finite and > 0"),
    "optim.weight_decay": (lambda v: _finite(v) and v >= 0, "finite and >= 0"),
    "optim.max_grad_norm": (lambda v: _finite(v) and v > 0, "finite and > 0"),
    "optim.updates_per_step": (_at_least_one, "at least 1"),
    "train.steps": (_at_least_one, "at least 1"),
    "train.seed": (lambda v: 0 <= v < 2 ** 32, "in [0, 2**32) (the seed range of NumPy and of every framework)"),
    "train.eval_every": (_at_least_one, "at least 1"),
    "train.eval_episodes_per_task": (_at_least_one, "at least 1"),
}
"""The allowed range of each numeric recipe key (checked when a recipe is built), and how to say it."""


def _check_ranges(recipe: Recipe, origin: str) -> None:
    for key, (allowed, wanted) in RANGES.items():
        value = get_value(recipe, key, origin)
        if not allowed(value):
            raise RecipeError(f"{origin}: {key} must be {wanted}, got {value!r}")
    if recipe.correction.low > recipe.correction.high:
        raise RecipeError(f"{origin}: correction.low must not exceed correction.high, got "
                          f"{recipe.correction.low!r} and {recipe.correction.high!r}")


def _check_semantics(recipe: Recipe, origin: str) -> None:
    _check_ranges(recipe, origin)
    for reason in recipe.filtering.reasons:
        if reason not in TERMINATION_REASONS:
            raise RecipeError(f"{origin}: 'filtering.reasons' has unknown reason {reason!r}."
                              f"{did_you_mean(reason, TERMINATION_REASONS)}")
    if recipe.loss.aggregation == "seq-mean-token-sum-norm" and recipe.loss.norm_constant is None:
        raise RecipeError(f"{origin}: loss.aggregation 'seq-mean-token-sum-norm' needs loss.norm_constant")
    if not recipe.distillation.task_reward and not recipe.distillation.enabled:
        raise RecipeError(f"{origin}: distillation.task_reward = false trains on the teacher's signal alone, and "
                          "distillation.teacher names no teacher (a registered model or a local model folder)")
    if recipe.rollout.group_size < 2:
        raise RecipeError(f"{origin}: rollout.group_size must be at least 2 for a group baseline")
    if recipe.train.lora and (recipe.train.lora_rank < 1 or recipe.train.lora_alpha < 1):
        raise RecipeError(f"{origin}: train.lora_rank and train.lora_alpha must be positive, got "
                          f"{recipe.train.lora_rank} and {recipe.train.lora_alpha}")
    if not 0.0 <= recipe.optim.min_lr_ratio <= 1.0:
        raise RecipeError(f"{origin}: optim.min_lr_ratio must lie in [0, 1], got {recipe.optim.min_lr_ratio}")
    betas = recipe.optim.betas
    if len(betas) != 2 or not all(0.0 <= beta < 1.0 for beta in betas):
        raise RecipeError(f"{origin}: optim.betas must be two numbers in [0, 1) (Adam's beta1, beta2), got {betas}")


def get_value(recipe: Recipe, key: str, origin: str = "recipe") -> Any:
    """The value at a dotted key such as ``loss.clip_high``."""
    section, _, field = key.partition(".")
    if section not in SECTIONS or not field:
        raise RecipeError(f"{origin}: {key!r} is not a 'section.key' name.{did_you_mean(section, SECTIONS)}")
    value = getattr(getattr(recipe, section), field, _MISSING)
    if value is _MISSING:
        names = [f"{section}.{f.name}" for f in dataclasses.fields(SECTIONS[section])]
        raise RecipeError(f"{origin}: unknown key {key!r}.{did_you_mean(key, names)}")
    return value


def apply_overrides(recipe: Recipe, overrides: dict[str, Any], origin: str = "override") -> Recipe:
    """A new recipe with dotted-key overrides applied and validated."""
    raw = recipe_to_dict(recipe)
    for key, value in overrides.items():
        get_value(recipe, key, origin)
        section, _, field = key.partition(".")
        raw[section][field] = value
    raw.pop("profiles")
    rebuilt = build_recipe(raw, origin)
    rebuilt.profiles = recipe.profiles
    return rebuilt


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """``["loss.clip_high=0.3", "verifier.names=['public_tests']"]`` as a dict of TOML-typed values."""
    parsed = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise RecipeError(f"override {item!r} is not KEY=VALUE (for example -o loss.clip_high=0.3)")
        if "\n" in text or "\r" in text:
            raise RecipeError(f"override {key.strip()!r}: the value must be one TOML value on one line, got {text!r}")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        parsed[key.strip()] = value
    return parsed


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """Plain data, ready for TOML or JSON."""
    data = dataclasses.asdict(recipe)
    return {key: value for key, value in data.items() if value is not None}


def default_profile(name_or_path: str, model: str | None) -> str | None:
    """The profile ``agentrl run`` applies when none is named: ``laptop`` for TinyAgent (no ``--model``)."""
    return "laptop" if model is None and "laptop" in load_recipe(name_or_path).profiles else None


def load_named_recipe(name_or_path: str, override_items: Iterable[str] | None, profile: str | None,
                      model: str | None) -> Recipe:
    """The recipe a command line names: ``-o KEY=VALUE`` items, and the named profile or the default one."""
    return load_recipe(name_or_path, parse_overrides(override_items or []),
                       profile or default_profile(name_or_path, model))


def load_recipe(
    name_or_path: str,
    overrides: dict[str, Any] | None = None,
    profile: str | None = None,
    plugin_manager: PluginManager | None = None,
) -> Recipe:
    """A registered recipe (or a ``.toml`` path) with a profile and then overrides applied."""
    if plugin_manager is None:
        from agentrl_plugins.plugins import get_plugin_manager

        plugin_manager = get_plugin_manager()
    registry = plugin_manager.registry("recipe")
    raw = resolve_raw(name_or_path, lambda name: registry.get(name).path)
    recipe = build_recipe(raw, origin=raw.get("name", name_or_path))
    if profile is not None:
        if profile not in recipe.profiles:
            raise RecipeError(f"recipe {recipe.name!r} has no profile {profile!r}."
                              f"{did_you_mean(profile, recipe.profiles)} Profiles: {sorted(recipe.profiles)}")
        recipe = apply_overrides(recipe, recipe.profiles[profile], f"profile {profile!r}")
    recipe = apply_overrides(recipe, overrides or {}, "override")
    check_complete(recipe)
    return recipe


def check_complete(recipe: Recipe) -> None:
    """A recipe that can run names every component the schema leaves open (:data:`REQUIRED_COMPONENTS`)."""
    for key, what in REQUIRED_COMPONENTS.items():
        if not get_value(recipe, key):
            raise RecipeError(f"recipe {recipe.name!r}: {key} must name {what}; set it in the recipe, "
                              f"or extend a recipe that does (extends = \"grpo\")")
