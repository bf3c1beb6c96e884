"""Finding what answers: one Query, one flat ranking over memories and turns, the route, profiles, similar notes,
wake-up.

This room shares its name with the library's `search` function, and importing the room binds
`palace_cli.search` to it, so `from palace_cli import search` can meet the room: called, the room is that
function (search.retrieve.search).
"""

import sys
from types import ModuleType


class _Room(ModuleType):
    """The search/ package, callable as the `search` function."""

    def __call__(self, *args, **kwargs):
        from palace_cli.search.retrieve import search

        return search(*args, **kwargs)


sys.modules[__name__].__class__ = _Room
