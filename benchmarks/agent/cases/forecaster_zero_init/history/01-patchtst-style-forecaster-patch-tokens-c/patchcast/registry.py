"""Name -> factory registries for models and datasets, filled by decorators at import time."""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T", bound=Callable[..., Any])


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise KeyError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise KeyError(f"unknown {self.kind} {name!r} (known: {known})") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items


MODELS: Registry[Callable[..., Any]] = Registry("model")
DATASETS: Registry[Callable[..., Any]] = Registry("dataset")
