"""Time formats shared with the original plugin. Callers pass ``now``; nothing here reads the clock."""

from __future__ import annotations

from datetime import datetime, timezone


def iso(now: datetime) -> str:
    """JS ``toISOString`` style: UTC with milliseconds and a ``Z``."""
    utc = now.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_iso(text: object, *, require_zone: bool = False) -> datetime | None:
    """Parse an ISO time written by us or the original; ``None`` when it is not one. A time
    without a zone is read as UTC, or refused (``None``) with ``require_zone``."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None if require_zone else parsed.replace(tzinfo=timezone.utc)
    return parsed


def local_day(now: datetime) -> str:
    """The user's local calendar day, ``YYYY-MM-DD``: rewards and maintenance count per local day."""
    return now.astimezone().date().isoformat()


def local_midnight(now: datetime) -> datetime:
    """Start of the local day that contains ``now``."""
    local = now.astimezone()
    return local.replace(hour=0, minute=0, second=0, microsecond=0)
