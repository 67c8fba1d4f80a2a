"""`storage.url`: which backend it names, and how it is shown: `redact_url`
masks a password wherever a URL is logged or printed."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["is_postgres_url", "redact_url", "sqlite_path_of"]


def is_postgres_url(url: str) -> bool:
    return "://" in url and urlsplit(url).scheme.lower() in ("postgresql", "postgres")


def sqlite_path_of(url: str) -> str:
    """The file of a `sqlite:///…` URL (`sqlite:////abs` or `sqlite:///rel`), or `url` itself."""
    if not url.lower().startswith("sqlite:"):
        return url
    rest = url[len("sqlite:") :]
    if rest.startswith("///"):
        return rest[3:] if rest[3:].startswith("/") else rest[3:] or ":memory:"
    if rest.startswith("//"):
        raise ValueError(f"storage.url {url!r}: a SQLite URL is sqlite:///path (three slashes)")
    return rest


def redact_url(url: str) -> str:
    """`url` with its password (and any `password=` query value) as `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable storage URL>"
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{host}"
    query = "&".join(
        f"{k}=***" if k.lower() == "password" else f"{k}={v}" if sep else k
        for k, sep, v in (item.partition("=") for item in parts.query.split("&") if item)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
