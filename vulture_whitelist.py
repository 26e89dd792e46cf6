"""Names vulture takes for dead code in cua_tui/ that are not (tests/test_dead_code.py; pyproject.toml's
[tool.vulture] has the frameworks' naming rules). Never imported: vulture reads the names used here. Each
entry says why; an entry whose name is gone from cua_tui/ fails the test."""

# ruff: noqa: B018
_: object = object()

# --- set for a library that reads them -------------------------------------------------------------------
_.maxlevel, _.maxlist, _.maxdict, _.maxstring, _.maxother, _.maxlong  # reprlib.Repr's limits (core/actions.py)
_.compress_type, _.external_attr  # zipfile.ZipInfo's, read by ZipFile.writestr (desktops/remote/zipapp.py)
_.itersize, _.isolation_level  # psycopg's server-side cursor batch and a session's isolation (team/verify.py)
_.tesseract_cmd  # pytesseract's module setting: the tesseract binary it runs (ocr.py)
_.on_end  # OpenTelemetry's SpanProcessor hook, called by the SDK (export/otel.py)
_.primary, _.secondary, _.accent, _.success, _.foreground, _.surface  # a theme file's fields (tui/themes.py)
_.param  # click's callback signature (ctx, param, value) (cli/export.py, cli/flags.py)
_.bindings_changed  # Textual's Footer subscribes it to the screen's bindings signal (tui/footer.py overrides it)
_.severity, _.markup, _.callback, _.delay, _.pause  # Textual's notify/set_timer parameters, as the Protocol
# that types tui/fleet_keys.py's mixin spells them (a stub's parameters are never used)

# --- named by a string, read by a record, or data a test checks against the standard library --------------
_.EXFIL_URL, _.NOTICE  # the injection lab's default variant, which tests/test_labs.py and the TUI tests check against
(
    _.OpenAIAgent,
    _.AnthropicAgent,
    _.CompatAgent,
)  # loaded by name from their vendor record ("module:Class", agents/vendors.py)
_.CompatTable  # the openai-compatible vendor's settings table, loaded by name from its record (agents/vendors.py)
_.controls  # a lab's named control boxes, read by the tests and the docs' pictures (labs/)
_.UNICODE_VERSION  # the Unicode version of the DEFAULT_IGNORABLE table (core/text.py), which a test pins

# --- read by the benchmarks (bench/, outside the package) and the tests --------------------------------------
_.wire_timing  # a cwsandbox step's wire parts, which bench/cwsandbox.py reports (desktops/cwsandbox.py)
_.workspace, _.processes  # what a local desktop started, which bench/ and the tests check (desktops/local.py)

# --- the reading side of what the package writes, kept beside it so that the two cannot drift; and the --------
# --- counters and state that the tests and the benchmarks observe (a test of behaviour, not of code) -------
_.hits, _.misses  # cli/verified.py: the verdict cache's counters (test_runs_cache: an unchanged run is not re-verified)
_.wait_for_request  # core/approvers.py: HandshakeApprover's wait for a request, for a front end driven by script
_.helper_request  # desktops/cwsandbox.py: parses the helper request that module writes (services count them)
_.verified_at  # tui/replay.py: when the background verification finished (bench/replay.py's clock)
_.row_count, _.get_row, _.get_row_at  # tui/row_table.py: DataTable's reading API, which the RowTable keeps
_.taken_over  # core/takeover.py Desk (Supervisor): a port member, whether the reviewer has the desktop now
_.final_status  # tui/run_screen.py: the status the run ended with (the App's tests read it)
