"""The published processes: every version of every name, kept side by side (a run stays on the version it
started on), and the order names were first published in (`list_processes` lists in that order)."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Process


@dataclass(frozen=True)
class Published:
    process: Process
    version: int
    sha256: str  # of the source text: publishing the same text again is not a new version


class Registry:
    def __init__(self) -> None:
        self._versions: dict[tuple[str, int], Published] = {}
        # Each version's process by (name, version), written with `_versions` by `add` alone: what
        # `Engine.process_of` reads ~2 times a call, one subscript where `get` is two frames.
        self.processes: dict[tuple[str, int], Process] = {}
        self._latest: dict[str, int] = {}
        self._order: list[str] = []

    def add(self, process: Process, version: int, sha256: str) -> Published:
        published = Published(process, version, sha256)
        self._versions[(process.name, version)] = published
        self.processes[(process.name, version)] = process
        if process.name not in self._latest:
            self._order.append(process.name)
        self._latest[process.name] = max(version, self._latest.get(process.name, 0))
        return published

    def latest(self, name: str) -> Published | None:
        version = self._latest.get(name)
        return None if version is None else self._versions[(name, version)]

    def find(self, name: str, version: int | None = None) -> Published | None:
        """That version (the latest when None), or None if there is no such."""
        if version is None:
            return self.latest(name)
        return self._versions.get((name, version))

    def get(self, name: str, version: int | None = None) -> Process:
        """The process of that version (the latest when None); KeyError if there is no such."""
        found = self.find(name, version)
        if found is None:
            raise KeyError((name, version))
        return found.process

    def versions(self, name: str) -> list[int]:
        return sorted(v for (n, v) in self._versions if n == name)

    @property
    def names(self) -> list[str]:
        return list(self._order)
