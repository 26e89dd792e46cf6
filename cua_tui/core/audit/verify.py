"""The independent verifier: a run directory's chain, seal, signatures and screenshots -> a VerifyReport.

Every read goes through safeio: the run directory is untrusted (links, FIFOs, huge files are refused,
audit.jsonl is streamed with a per-line cap and checked as strict UTF-8).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..safeio import SCREEN_CAP, RunFileError, RunFolder, kind_of
from ..text import visible
from .chain import GENESIS
from .errors import UnusableInput
from .findings import Finding, FindingKind, VerifyExit, unusable
from .keys import AuditKey, seal_message
from .walk import Walk, action_name, appended, walk_chain


@dataclass
class VerifyReport:
    """The outcome of ``verify_run``. ``code``: a :class:`VerifyExit`, from the first finding (none: intact).

    ``findings``: what is wrong, the deciding one first (``summary`` is rendered from it); ``problems``: the
    text of those that are evidence of tampering. For an unsealed (interrupted) run, ``unknown_outcomes``
    lists the (turn, index) of actions whose intent to execute is on record but whose outcome is not, and
    ``not_executed`` those proposed but never handed to the desktop. ``checkpoint``: the event count
    covered by the last signed checkpoint whose signature was checked. ``run_signed``: what run_started
    records (None when the log predates that). ``proposals`` and ``decisions`` count, over the lines
    walked (all of them unless a finding stopped the walk), the proposed actions and the decisions made
    by someone other than the policy (a person, a headless rule, an approver command)."""

    findings: list[Finding] = field(default_factory=list)
    events: int = 0
    head: str = GENESIS
    sealed: bool = False
    signed: bool = False
    signature_checked: bool = False
    notes: list[str] = field(default_factory=list)
    run_signed: bool | None = None
    checkpoint: int | None = None
    unknown_outcomes: list[tuple[int, int]] = field(default_factory=list)
    not_executed: list[tuple[int, int]] = field(default_factory=list)
    proposals: int = 0
    decisions: int = 0
    # the status the log's run_ended record gives: the run's end as its record has it
    ended: str | None = None

    @property
    def finding(self) -> Finding | None:
        """The finding that decides the verdict; None when the run is intact."""
        return self.findings[0] if self.findings else None

    @property
    def code(self) -> VerifyExit:
        """INTACT, TAMPERED (or, with a key, not vouched for by a signed seal) or UNUSABLE."""
        return self.findings[0].kind.exit if self.findings else VerifyExit.INTACT

    @property
    def intact(self) -> bool:
        """Whether ``code`` is INTACT (an unsealed prefix that chains correctly is intact too)."""
        return not self.findings

    @property
    def problems(self) -> list[str]:
        """The text of every finding that is evidence of tampering."""
        return [str(f) for f in self.findings if f.kind.tampered]

    @property
    def summary(self) -> str:
        """The one line ``cua-tui verify`` prints first."""
        if self.findings:
            return self.findings[0].summary
        if not self.sealed:
            return (
                f"intact prefix, UNSEALED: {self.events} events verified; the run has no result.json "
                f"(interrupted), so truncation cannot be ruled out"
            )
        signed = (
            "signature verified"
            if self.signature_checked
            else "signed (signature not checked)"
            if self.signed
            else "unsigned"
        )
        return f"intact: {self.events} events, sealed, {signed}, head {self.head[:16]}…"


def verify_run(
    run_dir: str | Path | RunFolder, key: AuditKey | None = None, *, check_screens: bool = True
) -> VerifyReport:
    """Check a run directory's chain, seal, signatures and screenshots. Never raises for bad input."""
    try:
        if isinstance(run_dir, RunFolder):
            return _verify(run_dir, key, check_screens)
        try:
            folder = RunFolder.open(run_dir)
        except RunFileError as exc:
            return VerifyReport([unusable(f"{run_dir}: not a run directory ({exc.detail})")])
        with folder:
            return _verify(folder, key, check_screens)
    except UnusableInput as exc:
        return VerifyReport([unusable(str(exc))])
    except RunFileError as exc:
        # a read the checks below did not expect to fail (an I/O error)
        return VerifyReport([unusable(f"{run_dir}: {exc}")])


def _verify(folder: RunFolder, key: AuditKey | None, check_screens: bool) -> VerifyReport:
    run_dir = folder.path
    if folder.kind("audit.jsonl") is None:
        raise UnusableInput(f"{run_dir}: no audit.jsonl (not a cua-tui run directory)")
    findings: list[Finding] = []
    notes: list[str] = []
    seal = _read_seal(folder, findings)
    try:
        reader = folder.lines("audit.jsonl")
    except RunFileError as exc:
        raise UnusableInput(f"{run_dir}: audit.jsonl: {exc.detail}") from None
    with reader:
        walk = walk_chain(reader, seal, key, findings, notes, run_dir)
    report = VerifyReport(findings, events=walk.count, head=walk.head, notes=notes, run_signed=walk.run_signed)
    report.checkpoint = walk.checkpoint
    report.proposals, report.decisions, report.ended = walk.proposals, walk.decisions, walk.ended
    if not findings and seal is not None:
        report.sealed = True
        _check_sealed_run(seal, walk, key, report)
    if not findings:
        _check_entries(folder, findings)
    if not findings and check_screens:
        _check_screens(folder, walk, findings)
    if findings:
        if walk.checkpoint is not None:
            # checked before the walk stopped: that prefix is still vouched for
            notes.append(f"signed up to checkpoint at event {walk.checkpoint} of {walk.count}")
    elif seal is None:
        _conclude_unsealed(walk, key, report)
    return report


def _read_seal(folder: RunFolder, findings: list[Finding]) -> dict[str, Any] | None:
    """The seal from result.json; None (with a finding) when result.json is there but unusable."""
    if folder.kind("result.json") is None:
        return None
    try:
        result = folder.read_json("result.json")
    except RunFileError as exc:
        if exc.reason == "missing":  # removed between the two looks: an interrupted run
            return None
        if exc.reason == "invalid":
            findings.append(Finding(FindingKind.SEAL_MALFORMED, "result.json: not valid JSON (edited or damaged)"))
        elif exc.reason == "not_regular":
            findings.append(
                Finding(
                    FindingKind.NOT_REGULAR_FILE,
                    f"result.json: {exc.detail} (run directories hold only regular files)",
                )
            )
        else:
            raise UnusableInput(f"{folder.path}: {exc}") from None
        return None
    seal = result.get("seal") if isinstance(result, dict) else None
    if not isinstance(seal, dict) or type(seal.get("events")) is not int or not isinstance(seal.get("head"), str):
        findings.append(Finding(FindingKind.SEAL_MALFORMED, "result.json: the seal is missing or malformed"))
        return None
    return seal


def _check_sealed_run(seal: dict[str, Any], walk: Walk, key: AuditKey | None, report: VerifyReport) -> None:
    """A whole chain with a seal: the seal must fix its count and head, carry the signature it should, and
    every proposal must have its outcome. Stops at the first finding."""
    findings = report.findings
    count, sealed_at = walk.count, seal["events"]
    if count < sealed_at:
        findings.append(
            Finding(FindingKind.TRUNCATED, f"truncated: the seal records {sealed_at} events, the log has {count}")
        )
    elif count > sealed_at:
        findings.append(appended(sealed_at + 1, sealed_at))
    elif walk.head != seal["head"]:
        findings.append(
            Finding(FindingKind.EDITED, "edited, or the seal's head altered (the line's hash is not the head)", count)
        )
    if not findings:
        _check_seal_signature(seal, walk, key, report)
    if not findings:
        _check_actions_sealed(walk, findings)


def _check_seal_signature(seal: dict[str, Any], walk: Walk, key: AuditKey | None, report: VerifyReport) -> None:
    """With a key: the seal must be signed by it. Without: what the seal and run_started say must agree."""
    sig = seal.get("signature")
    report.signed = isinstance(sig, dict)
    findings = report.findings
    if key is not None:
        if not isinstance(sig, dict):
            findings.append(
                Finding(
                    FindingKind.SIGNATURE_MISSING, "the seal is not signed, but a key was given (signature removed?)"
                )
            )
        elif sig.get("algorithm") != key.algorithm or not isinstance(sig.get("value"), str):
            findings.append(
                Finding(
                    FindingKind.WRONG_KEY,
                    f"the seal's signature is {sig.get('algorithm')!r}, the key is {key.algorithm}",
                )
            )
        elif not key.checker()(seal_message(walk.run_id or "", seal["events"], seal["head"]), sig["value"]):
            findings.append(
                Finding(
                    FindingKind.SIGNATURE_MISMATCH,
                    "the seal's signature does not match: the chain was recomputed or the seal edited",
                )
            )
        else:
            report.signature_checked = True
        return
    if walk.run_signed and not report.signed:
        # Without the key this proves nothing either way (a forger can rewrite run_started too): say
        # it loudly, and leave the verdict to `verify --key`, which fails such a run.
        report.notes.append(
            "WARNING: the seal is not signed, but run_started says the run was signed (signature removed?); "
            "only `verify --key` can tell whether this log is authentic"
        )
    elif walk.run_signed is False and report.signed:
        findings.append(
            Finding(FindingKind.EDITED, "the seal is signed, but run_started says the run is unsigned (edited)")
        )
    elif walk.signer is not None and (sig.get("algorithm"), sig.get("key_id")) != walk.signer:  # type: ignore[union-attr]
        findings.append(Finding(FindingKind.EDITED, "the seal's signature names another key than run_started (edited)"))
    elif report.signed:
        report.notes.append("the seal is signed; pass --key to check the signature")


def _check_actions_sealed(walk: Walk, findings: list[Finding]) -> None:
    """In a sealed run every proposal has exactly one outcome: the run ended and closed them all."""
    if walk.executing:
        slot, number = min(walk.executing.items(), key=lambda item: item[1])
        what = "was handed to the desktop, but the sealed log has no outcome"
    elif walk.pending:
        slot, number = min(walk.pending.items(), key=lambda item: item[1])
        what = "was proposed, but the sealed log has no outcome"
    else:
        return
    findings.append(Finding(FindingKind.OUTCOME_MISSING, f"{action_name(slot)} {what}", number))


def _conclude_unsealed(walk: Walk, key: AuditKey | None, report: VerifyReport) -> None:
    """An intact chain without a seal (interrupted): list what it left open; with a key, nothing vouches."""
    _report_interrupted(walk, report)
    if key is not None:
        report.findings.append(Finding(FindingKind.UNVOUCHED, _unvouched(walk, key, walk.count)))
    elif walk.run_signed:
        report.notes.insert(0, "signed run without a seal: truncation cannot be ruled out; check with --key")


def _report_interrupted(walk: Walk, report: VerifyReport) -> None:
    """Actions an interrupted run left open: executing recorded -> outcome unknown; else not executed.
    A log written before intent records existed (no ``signed`` in run_started) cannot tell them apart."""
    intents_recorded = walk.run_signed is not None
    for slot in sorted(walk.pending):
        if slot in walk.executing or not intents_recorded:
            report.unknown_outcomes.append(slot)
            what = "outcome unknown (interrupted)"
        else:
            report.not_executed.append(slot)
            what = "not executed (interrupted)"
        if len(report.notes) < 20:
            report.notes.append(f"{action_name(slot)}: {what}")
    if len(walk.pending) > 20:
        report.notes.append(f"... and {len(walk.pending) - 20} more actions without an outcome")


def _unvouched(walk: Walk, key: AuditKey, count: int) -> str:
    """Why a run without a seal, checked against a key, is not vouched for: nothing signed its end."""
    if not walk.run_signed:
        return (
            f"the run has no seal and is not signed (run_started records no key), so the "
            f"{key.algorithm} key cannot vouch for it; {count} events chain correctly"
        )
    covered = (
        f"signed up to checkpoint at event {walk.checkpoint} of {count}"
        if walk.checkpoint is not None
        else f"no signed checkpoint yet, so none of its {count} events is vouched for"
    )
    return f"signed run without a seal (interrupted, or cut short and result.json deleted); {covered}"


_RUN_FILES = frozenset(("run.json", "result.json", "transcript.jsonl", "sandbox-id.txt"))


def _check_entries(folder: RunFolder, findings: list[Finding]) -> None:
    """cua-tui writes only regular files and screens/ into a run directory: a link, FIFO, device or socket
    (where a replay or an export could be led outside the run) is an edit."""
    for name, mode in folder.scan():
        if stat.S_ISREG(mode) or name == "audit.jsonl" or (stat.S_ISDIR(mode) and name not in _RUN_FILES):
            continue
        findings.append(
            Finding(
                FindingKind.NOT_REGULAR_FILE,
                f"{visible(name, limit=80)}: {kind_of(mode)} (run directories hold only regular files)",
            )
        )
        return


def _check_screens(folder: RunFolder, walk: Walk, findings: list[Finding]) -> None:
    """Every screenshot a screen event references is in screens/, a regular file with that hash, and a PNG
    of the size recorded (its header read, never decoded: a bomb whose hash was written into a recomputed
    chain is refused here, before a replay or an export would decode it)."""
    screens = walk.screens
    if not screens:
        return
    try:
        store = folder.subdir("screens")
    except RunFileError as exc:
        sha, number = next(iter(screens.items()))
        if exc.reason == "missing":
            findings.append(_screen_missing(sha, number))
        elif exc.reason == "not_regular":
            findings.append(
                Finding(FindingKind.NOT_REGULAR_FILE, f"screens/: {exc.detail} (run directories hold no links)")
            )
        else:
            raise UnusableInput(f"{folder.path}: {exc}") from None
        return
    with store:
        for sha, number in screens.items():
            try:
                actual, head = store.digest(f"{sha}.png", SCREEN_CAP)
            except RunFileError as exc:
                if exc.reason == "missing":
                    findings.append(_screen_missing(sha, number))
                elif exc.reason == "not_regular":
                    findings.append(
                        Finding(
                            FindingKind.NOT_REGULAR_FILE, f"screenshot {sha[:12]}… is {exc.detail} (edited)", number
                        )
                    )
                else:
                    raise UnusableInput(f"{folder.path}: line {number}: screenshot {exc}") from None
                return
            if actual != sha:
                findings.append(
                    Finding(
                        FindingKind.SCREENSHOT_ALTERED, f"screenshot {sha[:12]}… was altered (its hash differs)", number
                    )
                )
                return
            problem = _not_the_screenshot(head, walk.sizes.get(sha))
            if problem:
                findings.append(Finding(FindingKind.SCREENSHOT_INVALID, f"screenshot {sha[:12]}… {problem}", number))
                return


def _not_the_screenshot(head: bytes, recorded: tuple[Any, Any] | None) -> str | None:
    """Why a screenshot's header is not that of the PNG its record describes; None when it is."""
    # imaging loads Pillow: only once a screenshot is read
    from ..imaging import ImageRefused, png_size

    try:
        size = png_size(head)
    except ImageRefused as exc:
        return f"is refused: {exc}"
    if recorded is not None and tuple(recorded) != size:
        return f"is {size[0]} x {size[1]} pixels, not {visible(str(recorded[0]), limit=12)} x " + (
            f"{visible(str(recorded[1]), limit=12)} as recorded"
        )
    return None


def _screen_missing(sha: str, number: int) -> Finding:
    return Finding(FindingKind.SCREENSHOT_MISSING, f"screenshot {sha[:12]}… is missing from screens/", number)
