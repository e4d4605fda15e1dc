"""The errors a user can act on. Anything else that escapes is a bug and may surface as one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class UserError(Exception):
    """A mistake the user can fix: says where it is, what was expected, what was found."""

    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None
    hint: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line) if p is not None)
        text = f"{where}: " if where else ""
        if self.field:
            text += f"{self.field}: "
        text += self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "error": type(self).__name__,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "hint": self.hint,
        }


class TaskFileError(UserError):
    """A task file that is not valid: bad YAML, an unknown field, a wrong value, a missing env."""


class CatalogError(UserError):
    """A catalog folder or file that cannot be read."""


class NoOfferingError(UserError):
    """A valid request that no offering in the catalog (after pins and blocklist) can satisfy."""


class AuthError(UserError):
    """No credentials, or credentials that match nothing. Answered with 401, saying nothing more."""


class NotFoundError(UserError):
    """A job, schedule or resource that does not exist (or is not the caller's)."""


class ForbiddenError(UserError):
    """Authenticated, but this caller may not do that (a user's key on an admin route, a node's ungranted
    bucket). Answered with 403."""


class StoredTaskRefused(UserError):
    """A job's stored task holds a value refused at submit since it was stored: the job cannot run as it
    was submitted (it is failed with this reason; the value is never dropped)."""


class ConflictError(UserError):
    """A request that conflicts with the current state, e.g. cancelling a finished job."""
