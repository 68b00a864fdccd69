"""The recipe's rule in ``main_ppo``'s driver, before Ray starts: verl's ``validate_config``, which ``main_ppo``
calls on Hydra's composed config before ``run_ppo`` starts Ray, first applies
:func:`~agentrl_verl.own_config.check_in_driver` (Hydra's override list is known only in the driver). A conflict
stops the driver with its own ``ConfigConflictError``, not after Ray and verl's TaskRunner have started.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable


def checked(validate_config: Callable[..., Any]) -> Callable[..., Any]:
    """verl's ``validate_config``, after the check of a config that names a recipe."""

    @functools.wraps(validate_config)
    def checked_validate_config(config: Any, *args: Any, **kwargs: Any) -> Any:
        from agentrl_verl.own_config import check_in_driver

        check_in_driver(config)
        return validate_config(config, *args, **kwargs)

    checked_validate_config.agentrl_checked = True  # type: ignore[attr-defined]
    return checked_validate_config


def install(module: ModuleType) -> None:
    """Wrap ``verl.utils.config.validate_config`` (``module``) once; ``main_ppo`` imports it after ``import verl``,
    so it gets the wrapped one."""
    if not getattr(module.validate_config, "agentrl_checked", False):
        module.validate_config = checked(module.validate_config)
