"""One record per model vendor and per sandbox backend (agents/vendors.py, desktops/__init__.py): a vendor or
a backend registered here, in the test process, is used by the settings, the builder, the images, the
prices, the tasks file, OTel and the fleet as its own, with no other file changed; a name not registered is
a one-line usage error listing the registered ones. The recipes: docs/contributing/vendor.md, backend.md."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from cua_tui.agents.images import image_limits
from cua_tui.agents.vendors import VENDORS, AgentRequest, ImageLimits, UnknownVendor, Vendor, otel_systems, specs
from cua_tui.build import RunOptions, build_run
from cua_tui.config import ConfigError, Settings
from cua_tui.core.actions import ActionError, Kind
from cua_tui.core.errors import Unavailable, UsageError
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.policy import Policy
from cua_tui.core.ports import Call, CallResult, Frame, Turn
from cua_tui.core.tasks import TasksError, parse_tasks
from cua_tui.core.text import either
from cua_tui.core.wire import parse_wire, raw_kind
from cua_tui.desktops import BACKENDS, Backend, Leftovers, lab_hosts
from cua_tui.desktops.sim import SimDesktop
from cua_tui.desktops.target import Target
from cua_tui.factory import UnavailableError, make_agent, make_desktop, versions
from cua_tui.fleet_runner import concurrency_for, local_desktop_limit

ACME_KEY = "acme-file-key-7f3a"
ACME_LIMITS = ImageLimits(800, 480_000, "Acme: 800 px long edge")


class AcmeAgent:
    """The throwaway vendor's agent: one click, then done; it keeps what the builder gave it."""

    name = "acme"
    made: list[AgentRequest] = []

    def __init__(self, request: AgentRequest) -> None:
        self.request = request
        self.model = request.model
        self.turns = 0

    @classmethod
    def from_request(cls, request: AgentRequest) -> AcmeAgent:
        cls.made.append(request)
        return cls(request)

    def start(self, task: str, frame: Frame) -> Turn:
        return Turn(calls=(Call("acme_1", "openai", ({"type": "click", "x": 10, "y": 20},)),))

    def next_turn(self, results: tuple[CallResult, ...], frame: Frame, note: str = "") -> Turn:
        return Turn(text="done")

    def cancel(self) -> None:
        pass


class ToyTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    colour: str | None = None
    token: str | None = None

    def __repr__(self) -> str:
        return f"ToyTable(colour={self.colour!r})"


built: list[ToyTable | None] = []
stopped: list[str] = []


def build_toy(size: Size, table: ToyTable | None, *, target: Target, **_: object) -> SimDesktop:
    built.append(table)
    return SimDesktop(size, verifier=False)  # no verdict: the run ends "finished"


def toy_leftovers(settings: Settings) -> Leftovers:
    table = settings.backend_table("toy")
    return Leftovers(lambda: [{"id": "toy-1", "state": table.colour or "", "run": ""}], stopped.append, "toys")


ACME = Vendor(
    "acme",
    agent=f"{__name__}:AcmeAgent",
    wire_format="openai",
    about="Acme's model",
    default_model="acme-1",
    key_variable="ACME_API_KEY",
    base_url_variable="ACME_BASE_URL",
    image_limits=(("acme-", ACME_LIMITS),),
    default_limits=ACME_LIMITS,
    prices={"acme-1": (1.0, 2.0)},
    otel_system="acme.ai",
    options=frozenset({"model"}),
    sdk="msgspec",  # (a distribution that is installed: its version goes to run.json)
)
TOY = Backend(
    "toy",
    browser=False,
    about="toy",
    builder=f"{__name__}:build_toy",
    isolation="nothing runs",
    on_this_machine=True,
    settings=f"{__name__}:ToyTable",
    environment={"colour": "TOY_COLOUR"},
    leftovers=f"{__name__}:toy_leftovers",
)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(VENDORS, "acme", ACME)
    monkeypatch.setitem(BACKENDS, "toy", TOY)
    for name in ("ACME_API_KEY", "ACME_BASE_URL", "TOY_COLOUR", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    AcmeAgent.made.clear()
    built.clear()


def settings_file(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return Settings.load({"CUA_TUI_CONFIG": str(path)})


def test_a_fourth_vendor_brings_its_own_key_agent_limits_prices_options_and_system(
    tmp_path: Path, registered: None
) -> None:
    settings = settings_file(tmp_path, f'[acme]\napi_key = "{ACME_KEY}"\n')
    # its key is its own: no other vendor gets it, and its environment variable wins
    assert settings.api_key("acme", {}) == ACME_KEY
    assert settings.api_key("openai", {}) is None and settings.api_key("anthropic", {}) is None
    assert settings.api_key("acme", {"ACME_API_KEY": "from-env"}) == "from-env"
    assert ACME_KEY not in repr(settings) and ACME_KEY not in repr(settings.vendor_table("acme", {}))
    # its agent, its default model, its key
    agent, label = make_agent("acme", policy=Policy.default(), settings=settings)
    assert isinstance(agent, AcmeAgent) and label == "acme"
    assert (agent.request.key, agent.model, agent.request.vendor) == (ACME_KEY, "acme-1", ACME)
    # its image limits (another vendor's model name does not change them) and its prices
    assert image_limits("acme", "acme-2") is ACME_LIMITS and image_limits("acme", "gpt-5.6-sol") is ACME_LIMITS
    assert image_limits("openai", "acme-2") is not ACME_LIMITS
    capped = Policy.default().with_limits(max_cost_usd=1.0)
    assert make_agent("acme", policy=capped, settings=settings)[0]
    with pytest.raises(UnavailableError, match=r"no price is known for model 'gpt-5\.6-sol'"):
        make_agent("acme", model="gpt-5.6-sol", policy=capped, settings=settings)  # openai's price is not its
    # its options: --model yes, --base-url no (its record does not take it)
    only = r"^--base-url: only for the openai(, | and )anthropic.* agents, not acme$"
    with pytest.raises(UnavailableError, match=only):
        make_agent("acme", base_url="http://127.0.0.1:9", policy=Policy.default(), settings=settings)
    # its OpenTelemetry system, its SDK's version on record, its place in a tasks file
    assert otel_systems()["acme"] == "acme.ai"
    assert versions()["msgspec"] == msgspec.__version__
    forms = [vendor.spec for vendor in VENDORS.values()]
    assert parse_tasks('[[tasks]]\ntask = "t"\nagent = "acme"\n', agents=forms).tasks[0].agent == "acme"
    # without a key: the usage error names its variable and its table
    bare = settings_file(tmp_path, "")
    with pytest.raises(UnavailableError, match=r"set ACME_API_KEY in the environment \(or api_key under \[acme\]"):
        make_agent("acme", policy=Policy.default(), settings=bare)


def test_a_run_of_the_fourth_vendor_on_the_throwaway_backend(tmp_path: Path, registered: None) -> None:
    settings = settings_file(tmp_path, f'[acme]\napi_key = "{ACME_KEY}"\n\n[toy]\ncolour = "teal"\n')
    run = build_run(
        RunOptions(
            task="click",
            backend="toy",
            agent="acme",
            decisions="approve",
            runs_dir=tmp_path / "runs",
            fsync=False,
            settings=settings,
        )
    )
    result = run.run()
    assert result.status == "finished", result.reason
    assert built == [ToyTable(colour="teal")]
    (request,) = AcmeAgent.made
    assert request.key == ACME_KEY and request.model == "acme-1"
    info = (run.path / "run.json").read_text()
    assert '"agent": "acme"' in info and '"backend": "toy"' in info and ACME_KEY not in info
    assert ACME_KEY not in (run.path / "audit.jsonl").read_text()


def test_a_throwaway_backend_brings_its_table_builder_memory_rule_and_leftovers(
    tmp_path: Path, registered: None
) -> None:
    settings = settings_file(tmp_path, '[toy]\ncolour = "red"\ntoken = "toy-secret"\n')
    assert settings.backend_table("toy", {}).colour == "red"
    assert settings.backend_table("toy", {"TOY_COLOUR": "blue"}).colour == "blue"  # the environment wins
    assert "toy-secret" not in repr(settings)
    desktop = make_desktop("toy", Size(640, 480), target=Target(), settings=settings)
    assert isinstance(desktop, SimDesktop) and built == [settings.backend_table("toy", {})]
    # no browser: a lab or a URL is refused naming the backends that have one
    with pytest.raises(UnavailableError, match=rf"--backend {either(lab_hosts())}\), not 'toy'"):
        make_desktop("toy", Size(640, 480), target=Target(url="https://example.org/"), settings=settings)
    assert "toy" not in lab_hosts()
    # its desktops run here: the fleet's memory rule clamps it as it does local
    assert concurrency_for("toy", 10_000, 10_000)[0] == local_desktop_limit()
    # its leftovers, listed and stopped as `cua-tui sandboxes` does
    found = BACKENDS["toy"].leftovers_of(settings)
    assert found.list() == [{"id": "toy-1", "state": "red", "run": ""}]
    found.stop("toy-1")
    assert stopped[-1] == "toy-1"
    # a bad value in its table is an error naming the line
    with pytest.raises(ConfigError, match=r"line 3: toy.colour: Expected `str \| null`, got `int`"):
        settings_file(tmp_path, "[toy]\n\ncolour = 7\n")


def test_an_unknown_vendor_or_backend_is_one_usage_line_naming_the_registered(tmp_path: Path) -> None:
    settings = settings_file(tmp_path, "")
    with pytest.raises(UnknownVendor) as agent:
        make_agent("nonesuch", policy=Policy.default(), settings=settings)
    assert str(agent.value) == f"unknown agent 'nonesuch'; use {specs()}"
    assert "openai, anthropic" in str(agent.value) and "script:PATH" in str(agent.value)
    assert isinstance(agent.value, UsageError)
    for name in ("script", "openai:x", "script:"):  # a form its record does not have
        with pytest.raises(UnknownVendor, match=re.escape(f"use {specs()}")):
            make_agent(name, policy=Policy.default(), settings=settings)
    with pytest.raises(UnknownVendor):
        image_limits("nonesuch", "acme-1")  # never another vendor's limits
    with pytest.raises(UnknownVendor):
        settings.api_key("nonesuch")  # never another vendor's key
    with pytest.raises(Unavailable) as backend:
        make_desktop("nonesuch", Size(640, 480), target=Target(), settings=settings)
    names = ", ".join(BACKENDS)
    assert str(backend.value) == f"unknown desktop backend 'nonesuch'; choose one of {names}"
    assert names.startswith("local, cwsandbox, docker, dry, sim")
    with pytest.raises(TasksError, match=re.escape(f"line 3: tasks.0.agent: 'nonesuch': {specs()}")):
        parse_tasks('[[tasks]]\ntask = "t"\nagent = "nonesuch"\n', agents=[v.spec for v in VENDORS.values()])
    with pytest.raises(ConfigError, match=r"line 1: nonesuch: unknown key 'nonesuch'"):
        settings_file(tmp_path, '[nonesuch]\napi_key = "k"\n')


def test_the_flat_keys_of_old_still_work_with_one_note_naming_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-flat-9c1e"
    text = (
        f'openai_api_key = "{secret}"\ncwsandbox_image = "reg.example/desk:1"\ncwsandbox_max_lifetime = 600\n'
        'docker_image = "desk:2"\n\n[cwsandbox]\ncpu = "4"\n'
    )
    settings = settings_file(tmp_path, text)
    assert settings.api_key("openai", {}) == secret
    cw = settings.backend_table("cwsandbox", {})
    assert (cw.image, cw.max_lifetime, cw.cpu) == ("reg.example/desk:1", 600, "4")  # the flat keys and the table
    assert settings.backend_table("docker", {}).image == "desk:2"
    notes = capsys.readouterr().err.splitlines()
    assert len(notes) == 3 and all(line.startswith("cua-tui: note: ") for line in notes)
    assert any("openai_api_key: deprecated, write api_key under [openai]" in line for line in notes)
    assert any(
        "cwsandbox_image, cwsandbox_max_lifetime: deprecated" in line and "[cwsandbox]" in line for line in notes
    )
    assert not any(secret in line for line in notes)
    settings_file(tmp_path, text)
    assert capsys.readouterr().err == ""  # once per process
    # the new tables, and their checks on the flat keys too, by line
    table = settings_file(tmp_path, '[cwsandbox]\nimage = "reg.example/desk:3"\n[docker]\nimage = "desk:4"\n')
    assert table.backend_table("cwsandbox", {}).image == "reg.example/desk:3"
    assert table.backend_table("docker", {}).image == "desk:4"
    assert capsys.readouterr().err == ""
    with pytest.raises(ConfigError, match=r"line 2: cwsandbox.max_lifetime: Expected `int` >= 60"):
        settings_file(tmp_path, "[cwsandbox]\nmax_lifetime = 5\n")
    with pytest.raises(ConfigError, match=r"line 1: cwsandbox_placement: Invalid enum value 'edge'"):
        settings_file(tmp_path, 'cwsandbox_placement = "edge"\n')


def test_the_wire_formats_are_one_table_in_the_core() -> None:
    identity = Scaling.identity(Size(100, 100))
    click = parse_wire("openai", {"type": "click", "x": 1, "y": 2}, identity)
    assert click.kind is Kind.CLICK
    block = {"name": "left_click", "input": {"coordinate": [1, 2]}, "toolset_name": "computer"}
    assert parse_wire("anthropic", block, identity).kind is Kind.CLICK
    with pytest.raises(ActionError, match="cannot read a 'acme' action"):
        parse_wire("acme", {"type": "click"}, identity)
    with pytest.raises(ActionError, match="toolset call is an object"):
        parse_wire("anthropic", "left_click", identity)
    assert (raw_kind("openai", {"type": "click"}), raw_kind("anthropic", block), raw_kind("acme", {})) == (
        "click",
        "left_click",
        "",
    )


# ---------------------------------------------------------------------------------------------------
# The manual's tables of vendors, backends and settings tables say what the records say
# ---------------------------------------------------------------------------------------------------
DOCS = Path(__file__).resolve().parents[1] / "docs"


def table_rows(page: str, header: str) -> list[list[str]]:
    """The cells of the rows of the Markdown table whose header line starts with ``header``."""
    lines = (DOCS / page).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_vendors_table_of_the_manual_is_the_registry() -> None:
    def code(value: str | None) -> str:
        return f"`{value}`" if value else "none"

    expected = [
        [
            code(v.spec),
            code(v.key_variable),
            code(v.base_url_variable),
            code(v.default_model),
            code(f"[{v.name}]" if v.key_variable else None),
            code(v.otel_system),
        ]
        for v in VENDORS.values()
    ]
    assert sorted(table_rows("models.md", "| `--agent` |")) == sorted(expected)


def test_the_backends_table_of_the_manual_is_the_registry() -> None:
    rows = table_rows("backends/index.md", "| backend |")
    named = {row[0].split("`")[1]: row[1] for row in rows}
    assert sorted(named) == sorted(BACKENDS)
    for name, backend in BACKENDS.items():
        assert named[name].startswith(backend.isolation), name


def test_the_settings_tables_of_the_manual_are_the_registry() -> None:
    from cua_tui.config import ModelTable

    documented: dict[str, set[str]] = {}
    variables: dict[str, set[str]] = {}
    for table, keys, _what, env in table_rows("files/settings.md", "| table |"):
        name = table.strip("`[]")
        documented.setdefault(name, set()).update(k.strip("` ") for k in keys.split(","))
        variables.setdefault(name, set()).update(v.strip("` ") for v in env.split(",") if v.strip())
    registered: dict[str, tuple[set[str], set[str]]] = {}
    for vendor in VENDORS.values():
        if vendor.key_variable:  # a vendor with a key has a settings table
            wins = {vendor.key_variable or "", vendor.base_url_variable or ""} - {""}
            registered[vendor.name] = (set((vendor.settings_type() or ModelTable).__struct_fields__), wins)
    for backend in BACKENDS.values():
        schema = backend.settings_type()
        if schema is not None:
            registered[backend.name] = (set(schema.__struct_fields__), set(backend.environment.values()))
    assert documented == {name: keys for name, (keys, _) in registered.items()}
    assert variables == {name: env for name, (_, env) in registered.items()}


def test_every_record_names_what_exists() -> None:
    """Each record's lazy references resolve: its agent class, builder, settings table, leftovers lister and
    wire format (a parser in the core's table)."""
    from cua_tui.core.wire import FORMATS

    for vendor in VENDORS.values():
        assert vendor.wire_format in FORMATS, vendor.name
        assert callable(vendor.agent_class().from_request), vendor.name
        assert not vendor.default_model or vendor.limits_for(vendor.default_model) is not None
    for backend in BACKENDS.values():
        assert callable(backend.builder_function()), backend.name
        schema = backend.settings_type()
        assert schema is None or set(backend.environment) | set(backend.flat_keys) <= set(schema.__struct_fields__)
        if backend.leftovers:
            module, _, name = backend.leftovers.partition(":")
            assert callable(getattr(__import__(f"cua_tui.desktops{module}", fromlist=[name]), name)), backend.name
