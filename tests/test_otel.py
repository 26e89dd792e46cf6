"""OpenTelemetry spans (cua_tui/export/otel.py, ``--otel``, ``otel_endpoint``, ``export --otel``): real sim runs,
the real SDK and OTLP/HTTP exporter, and a loopback receiver that decodes every body with opentelemetry-proto
(tests/otlp_receiver.py). Spans, parents, links, attributes and times are checked against the audit log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_batch import batch
from click.testing import CliRunner
from export_runs import HOSTILE_FINAL, HOSTILE_KIND, HOSTILE_SAYS, HOSTILE_TASK, TURNS, TYPED, audit_records, sim_run
from hostile_runs import ALL, pristine_run
from model_server import OPENAI_PATH, ModelServer, computer_call, message, openai_response
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_receiver import Receiver, Silent, Span, closed_port_url

from bench.fleet import FORM
from cua_tui.agents.vendors import otel_systems
from cua_tui.build import RunOptions, build_run
from cua_tui.cli import main
from cua_tui.config import Settings
from cua_tui.core.runlog import RunLog
from cua_tui.core.safeio import RunFolder
from cua_tui.export.otel import EXPORT_TIMEOUT_S, FLUSH_S, Sink

OK, ERROR = 1, 2  # the protobuf's Status.StatusCode


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # requests (under the exporter) honours proxy variables; the receiver is reached on loopback, directly,
    # and no OTEL_* variable of the machine changes what is sent
    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    got = Receiver()
    yield got
    got.close()


def ns(ts: float) -> int:
    return round(ts * 1e6) * 1000


def live_run(runs: Path, sink: Sink | None, turns: list[dict[str, Any]] = TURNS) -> tuple[Any, Path]:
    """A real sim run of the scripted ``turns`` (every decision approved), its spans going to ``sink``."""
    run = build_run(
        RunOptions(
            task=HOSTILE_TASK,
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": HOSTILE_FINAL},
            runs_dir=runs,
            decisions="approve",
            fsync=False,
        )
    )
    if sink is not None:
        run.subscribe(sink.listener(run.run_id))
    return run.run(), run.path


def check_run(spans: list[Span], path: Path, agent: str = "script", model: str = "") -> Span:
    """One run's spans against its audit log: one trace, its tree, its links, its attributes and the recorded
    times of the records that open and close each span. Returns the root."""
    records = audit_records(path)
    run_id = records[0]["run"]
    assert len({s.trace_id for s in spans}) == 1
    by_id = {s.span_id: s for s in spans}
    (root,) = [s for s in spans if not s.parent_id]
    assert root.name == f"invoke_agent {agent}" and root.attrs["gen_ai.operation.name"] == "invoke_agent"
    assert root.attrs["gen_ai.conversation.id"] == root.attrs["cua_tui.run.id"] == run_id
    assert root.resource["service.name"] == "cua-tui"
    ended = records[-1]
    assert ended["kind"] == "run_ended" and root.attrs["cua_tui.run.status"] == ended["status"]
    assert root.status == (OK if ended["status"] in ("passed", "finished") else ERROR)
    assert (root.start, root.end) == (ns(records[0]["ts"]), ns(ended["ts"]))
    chats = {s.attrs["cua_tui.turn"]: s for s in spans if s.name == " ".join(("chat", model)).strip()}
    turns = [r for r in records if r["kind"] == "model_turn"]
    assert sorted(chats) == [r["turn"] for r in turns]
    for before, record in zip([records[0], *turns], turns, strict=False):
        chat = chats[record["turn"]]
        # the model is called at its phase's record, or (the phase unchanged, not recorded again) right
        # after the record before its turn
        phases = [r for r in records[before["seq"] + 1 : record["seq"]] if r["kind"] == "phase"]
        waiting = phases and phases[-1]["phase"] == "waiting_model"
        waited = phases[-1]["ts"] if waiting else records[record["seq"] - 1]["ts"]
        assert chat.parent_id == root.span_id and (chat.start, chat.end) == (ns(waited), ns(record["ts"]))
        assert chat.attrs["gen_ai.operation.name"] == "chat" and chat.attrs["gen_ai.conversation.id"] == run_id
        assert chat.attrs["gen_ai.usage.input_tokens"] == record["input_tokens"]
    tools = {(s.attrs["cua_tui.turn"], s.attrs["cua_tui.action.index"]): s for s in spans if s.name.startswith("exe")}
    outcomes = {(r["turn"], r["index"]): r for r in records if r["kind"] == "outcome"}
    assert sorted(tools) == sorted(outcomes)
    proposals = {(r["turn"], r["index"]): r for r in records if r["kind"] == "proposal"}
    for where, tool in tools.items():
        assert tool.name == "execute_tool computer" and tool.parent_id == root.span_id
        assert tool.attrs["gen_ai.tool.name"] == "computer"
        assert tool.attrs["gen_ai.tool.call.id"] == proposals[where]["call_id"]
        assert tool.links == [(root.trace_id, chats[where[0]].span_id)]  # the chat that proposed it
        assert tool.end == ns(outcomes[where]["ts"]) and tool.attrs["cua_tui.outcome"] == outcomes[where]["status"]
    decisions = [r for r in records if r["kind"] == "decision"]
    spans_of = [s for s in spans if s.name == "cua_tui.decision"]
    assert len(spans_of) == len(decisions) and len(spans) == 1 + len(chats) + len(tools) + len(decisions)
    for record, span in zip(decisions, sorted(spans_of, key=lambda s: s.end), strict=True):
        parent = by_id[span.parent_id]
        assert parent is tools[(record["turn"], record["index"])] and span.end == ns(record["ts"])
        assert span.attrs["cua_tui.decided_by"] == record["by"]
        assert span.attrs["cua_tui.decision.answer"] == record["decision"]
    return root


def no_content(bodies: list[bytes], path: Path) -> None:
    """Nothing the model said, nothing typed (not even its hash), no task text, in any byte sent."""
    typed_sha = next(r["action"]["text_sha256"] for r in audit_records(path) if r.get("raw_kind") == "type")
    for body in bodies:
        for text in (TYPED, HOSTILE_SAYS, HOSTILE_FINAL, HOSTILE_TASK, HOSTILE_KIND, typed_sha, "filling"):
            assert text.encode() not in body, text


def test_a_live_run_sends_its_spans_as_they_happen(tmp_path: Path, receiver: Receiver) -> None:
    said: list[str] = []
    sink = Sink(receiver.url, say=said.append)
    result, path = live_run(tmp_path / "runs", sink)
    closing = sink.close()
    spans = receiver.spans()
    root = check_run(spans, path)
    assert root.attrs["cua_tui.source"] == "live" and result.status == "passed"
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    no_content(receiver.bodies, path)
    assert said == [] and closing == [f"otel: {len(spans)} span(s) sent to {receiver.url}"]
    typed = next(s for s in spans if s.name == "cua_tui.decision" and s.attrs["cua_tui.rule"] == "actions.type")
    assert typed.attrs["cua_tui.verdict"] == "confirm" and typed.attrs["cua_tui.decision.how"] == "rule"
    assert typed.attrs["cua_tui.decided_by"] == "headless rule: approve" and typed.attrs["cua_tui.decision.wait_s"] >= 0
    assert typed.attrs["cua_tui.decision.reason"].startswith("typing counts as transmission")
    # the model's unknown action kind is quoted by the policy's reason: that reason is left out
    unparsed = next(s for s in spans if s.name == "cua_tui.decision" and s.attrs["cua_tui.rule"].startswith("parse:"))
    assert "cua_tui.decision.reason" not in unparsed.attrs


def test_export_sends_a_finished_run_with_its_recorded_times(tmp_path: Path, receiver: Receiver) -> None:
    path = sim_run(tmp_path / "runs")
    result = CliRunner().invoke(main, ["export", str(path), "--otel", receiver.url + "/v1/traces"])
    assert result.exit_code == 0, result.output
    spans = receiver.spans()
    root = check_run(spans, path)
    assert root.attrs["cua_tui.source"] == "export" and root.attrs["cua_tui.audit.verify"] == "intact"
    assert f"sent {len(spans)} span(s) to {receiver.url}/v1/traces (trace {root.trace_id})" in result.stderr
    no_content(receiver.bodies, path)


def test_export_of_a_tampered_run_sends_its_verdict_and_exits_1(tmp_path: Path, receiver: Receiver) -> None:
    path = sim_run(tmp_path / "runs")
    log = path / "audit.jsonl"
    log.write_bytes(log.read_bytes().replace(b'"by":"headless rule: approve"', b'"by":"human (TUI)"', 1))
    result = CliRunner().invoke(main, ["export", str(path), "--otel", receiver.url])
    assert result.exit_code == 1 and "TAMPERED" in result.stderr, result.output
    (root,) = [s for s in receiver.spans() if not s.parent_id]
    assert root.attrs["cua_tui.audit.verify"] == "tampered" and "TAMPERED" in root.attrs["cua_tui.audit.summary"]


def test_export_of_an_interrupted_run_ends_its_open_spans(tmp_path: Path, receiver: Receiver) -> None:
    path = sim_run(tmp_path / "runs")
    lines = (path / "audit.jsonl").read_bytes().splitlines(keepends=True)
    cut = next(n for n, line in enumerate(lines) if b'"kind":"executing"' in line)
    (path / "audit.jsonl").write_bytes(b"".join(lines[: cut + 1]))
    (path / "result.json").unlink()
    result = CliRunner().invoke(main, ["export", str(path), "--otel", receiver.url])
    assert result.exit_code == 0, result.output  # an unsealed prefix is intact
    spans = receiver.spans()
    (root,) = [s for s in spans if not s.parent_id]
    assert root.attrs["cua_tui.run.status"] == "unfinished" and root.status == ERROR
    with RunLog(RunFolder.open(path)) as log:
        last = log.poll()[-1].ts
    (open_action,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert open_action.attrs["cua_tui.outcome"] == "unknown" and open_action.end == root.end == ns(last)


def test_export_answers_every_case_of_the_shared_corpus(tmp_path: Path, receiver: Receiver) -> None:
    (tmp_path / "pristine").mkdir()
    pristine = pristine_run(tmp_path / "pristine")
    runs = [case.build(pristine, tmp_path / str(n) / "runs", tmp_path / str(n) / "out") for n, case in enumerate(ALL)]
    answers = batch(tmp_path / "batch", [["export", run, "--otel", receiver.url] for run in runs], ceiling=True)
    sent = tampered = 0
    for case, answer in zip(ALL, answers, strict=True):
        code, out, err = answer.checked(cpu=3.0)  # the first loads the OpenTelemetry SDK
        assert out == "", (case.name, out)
        if code == 2:  # nothing to export: one line, nothing sent
            assert len(err.strip().splitlines()) == 1, (case.name, err)
            continue
        assert code == (0 if case.exit == 0 else 1) and "span(s) to" in err, (case.name, code, err)
        sent += 1
        tampered += code == 1
    roots = [s for s in receiver.wait_for(lambda spans: True) if not s.parent_id]
    assert len(roots) == sent and sum(r.attrs["cua_tui.audit.verify"] == "tampered" for r in roots) == tampered
    assert not any(b"root:x:0:0" in body for body in receiver.bodies)  # nothing from outside the run


def test_run_command_with_otel_flag(tmp_path: Path, receiver: Receiver) -> None:
    script = tmp_path / "form.json"
    script.write_text(json.dumps(FORM))
    env = {**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "none.toml")}
    args = ["run", "--backend", "sim", "--agent", f"script:{script}", "--runs-dir", str(tmp_path / "runs")]
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", *args, "--headless", "--on-confirm", "approve", "--otel", receiver.url],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = (tmp_path / "runs").iterdir()
    spans = receiver.spans()
    check_run(spans, path)
    otel_lines = [line for line in proc.stderr.splitlines() if line.startswith("otel:")]
    assert otel_lines == [f"otel: {len(spans)} span(s) sent to {receiver.url}"]
    assert "cua-tui verified" not in "".join(b.decode(errors="replace") for b in receiver.bodies)


def test_fleet_runs_are_separate_traces_from_the_settings_endpoint(tmp_path: Path, receiver: Receiver) -> None:
    (tmp_path / "form.json").write_text(json.dumps(FORM))
    names = ["a", "b", "c"]
    body = "".join(f'[[tasks]]\nname = "{n}"\ntask = "fill the form"\nagent = "script:form.json"\n\n' for n in names)
    (tmp_path / "suite.toml").write_text('version = 1\nname = "suite"\n\n' + body)
    config = tmp_path / "config.toml"
    config.write_text(f'otel_endpoint = "{receiver.url}"\n')
    runs = tmp_path / "runs"
    args = ["fleet", "--tasks", str(tmp_path / "suite.toml"), "--backend", "sim", "--runs-dir", str(runs)]
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", *args, "--concurrency", "3", "--headless", "--on-confirm", "approve"],
        capture_output=True,
        text=True,
        env={**os.environ, "CUA_TUI_CONFIG": str(config)},
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    ((fleet_id, manifest),) = json.loads((runs / "fleet.json").read_text())["fleets"].items()
    run_of = {row["task"]: row["run_id"] for row in manifest["runs"]}
    spans = receiver.spans()
    roots = {s.attrs["cua_tui.fleet.task"]: s for s in spans if not s.parent_id}
    assert sorted(roots) == names and len({r.trace_id for r in roots.values()}) == 3
    for task, root in roots.items():
        assert root.attrs["cua_tui.fleet.id"] == fleet_id and root.attrs["cua_tui.run.id"] == run_of[task]
        check_run([s for s in spans if s.trace_id == root.trace_id], runs / run_of[task])
    assert [line for line in proc.stderr.splitlines() if line.startswith("otel:")] == [
        f"otel: {len(spans)} span(s) sent to {receiver.url}"
    ]


# Many actions refused at once: over 500 spans in under a second of run, so the SDK's thread tries to send
# while the run goes on (a listener that waited on the network would hold the run up for seconds).
BUSY = [
    {"actions": [{"type": "keypress", "keys": ["ctrl", "alt", "Delete"]}, *[{"type": "move", "x": 5, "y": 5}] * 99]}
] * 6


@pytest.mark.parametrize("where", ["refused", "silent"])
def test_an_unreachable_endpoint_never_slows_or_fails_a_run(tmp_path: Path, where: str) -> None:
    silent = Silent() if where == "silent" else None
    url = silent.url if silent is not None else closed_port_url()
    try:
        said: list[str] = []
        sink = Sink(url, say=said.append)
        # each way twice, interleaved, the faster of each compared: a load that comes and goes beside the test
        # (the suite's other parts) slows one run of a pair, not the way itself
        alone_s, run_s = [], []
        for n in range(2):
            began = time.monotonic()
            alone, _ = live_run(tmp_path / f"alone{n}", None, BUSY)
            alone_s.append(time.monotonic() - began)
            began = time.monotonic()
            result, path = live_run(tmp_path / f"runs{n}", sink, BUSY)
            run_s.append(time.monotonic() - began)
        began = time.monotonic()
        closing = sink.close()
        close_s = time.monotonic() - began
    finally:
        if silent is not None:
            silent.close()
    assert (result.status, result.exit_code) == (alone.status, alone.exit_code)
    # a bound on a hang, not a speed target: the speed gate holds "no slower" (bench/otel.py: a refused collector
    # against none; a silent one in the full run); here a loaded machine once took 1.8 s against 0.2 s
    assert min(run_s) < min(alone_s) + 10, (run_s, alone_s)
    assert close_s < FLUSH_S + 1.0
    lines = said + closing
    assert len(lines) == 1 and lines[0].startswith(f"otel: spans not sent to {url}"), lines
    assert len(audit_records(path)) > 600  # the run was as busy as intended


def test_the_end_does_not_wait_on_a_collector_known_to_be_down(tmp_path: Path) -> None:
    """Once a send has failed, the spans left at the end are dropped at once (as the notice said), not
    sent and waited on again; the next run of a long-lived process tries again after DOWN_S."""
    said: list[str] = []
    sink = Sink(closed_port_url(), say=said.append)
    live_run(tmp_path / "first", sink)
    sink._provider.force_flush(int(EXPORT_TIMEOUT_S * 1000) + 2000)  # the queued spans tried, and refused
    assert len(said) == 1 and sink._exporter.down
    live_run(tmp_path / "second", sink)  # more spans queued while the collector is down
    began = time.monotonic()
    closing = sink.close()
    assert time.monotonic() - began < 1.0
    assert closing == [] and len(said) == 1  # one notice in all


def test_a_refusing_collector_is_answered_at_once_not_retried(tmp_path: Path) -> None:
    """A refused connection is final: the SDK's retry with backoff (1 s, then 2 s) is for a dropped pooled
    connection, and would add seconds to every run whose collector is not running. The export comes back
    before the SDK's first backoff could have ended, and says why; the run ends with its own status."""
    from cua_tui.export import otel

    otel._quiet_sdk()  # the SDK's complaints go to the reasons the sink reads, as a Sink has them
    exporter = otel._exporter(closed_port_url())
    tracer = otel._provider().get_tracer("test")
    span = tracer.start_span("one")
    span.end()
    waits: list[float] = []
    client = exporter._client  # type: ignore[attr-defined]
    real_wait = client._shutdown_event.wait

    def wait(timeout: float | None = None) -> bool:
        waits.append(timeout or 0.0)
        return bool(real_wait(0))

    client._shutdown_event.wait = wait
    try:
        assert exporter.export([span]) is SpanExportResult.FAILURE  # type: ignore[list-item]
    finally:
        exporter.shutdown()
    assert waits == []  # no backoff was waited on
    assert otel._cause(otel._REASONS.take()) == "connection refused"
    # through the CLI: the run's own exit status, one line about the spans
    script = tmp_path / "form.json"
    script.write_text(json.dumps(FORM))
    url = closed_port_url()
    argv = [sys.executable, "-m", "cua_tui.cli", "run", "--backend", "sim", "--agent", f"script:{script}"]
    proc = subprocess.run(
        [*argv, "--headless", "--on-confirm", "approve", "--runs-dir", str(tmp_path / "runs"), "--otel", url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "none.toml")},
    )
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.startswith("otel:")] == [
        f"otel: spans not sent to {url}: connection refused (the run goes on; spans that cannot be sent are dropped)"
    ]


def test_bad_endpoints_are_usage_errors(tmp_path: Path) -> None:
    runner = CliRunner(env={"CUA_TUI_CONFIG": str(tmp_path / "none.toml")})
    base = ["run", "--backend", "sim", "--agent", "script:x.json", "--headless"]
    for url, says in (
        ("ftp://127.0.0.1/", "http:// or https://"),
        ("http://", "with a host"),
        ("http://alice:s3cret@127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS"),
        ("http://127.0.0.1:port", "http:// or https://"),
    ):
        result = runner.invoke(main, [*base, "--otel", url])
        assert result.exit_code == 2 and says in result.output and "s3cret" not in result.output, result.output
    config = tmp_path / "config.toml"
    config.write_text('otel_endpoint = "localhost:4318"\n')
    result = CliRunner(env={"CUA_TUI_CONFIG": str(config)}).invoke(main, [*base])
    assert result.exit_code == 2 and "otel_endpoint" in result.output and str(config) in result.output


def test_help_does_not_load_the_sdk() -> None:
    code = "import sys, cua_tui.cli, cua_tui.cli.session; print([m for m in sys.modules if 'opentelemetry' in m])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


def test_a_copied_run_keeps_its_own_times(tmp_path: Path, receiver: Receiver) -> None:
    """Sent twice (a copy of the run directory), a run makes two traces with the same recorded times."""
    path = sim_run(tmp_path / "runs")
    copy = tmp_path / "copy" / path.name
    shutil.copytree(path, copy)
    for run in (path, copy):
        assert CliRunner().invoke(main, ["export", str(run), "--otel", receiver.url]).exit_code == 0
    roots = [s for s in receiver.spans() if not s.parent_id]
    assert len({r.trace_id for r in roots}) == 2 and len({(r.start, r.end) for r in roots}) == 1


def test_auth_headers_come_from_the_environment_and_are_never_shown(tmp_path: Path, monkeypatch: Any) -> None:
    refusing = Receiver(status=401)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cret")
    try:
        path = sim_run(tmp_path / "runs")
        result = CliRunner().invoke(main, ["export", str(path), "--otel", refusing.url])
        said: list[str] = []
        sink = Sink(refusing.url, say=said.append)
        live_run(tmp_path / "live", sink)
        closing = sink.close()
    finally:
        refusing.close()
    assert result.exit_code == 2 and "spans not sent (HTTP 401)" in result.output, result.output
    assert {h["authorization"] for h in refusing.headers} == {"Bearer s3cret"}
    assert (
        said
        == [
            f"otel: spans not sent to {refusing.url}: HTTP 401 (the run goes on; spans that cannot be sent are dropped)"
        ]
        and closing == []
    )
    assert "s3cret" not in result.output + "".join(said)


FILL = ({"type": "click", "x": 250, "y": 182}, {"type": "type", "text": TYPED}, {"type": "click", "x": 550, "y": 182})


def test_a_model_agent_s_spans_carry_the_gen_ai_model_and_usage(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    said = "I will type the phrase into the field."
    with ModelServer() as server:
        server.script(
            OPENAI_PATH,
            openai_response(message(said), computer_call("call_1", *FILL)),
            openai_response(message("The phrase is submitted.")),
        )
        run = build_run(
            RunOptions(
                task="type the phrase into the field and click Verify",
                backend="sim",
                agent="openai",
                base_url=server.openai_base_url,
                runs_dir=tmp_path / "runs",
                decisions="approve",
                fsync=False,
                settings=Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "none.toml")}),
            )
        )
        sink = Sink(receiver.url, systems=otel_systems())
        run.subscribe(sink.listener(run.run_id))
        result = run.run()
        sink.close()
    model = run.supervisor.config.model
    assert result.status == "passed" and model
    spans = receiver.spans()
    root = check_run(spans, run.path, agent="openai", model=model)
    chats = [s for s in spans if s.name == f"chat {model}"]
    for span in (root, *chats):
        assert span.attrs["gen_ai.provider.name"] == "openai" and span.attrs["gen_ai.request.model"] == model
    assert [c.attrs["gen_ai.usage.input_tokens"] for c in chats] == [1000, 1000]
    assert root.attrs["gen_ai.usage.input_tokens"] == 2000 and root.attrs["gen_ai.usage.output_tokens"] == 100
    assert root.attrs["cua_tui.usage.cost_usd"] == pytest.approx(sum(c.attrs["cua_tui.usage.cost_usd"] for c in chats))
    for body in receiver.bodies:
        for text in (said, "The phrase is submitted.", TYPED, "type the phrase into the field", "sk-test"):
            assert text.encode() not in body, text
