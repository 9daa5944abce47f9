"""Request and response models of the env-server HTTP/JSON protocol (endpoints, status codes and
conventions are documented in ``envs_bridge/PROTOCOL.md``).

The server validates every request body against these models (unknown fields and wrong JSON types
are rejected, never coerced); responses are plain JSON with the shapes of the ``*Response`` models.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictFloat, StrictInt, StrictStr, model_validator

PROTOCOL_VERSION = 1
MAX_BATCH = 4096  # env ids in one request
MAX_ACTION_CHARS = 8192  # one action string (projected actions are short; this guards the server)
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024

EnvIds = Annotated[list[StrictInt], Field(min_length=1, max_length=MAX_BATCH)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CreateRequest(_Request):
    count: Annotated[StrictInt, Field(ge=1, le=MAX_BATCH)]
    options: dict[str, JsonValue] = Field(default_factory=dict)  # adapter keyword arguments


class ResetRequest(_Request):
    env_ids: EnvIds
    split: StrictStr
    task_ids: list[StrictInt]
    seeds: list[StrictInt]

    @model_validator(mode="after")
    def _same_lengths(self) -> ResetRequest:
        if not len(self.env_ids) == len(self.task_ids) == len(self.seeds):
            raise ValueError(
                f"env_ids, task_ids and seeds must have one entry per env: got {len(self.env_ids)}, "
                f"{len(self.task_ids)} and {len(self.seeds)}"
            )
        return self


class StepRequest(_Request):
    env_ids: EnvIds
    actions: list[Annotated[StrictStr, Field(max_length=MAX_ACTION_CHARS)]]

    @model_validator(mode="after")
    def _same_lengths(self) -> StepRequest:
        if len(self.env_ids) != len(self.actions):
            raise ValueError(
                f"env_ids and actions must have one entry per env: got {len(self.env_ids)} and {len(self.actions)}"
            )
        return self


class CloseRequest(_Request):
    env_ids: EnvIds


class ForkRequest(_Request):
    env_ids: EnvIds  # parents; an id may repeat (several forks of one state)


class StallRequest(_Request):
    seconds: Annotated[StrictFloat | StrictInt, Field(gt=0, le=3600)]


class StepResultModel(BaseModel):
    """``envs_bridge.base.StepResult.to_json()``."""

    observation: str
    admissible_actions: list[str]
    reward: float
    done: bool
    won: bool
    score: float
    task: str
    state_key: str
    info: dict[str, Any]


class HealthResponse(BaseModel):
    status: str  # "ok"
    env: str
    protocol: int
    pid: int
    num_envs: int  # live env instances
    max_envs: int  # the --num-envs cap


class CreateResponse(BaseModel):
    env_ids: list[int]
    num_tasks: dict[str, int]  # split -> task count, for the options of this request


class BatchResponse(BaseModel):
    results: list[StepResultModel]  # one per requested env id, same order


class ForkResponse(BaseModel):
    env_ids: list[int]  # the new envs, one per requested parent, same order
    results: list[StepResultModel]  # each fork's current result (equal to its parent's)


class CloseResponse(BaseModel):
    closed: list[int]


class ErrorResponse(BaseModel):
    error: str
