"""The services a caller carries (DESIGN rules 3, 4): a bundle found by typed keys, built on first use.

A service is known to the layers below the kernel only by its key, which
names its port (ports.py: a Protocol) and what a helper says when it is not
attached. `Services` holds the kernel's, each given built, as a `Later`
(built on first use), or None (not attached); `require` raises the
contract's "no … attached" text. Your own services, which the kernel does
not know, are found by name and type (`extension`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

from agentkernel.errors import HelperError
from agentkernel.util.environment import Environment
from agentkernel.util.later import Later

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class ServiceKey(Generic[T_co]):
    """One service a helper may reach: its name, its port (the type it gives), what a helper says
    without it.

    A `live` service reaches the kernel itself (its dispatch path, its
    transcript, its LLM): attached only to a live kernel, never replaced
    from outside.
    """

    __slots__ = ("live", "missing", "name")

    def __init__(self, name: str, missing: str, *, live: bool = False) -> None:
        self.name = name
        self.missing = missing
        self.live = live

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


class MissingService(HelperError):
    """A helper's service is not attached; the text is the contract's (`ServiceKey.missing`)."""


def _later(value: object) -> Later[Any]:
    return value if isinstance(value, Later) else Later.ready(value)


class Services:
    """Everything a helper may use besides the caller's identity, by key.

    `attached` maps a key to its service: built, a `Later` (built when first
    asked for, so a tool run pays only for the services its script calls),
    or None (not attached). `environment` is what `env_var` may read (all of
    the process's environment unless given); `extensions` are your own
    services, by name.
    """

    __slots__ = ("_attached", "_extensions", "environment")

    def __init__(
        self,
        attached: Mapping[ServiceKey[Any], object] | None = None,
        *,
        environment: Environment | None = None,
        extensions: Mapping[str, object] | None = None,
    ) -> None:
        self._attached = {key: _later(value) for key, value in (attached or {}).items()}
        self.environment = environment if environment is not None else Environment()
        self._extensions = dict(extensions or {})

    def get(self, key: ServiceKey[T]) -> T | None:
        """The service of `key`, built if need be; None when it is not attached."""
        later = self._attached.get(key)
        return cast("T | None", later.get() if later is not None else None)

    def require(self, key: ServiceKey[T], helper: str) -> T:
        """The service of `key`; MissingService (`helper: no … attached`) when it is not attached."""
        service = self.get(key)
        if service is None:
            raise MissingService(f"{helper}: {key.missing}")
        return service

    def extension(self, name: str, kind: type[T]) -> T | None:
        """Your own service handed to the kernel by name (`Kernel(extensions=…)`), or None.

        The seam for helpers the kernel does not ship: they reach their
        service here, typed, and say "no … attached" themselves on None.
        A service of another type under that name is a programming error.
        """
        service = self._extensions.get(name)
        if service is not None and not isinstance(service, kind):
            raise TypeError(f"service {name!r} is a {type(service).__name__}, not a {kind.__name__}")
        return service

    def built(self) -> list[object]:
        """The local services built so far: what the kernel closes. One never asked for is not built
        to be closed; a live one is a part of the kernel, which closes it itself."""
        made = (later.built() for key, later in self._attached.items() if not key.live)
        return [service for service in made if service is not None]


__all__ = ["MissingService", "ServiceKey", "Services"]
