"""``cua-tui export``: a run directory as an HTML report, an animated film strip, a replayable script or an
ATIF trajectory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from .base import fail, path_option, queued_run, run_directory
from .flags import flag, otel_endpoint, queue_flag

EXIT_WRITTEN, EXIT_TAMPERED = 0, 1


@click.command("export")
@click.argument("run")
@path_option(
    "--html",
    "html_out",
    file=True,
    help="One self-contained HTML file: verdict and chain head, the timeline, frames with their targets "
    "marked, verdicts, decisions and who made them, outcomes, refused egress. No script; opens offline.",
)
@path_option(
    "--gif",
    "gif_out",
    file=True,
    help="An animated film strip of the run, markers drawn (at most 100 frames, 800 px wide, 16 MiB).",
)
@path_option("--webp", "webp_out", file=True, help="The same film strip as an animated WebP.")
@path_option(
    "--script",
    "script_out",
    file=True,
    help="A script file for `run --agent script:FILE` that replays the run's actions; typed texts are "
    "placeholders (their length and SHA-256) that `run --texts FILE` fills.",
)
@path_option(
    "--atif",
    "atif_out",
    file=True,
    help="An ATIF trajectory (Harbor's Agent Trajectory Interchange Format, ATIF-v1.7): one agent step per "
    "model turn, its actions as tool calls, the screenshots in NAME.images/ beside it (each once, named by "
    "its SHA-256), cua-tui's verdicts, decisions and chain hashes under `extra`. See docs/atif.md.",
)
@click.option(
    "--otel",
    metavar="URL",
    callback=lambda ctx, param, value: otel_endpoint(value),
    help="Send the run's OpenTelemetry spans, with their recorded times, to this OTLP/HTTP endpoint (e.g. "
    "http://localhost:4318), the verify verdict on the run's span. No message or typed text is in a span.",
)
@click.option(
    "--include-private",
    is_flag=True,
    help="Put in the screens seen only inside a takeover's private stretch, each marked private (left out "
    "by default, with a line saying how many).",
)
@path_option("--key", help="The audit key the run was signed with, to check the seal's signature (as `verify --key`).")
@flag("runs_dir")
@queue_flag("A team's queue (postgresql://...): RUN is a run id there, read from the database alone.")
def command(
    run: str,
    html_out: Path | None,
    gif_out: Path | None,
    webp_out: Path | None,
    script_out: Path | None,
    atif_out: Path | None,
    otel: str | None,
    include_private: bool,
    key: Path | None,
    runs_dir: Path | None,
    queue: str | None,
) -> None:
    """Export the run RUN (a run directory, a run id or a unique beginning of one).

    Give one or more of --html, --gif, --webp, --script, --atif. The run is verified first and read only through
    the bounded reader (no link followed, sizes capped, screenshots checked from their header before any
    decoding); each file is written whole or not at all. Caps: the audit log at most 64 MiB; the HTML
    embeds each distinct screenshot once, at most 48 MiB of them, and draws at most 2,000 steps; the film
    strip has at most 100 frames (steps sampled evenly), 800 px wide, 16 MiB; the trajectory has the HTML's
    caps (2,000 actions, 48 MiB of screenshots) and says in its notes what they cut.

    --otel URL sends the run's OpenTelemetry spans instead (or as well), timed as recorded; a collector that
    does not take them is exit 2. A TAMPERED run's spans are sent with that verdict on the run's span.

    Screens seen only inside a takeover's private stretch are left out of the HTML, the film strip and the
    trajectory (each says how many), unless --include-private puts them in, marked. The first screen after
    hand-back, which the model gets by design, is not private and may still show what was typed.

    Exit status: 0 written; 1 the run is TAMPERED (still written, with the verdict at the top of the
    HTML and in the trajectory's notes and extra, so a reviewer sees what the altered log claims; said on
    stderr too); 2 bad usage or an unusable run directory (nothing written).
    """
    outputs = {"html": html_out, "gif": gif_out, "webp": webp_out, "script": script_out, "atif": atif_out}
    if not any(outputs.values()) and otel is None:
        fail("nothing to export", hint="give --html, --gif, --webp, --script, --atif or --otel")
    if queue is not None:
        with queued_run(queue, run) as path:
            _export(path, outputs, otel, include_private, key)
    # The run directory before the outputs: a folder that is none gets that error, wherever they go.
    _export(run_directory(run, runs_dir), outputs, otel, include_private, key)


def _export(
    path: Path, outputs: dict[str, Path | None], otel: str | None, include_private: bool, key: Path | None
) -> NoReturn:
    # Imported here, not at the top: the exporters pull in the core and Pillow, and --help should
    # start fast.
    from ..core.text import visible

    _check_outputs(path, [p for p in outputs.values() if p is not None])
    if (atif_out := outputs["atif"]) is not None:
        _check_atif(atif_out)
    with _open(path, key) as opened:
        opened.include_private = include_private
        for fmt, out in outputs.items():
            if out is not None:
                _write(opened, fmt, out)
        if opened.private and any(outputs[fmt] for fmt in ("html", "gif", "webp", "atif")):
            click.echo(f"note: {visible(opened.private_line())}", err=True)
        if otel is not None:
            _send_otel(opened, otel)
        _warn_refused(opened)
        if opened.tampered:
            summary = visible(opened.report.summary)
            summary = summary if summary.startswith("TAMPERED") else f"TAMPERED: {summary}"
            click.echo(f"{summary}; exported anyway, with this verdict at the top", err=True)
            sys.exit(EXIT_TAMPERED)
    sys.exit(EXIT_WRITTEN)


def _open(path: Path, key: Path | None) -> Any:
    """The run read for export (verified with ``key`` when given), or exit 2 saying why it cannot be."""
    from ..core.audit import AuditKey, AuditKeyError
    from ..export import RunUnusable, open_run

    try:
        audit_key = AuditKey.load(key) if key else None
    except AuditKeyError as exc:
        fail(str(exc))
    try:
        return open_run(path, audit_key)
    except RunUnusable as exc:
        fail(str(exc))


def _warn_refused(run: Any) -> None:
    """The screenshots not shown, each marked as refused in place of its picture: said once, with the first
    reason."""
    from ..core.text import visible

    refused = run.refused()
    if refused:
        first = refused[0]
        click.echo(
            f"warning: {len(refused)} screenshot(s) not shown, each marked as refused "
            f"(screen {visible(first.sha256[:12])}: {visible(first.refused, limit=200)})",
            err=True,
        )


def _check_outputs(run_path: Path, outs: list[Path]) -> None:
    """Each output goes to an existing folder outside the run directory (an export never adds to a run)."""
    run_real = run_path.resolve()
    for out in outs:
        parent = out.resolve().parent
        if parent == run_real or parent.is_relative_to(run_real):
            fail("inside the run directory (an export never adds to a run)", path=out, hint="write it elsewhere")
        if not parent.is_dir():
            fail(f"no folder {parent}", path=out)


def _send_otel(run: Any, endpoint: str) -> None:
    """The run's spans to an OTLP/HTTP endpoint, with the times on record; a refusal is one line (exit 2)."""
    # Imported here: the OpenTelemetry SDK costs start-up time that only --otel should pay.
    from ..agents.vendors import otel_systems
    from ..export import otel

    try:
        sent = otel.send_run(run, endpoint, otel_systems())
    except otel.SendFailed as exc:
        fail(str(exc))
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        # as for the files: a record of a shape nobody foresaw gets one line, not a traceback
        fail(f"a record of an unexpected shape stopped the export ({type(exc).__name__})")
    where = otel.public_endpoint(endpoint)
    click.echo(f"sent {sent.spans} span(s) to {where} (trace {sent.trace_id})", err=True)


def _check_atif(out: Path) -> None:
    """The trajectory's images folder may be written (absent, or an earlier export's): said before anything is."""
    from ..export.atif import AtifError, check_folder

    try:
        check_folder(out)
    except AtifError as exc:
        fail(str(exc))


def _write_atif(run: Any, out: Path) -> str:
    from ..core.text import visible
    from ..export import atif

    exported = atif.build(run, atif.images_folder(out).name)
    atif.write(out, exported)
    for line in exported.cut:
        click.echo(f"warning: {visible(line)}", err=True)
    return f"{atif.SCHEMA_VERSION}, {len(exported.data['steps'])} step(s), {len(exported.images)} screenshot(s)"


def _write(run: Any, fmt: str, out: Path) -> None:
    from ..core.text import visible
    from ..export import animation, html, script, write_atomic
    from ..export.atif import AtifError

    try:
        if fmt == "html":
            data = html.render(run).encode("utf-8")
            what = f"{len(run.timeline.steps)} step(s)"
        elif fmt == "script":
            exported = script.build(run)
            data = script.encode(exported.data)
            what = f"{len(exported.data['turns'])} turn(s)"
            for line in exported.lossy[:10]:
                click.echo(f"warning: {visible(line)}", err=True)
            if len(exported.lossy) > 10:
                click.echo(f"warning: ... and {len(exported.lossy) - 10} more", err=True)
            if exported.typed:
                click.echo(
                    f"note: {exported.typed} typed text(s) are placeholders; re-run with --texts FILE "
                    '(a JSON object {"<sha256>": "text"})',
                    err=True,
                )
        elif fmt == "atif":
            # its images folder, then the JSON (each written whole)
            data, what = b"", _write_atif(run, out)
        else:
            data = animation.render(run, fmt)
            what = f"{fmt.upper()}, {len(data):,} bytes"
        if fmt != "atif":
            write_atomic(out, data)
    except animation.AnimationError as exc:
        fail(str(exc), path=out)
    except AtifError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write it ({exc.strerror or exc})", path=out)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        # Last line of defence: the exporters read every field defensively (a test throws records of
        # every shape at them), but a record shaped in a way nobody foresaw still gets one line, not
        # a traceback.
        fail(f"a record of an unexpected shape stopped the export ({type(exc).__name__})", path=out)
    click.echo(f"wrote {out} ({what})", err=True)
