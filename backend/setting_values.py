"""The settings whose text needs reading: comma lists, `name=path` lists,
identity-provider URLs. Each reader names the bad entry it refuses."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from urllib.parse import urlsplit

from backend.errors import ConfigError

DATA_SOURCE_NAME = re.compile(r"[a-z0-9_-]{1,40}")


def comma_list(text: str) -> tuple[str, ...]:
    """`a, b,,c` → ("a", "b", "c"): entries stripped, empty ones dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def secure_url(url: str) -> bool:
    """https://, or http:// to a loopback address (a provider on this machine)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return True
    if parts.scheme != "http" or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def check_networks(setting: str, entries: tuple[str, ...]) -> None:
    """Each entry is an IP address or network, else a `ValueError` naming it."""
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(
                f"{setting}: {entry!r} is not an IP address "
                "or network (e.g. 127.0.0.1 or 10.0.0.0/8)"
            ) from None


def check_origins(setting: str, entries: tuple[str, ...]) -> None:
    """Each entry is `*` or a browser origin (`scheme://host[:port]`, no
    path), else a `ValueError` naming it."""
    for entry in entries:
        if entry != "*" and not _is_origin(entry):
            raise ValueError(
                f"{setting}: {entry!r} is not an origin: http(s)://host[:port] "
                "with no path, query or trailing slash "
                "(e.g. https://app.example.com), or *"
            )


def _is_origin(text: str) -> bool:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises for a bad port)
    except ValueError:
        return False
    bare = not (parts.path or parts.query or parts.fragment or parts.username)
    return parts.scheme in ("http", "https") and bool(parts.hostname) and bare


def parse_data_sources(text: str) -> dict[str, Path]:
    """`name=path,name=path` → {name: path}; a `ConfigError` names a bad entry."""
    folders: dict[str, Path] = {}
    for entry in comma_list(text):
        name, equals, path = (part.strip() for part in entry.partition("="))
        where = f"LOOPWIRE_DATA_SOURCES entry {entry!r}"
        if not equals or not path:
            raise ConfigError(f"{where} must be name=path")
        if not DATA_SOURCE_NAME.fullmatch(name):
            raise ConfigError(
                f"{where}: the name {name!r} must be 1-40 of a-z, 0-9, _ and -"
            )
        if name in folders:
            raise ConfigError(f"{where}: the name {name!r} is used twice")
        folders[name] = Path(path).expanduser()
    return folders
