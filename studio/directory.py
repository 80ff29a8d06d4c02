"""Who is who: people, agents, groups and the operators (docs/design.md §3)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

IdentityId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.@-]{1,100}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Person(_Strict):
    id: IdentityId
    email: str
    name: str | None = None
    groups: list[str] = Field(default_factory=list)
    token_sha256: str | None = None


class Agent(_Strict):
    id: IdentityId
    name: str | None = None
    token_sha256: str | None = None


class Group(_Strict):
    id: IdentityId
    name: str | None = None


class Identity(_Strict):
    id: str
    kind: Literal["agent", "person"]
    email: str | None = None
    groups: frozenset[str] = frozenset()
    operator: bool = False


def token_digest(token: str) -> str:
    """What directory.yaml keeps of a bearer token (`token_sha256`): its sha256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


class Directory(_Strict):
    people: list[Person] = Field(default_factory=list)
    agents: list[Agent] = Field(default_factory=list)
    groups: list[Group] = Field(default_factory=list)
    operators: str = "g_operators"
    # Derived once at load (model_post_init): private attributes may be set on a frozen model.
    _index: dict[str, Identity] = PrivateAttr(default_factory=dict)
    _tokens: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def load(cls, source: str | os.PathLike[str] | dict[str, Any] | Directory | None) -> Directory:
        if isinstance(source, Directory):
            return source
        if source is None or isinstance(source, dict):
            return cls.model_validate(source or {})
        return cls.model_validate(yaml.safe_load(Path(source).read_text(encoding="utf-8")) or {})

    def model_post_init(self, _context: Any) -> None:
        index: dict[str, Identity] = {}
        for agent in self.agents:
            index[agent.id] = Identity(id=agent.id, kind="agent")
        for person in self.people:
            groups = frozenset(person.groups)
            index[person.id] = Identity(id=person.id, kind="person", email=person.email, groups=groups,
                                        operator=self.operators in groups)
        self._index = index
        members: list[Person | Agent] = [*self.people, *self.agents]
        self._tokens = {p.token_sha256: p.id for p in members if p.token_sha256}

    def identity(self, identity_id: object) -> Identity | None:
        # The private dict directly: pydantic's lookup of `self._index` costs more than the rest of the call.
        return self.__pydantic_private__["_index"].get(identity_id) if isinstance(identity_id, str) else None  # type: ignore[index]

    def by_token(self, token: str) -> Identity | None:
        found = self._tokens.get(token_digest(token))
        return self.identity(found) if found else None

    @property
    def identities(self) -> list[Identity]:
        return list(self._index.values())
