"""The compactor's option attributes: reading one gives the option, assigning one
re-validates the options as the constructor does; and the options a
constructor's keywords (or its ``options=``) give."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast, overload

from bareagent_compact.options import OPTION_NAMES, Options, RuleValue

if TYPE_CHECKING:
    from bareagent_compact.engine.facade import Engine

__all__ = ["Option", "given_options", "same_options"]

ReadT = TypeVar("ReadT")
WriteT = TypeVar("WriteT")


class Option(Generic[ReadT, WriteT]):
    """A compactor attribute backed by its :class:`Options`: reading gives the
    option (or, ``derived``, its resolved value); assigning re-validates and
    re-derives everything, as the constructor does."""

    __slots__ = ("derived", "name")

    def __init__(self, *, derived: bool = False) -> None:
        self.derived = derived
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Option[ReadT, WriteT]: ...

    @overload
    def __get__(self, obj: Engine[Any], owner: type) -> ReadT: ...

    def __get__(self, obj: Engine[Any] | None, owner: type) -> Any:
        if obj is None:
            return self
        options = obj.options
        return getattr(options.derived if self.derived else options, self.name)

    def __set__(self, obj: Engine[Any], value: WriteT) -> None:
        if self.derived:
            current = getattr(obj.options.derived, self.name)
            if isinstance(value, RuleValue):
                if value == current:
                    return  # the value it reads: it keeps following its rule
                value = cast(WriteT, int(value))
            elif _default(self.name, getattr(obj.options, self.name)) and value is current:
                return  # the text, flag or counter it reads: still the default
        obj._configure(**{self.name: value})


def given_options(options: object, given: dict[str, Any]) -> Options:
    """``options``, or the options the keywords give; both at once only when every
    keyword is left at its default."""
    if options is None:
        return Options(**given)
    if not isinstance(options, Options):
        raise TypeError(f"options must be an Options, got {type(options).__name__}")
    clash = sorted(name for name, value in given.items() if not _default(name, value))
    if clash:
        raise TypeError(
            f"give options= or the keywords, not both: {', '.join(clash)} given with options="
        )
    return options


_DEFAULTS: Final = {f.name: f.default for f in fields(Options) if f.init}


def _default(name: str, value: object) -> bool:
    default = _DEFAULTS[name]
    return value is default or (type(value) is type(default) and value == default)


def same_options(new: Options, old: Options) -> bool:
    """Whether two options hold the very same values (a default and an equal
    value given explicitly are not the same: the default follows its rule)."""
    return all(getattr(new, name) is getattr(old, name) for name in OPTION_NAMES)
