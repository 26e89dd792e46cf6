"""ATIF-v1.7 (Harbor's Agent Trajectory Interchange Format, RFC 0001) as a strict pydantic model, written for
these tests from the RFC and the field list of Harbor's ``harbor.models.trajectories``: every object refuses
fields it does not define, as Harbor's do, and the rules Harbor checks across fields are checked here too
(step ids from 1 in order, agent-only fields on agent steps only, no metrics on a step with no LLM call,
content parts of the right shape, every observation's ``source_call_id`` naming a tool call of its step,
ISO 8601 timestamps). Stricter than Harbor where a cua-tui export never needs the slack: no type coercion,
no audio part (ATIF-v1.8).

The ``harbor`` package itself is not a dependency: it brings 118 other packages (litellm, boto3, supabase,
tokenizers, huggingface-hub, ...), far over what a test dependency may cost.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

VERSIONS = Literal[
    "ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4", "ATIF-v1.5", "ATIF-v1.6", "ATIF-v1.7"
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ImageSource(Strict):
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    path: str


class ContentPart(Strict):
    type: Literal["text", "image"]
    text: str | None = None
    source: ImageSource | None = None

    @model_validator(mode="after")
    def _shape(self) -> ContentPart:
        if self.type == "text" and (self.text is None or self.source is not None):
            raise ValueError("a text part has text and no source")
        if self.type == "image" and (self.source is None or self.text is not None):
            raise ValueError("an image part has a source and no text")
        return self


class ToolCall(Strict):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None


class SubagentTrajectoryRef(Strict):
    session_id: str | None = None
    trajectory_id: str | None = None
    trajectory_path: str | None = None
    extra: dict[str, Any] | None = None


class ObservationResult(Strict):
    source_call_id: str | None = None
    content: str | list[ContentPart] | None = None
    subagent_trajectory_ref: list[SubagentTrajectoryRef] | None = None
    extra: dict[str, Any] | None = None


class Observation(Strict):
    results: list[ObservationResult]


class Metrics(Strict):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(Strict):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class Agent(Strict):
    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None


AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class Step(Strict):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str | list[ContentPart]
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None

    @field_validator("timestamp")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        return value

    @model_validator(mode="after")
    def _fields_of_its_source(self) -> Step:
        if self.source != "agent":
            for name in AGENT_ONLY:
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} on a {self.source} step")
        unasked = self.source == "agent" and self.llm_call_count == 0
        if unasked and (self.metrics is not None or self.reasoning_content is not None):
            raise ValueError("metrics or reasoning on a step with no LLM call")
        calls = {c.tool_call_id for c in self.tool_calls or []}
        for result in self.observation.results if self.observation else []:
            if result.source_call_id is not None and result.source_call_id not in calls:
                raise ValueError(f"step {self.step_id}: {result.source_call_id!r} names no tool call of the step")
        return self


class Trajectory(Strict):
    schema_version: VERSIONS
    session_id: str | None = None
    trajectory_id: str | None = None
    agent: Agent
    steps: list[Step] = Field(min_length=1)
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    extra: dict[str, Any] | None = None
    subagent_trajectories: list[Trajectory] | None = None

    @model_validator(mode="after")
    def _numbered(self) -> Trajectory:
        for number, step in enumerate(self.steps, start=1):
            if step.step_id != number:
                raise ValueError(f"step {number} has step_id {step.step_id}")
        return self
