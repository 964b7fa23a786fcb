"""The base of the domain's pydantic models that are read from outside (the configuration, the
version policies): every field named, nothing unknown accepted, values immutable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
