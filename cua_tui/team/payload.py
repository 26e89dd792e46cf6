"""What a team's task carries: everything its run needs, so that a worker on any machine makes exactly the
run the submitter's machine would (the script agent's turns, the policy's text and SHA-256, the lab or
page, the backend, the limits). Never a key: each worker's own environment gives the model's and the
sandbox's. A spec read back from the database is someone else's row: bounded, decoded strictly and checked
again by the one builder before anything is made."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec

from ..build import RunOptions
from ..core.strictjson import MAX_DEPTH, depth_exceeds
from ..core.text import visible

SPEC_VERSION = 1
# a spec's JSON, whole: a long script is the largest part
MAX_SPEC_BYTES = 8 * 1024 * 1024
MAX_POLICY_BYTES = 256 * 1024
MAX_TEXT = 8000
MAX_FIELD = 4096


class SpecError(ValueError):
    """A task spec that cannot make a run (one line, shown literally)."""


class Policy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    sha256: str


class Spec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One run of a team's fleet, as submitted."""

    version: int = SPEC_VERSION
    name: str
    task: str = ""
    backend: str
    screen: str = "1024x720"
    agent: str  # a registered vendor, or "script" (the turns are in ``script``)
    script: dict[str, Any] | None = None
    model: str | None = None
    lab: str | None = None
    url: str | None = None
    allow_domains: tuple[str, ...] = ()
    policy: Policy
    max_turns: int | None = None
    max_steps: int | None = None
    deadline: int | None = None
    decision_timeout: float | None = None

    def encode(self) -> bytes:
        """Canonical JSON (keys sorted): the database's jsonb keeps no key order, so the hash is of this."""
        return msgspec.json.encode(self, order="sorted")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.encode()).hexdigest()

    def options(self, **more: Any) -> RunOptions:
        """The run options a worker builds the run from (``more``: the worker's own, such as its runs
        folder, the run id, the approver)."""
        return RunOptions(
            task=self.task,
            backend=self.backend,
            screen=self.screen,
            agent=None if self.agent == "script" else self.agent,
            script=self.script,
            agent_label="script" if self.agent == "script" else None,
            model=self.model,
            lab=self.lab,
            url=self.url,
            allow_domains=self.allow_domains,
            policy_text=(self.policy.text, self.policy.sha256),
            max_turns=self.max_turns,
            max_steps=self.max_steps,
            deadline=self.deadline,
            decision_timeout=self.decision_timeout,
            **more,
        )


def spec_of(name: str, options: RunOptions, default_policy: Path | None) -> Spec:
    """The spec of one task of a tasks file, from its run options as the fleet would use them: the script
    and the policy read now, from this machine's files (bounded), so that the workers need neither."""
    from ..agents.script import ScriptError, read_script_data
    from ..core.policy import Policy as RunPolicy
    from ..core.policy import PolicyError

    agent = options.agent or ""
    script: dict[str, Any] | None = options.script
    if agent.startswith("script:"):
        try:
            script = read_script_data(Path(agent.removeprefix("script:")))
        except ScriptError as exc:
            raise SpecError(f"task {name}: {exc}") from None
        agent = "script"
    elif script is not None:
        agent = "script"
    if options.texts is not None:
        raise SpecError(f"task {name}: --texts is not sent to a queue (typed texts never enter the database)")
    path = options.policy_path or default_policy
    try:
        policy = RunPolicy.load(path) if path is not None else RunPolicy.default()
    except PolicyError as exc:
        raise SpecError(f"task {name}: {exc}") from None
    spec = Spec(
        name=name,
        task=options.task,
        backend=options.backend,
        screen=options.screen,
        agent=agent,
        script=script,
        model=options.model,
        lab=options.lab,
        url=options.url,
        allow_domains=options.allow_domains,
        policy=Policy(policy.text, policy.sha256),
        max_turns=options.max_turns,
        max_steps=options.max_steps,
        deadline=options.deadline,
        decision_timeout=options.decision_timeout,
    )
    check(spec)
    return spec


def decode(data: bytes | str) -> Spec:
    """A spec as the database holds it (JSON), bounded and checked; SpecError otherwise."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(f"a task spec of {len(raw):,} bytes: more than {MAX_SPEC_BYTES:,}; refused")
    try:
        loose = msgspec.json.decode(raw)
        if depth_exceeds(loose, MAX_DEPTH):
            raise SpecError(f"a task spec nested deeper than {MAX_DEPTH}; refused")
        spec = msgspec.convert(loose, Spec)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SpecError(f"a task spec that cannot be read: {visible(str(exc), limit=200)}") from None
    check(spec)
    return spec


def check(spec: Spec) -> None:
    """What the builder does not check itself: sizes, the version, the policy's hash."""
    if spec.version != SPEC_VERSION:
        raise SpecError(f"task spec version {spec.version}: this cua-tui reads version {SPEC_VERSION}")
    if len(spec.encode()) > MAX_SPEC_BYTES:
        raise SpecError(f"task {visible(spec.name, limit=64)}: its spec is larger than {MAX_SPEC_BYTES:,} bytes")
    if len(spec.task) > MAX_TEXT:
        raise SpecError(f"task {visible(spec.name, limit=64)}: a task text longer than {MAX_TEXT} characters")
    texts = (spec.name, spec.backend, spec.screen, spec.agent, spec.model or "", spec.lab or "", spec.url or "")
    if any(len(t) > MAX_FIELD for t in (*texts, *spec.allow_domains)):
        raise SpecError(f"task {visible(spec.name, limit=64)}: a field longer than {MAX_FIELD} characters")
    if len(spec.policy.text.encode()) > MAX_POLICY_BYTES:
        raise SpecError(f"task {visible(spec.name, limit=64)}: a policy larger than {MAX_POLICY_BYTES:,} bytes")
    if hashlib.sha256(spec.policy.text.encode()).hexdigest() != spec.policy.sha256:
        raise SpecError(f"task {visible(spec.name, limit=64)}: its policy text does not match its SHA-256")
    if spec.agent == "script" and spec.script is None:
        raise SpecError(f"task {visible(spec.name, limit=64)}: a script agent without its script")
