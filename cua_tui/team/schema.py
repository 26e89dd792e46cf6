"""The team queue's schema in PostgreSQL, versioned: ``cua-tui queue init`` / ``upgrade`` apply the
migrations a database lacks, in order, each in one transaction (and a worker or a submitter does so at
first use). The tables, their rules and why: docs/team/queue.md.

The invariants that make an answer trustworthy are the server's, not the clients': a trigger sets who
answered (``session_user``), when, and the answer's id, refuses a second answer or an answer to a closed
request, and wipes the typed text in the same statement that answers or closes a request. Column
privileges keep an analyst's role to the answer's own columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.actions import MAX_TEXT
from ..core.drills import MAX_SENT_BYTES
from ..core.events import RunStatus
from ..core.policy import APPROVER_TIERS, MAX_QUORUM

if TYPE_CHECKING:
    import psycopg

SCHEMA = "cua_tui"
# the role a team's workers are granted, and the one its analysts (and submitters) are
WORKER_ROLE = "cua_tui_worker"
ANALYST_ROLE = "cua_tui_analyst"
# the role that sets who may decide what (version 4's rules); neither analysts nor workers may
ADMIN_ROLE = "cua_tui_admin"
# a rule's keys beside policy rules: a tier (the queue's labels, core/fleet_queue.py), and its bounds
TIER_KEYS = "|".join(APPROVER_TIERS)
MAX_ASIDE_MIN = 1440
# NOTIFY channels: a woken session then reads rows (a payload carries no data, only an id)
ANSWERED = "cua_tui_answered"
POSTED = "cua_tui_posted"
QUEUED = "cua_tui_queued"
KILL = "cua_tui_kill"
ESCALATED = "cua_tui_escalated"
# the advisory lock two migrating sessions take, so that one waits for the other
_MIGRATION_LOCK = 0x63756174  # "cuat"
# the requests one analyst's panel may mark "read by" at once (a group's), and a mark's longest lease
MAX_LOOKS = 100
MAX_LOOK_S = 60
# an analyst's drill answer as it travels to the run's worker (core/drills.py, ``sent``)
MAX_DRILL_BYTES = MAX_SENT_BYTES


def _guard(
    more: tuple[str, ...], *, replace: bool = False, wiped: tuple[str, ...] = (), first: str = "", answering: str = ""
) -> str:
    """The trigger function that holds an answer to its rules: who answered, when and its id set by the
    server; the columns an answer sets (``more`` beyond version 1's) set with it only, never changed after.
    ``wiped``: columns an answer sets that are then only cleared, and are wiped once the request is applied,
    not applied or closed (an edit's typed text: held only until its worker reads it). ``first``: checks before
    any other; ``answering``: what an answer passes before it stands (version 4: who may answer, a quorum)."""
    changed = "".join(f"\n        OR NEW.{c} IS DISTINCT FROM OLD.{c}" for c in more)
    changed += "".join(f"\n        OR (NEW.{c} IS NOT NULL AND NEW.{c} IS DISTINCT FROM OLD.{c})" for c in wiped)
    set_ = "".join(f" OR NEW.{c} IS NOT NULL" for c in (*more, *wiped))
    wipe = "".join(
        f"\n    IF NEW.applied_at IS NOT NULL OR NEW.not_applied IS NOT NULL OR NEW.closed_at IS NOT NULL THEN"
        f"\n        NEW.{c} := NULL;\n    END IF;"
        for c in wiped
    )
    return _GUARD.format(
        create="CREATE OR REPLACE" if replace else "CREATE", changed=changed, set=set_, wipe=wipe, schema=SCHEMA,
        first=first, answering=answering,
    )  # fmt: skip


_GUARD = """{create} FUNCTION guard_request() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = {schema} AS $$
BEGIN{first}
    IF OLD.answer IS NOT NULL AND (
        NEW.answer IS DISTINCT FROM OLD.answer OR NEW.answer_id IS DISTINCT FROM OLD.answer_id
        OR NEW.answered_by IS DISTINCT FROM OLD.answered_by OR NEW.answered_at IS DISTINCT FROM OLD.answered_at
        OR NEW.how IS DISTINCT FROM OLD.how OR NEW.note IS DISTINCT FROM OLD.note
        OR NEW.group_id IS DISTINCT FROM OLD.group_id OR NEW.group_size IS DISTINCT FROM OLD.group_size{changed}
    ) THEN
        RAISE EXCEPTION 'request % is already answered', OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.answer IS NULL AND NEW.answer IS NOT NULL THEN
        IF OLD.closed_at IS NOT NULL THEN
            RAISE EXCEPTION 'request % is closed (%)', OLD.id, OLD.closed_why USING ERRCODE = 'check_violation';
        END IF;{answering}
        NEW.answered_by := session_user;
        NEW.answered_at := clock_timestamp();
        NEW.answer_id := nextval('{schema}.answer_ids');
        NEW.texts := NULL;
    ELSIF OLD.answer IS NULL AND (NEW.answer_id IS NOT NULL OR NEW.answered_by IS NOT NULL
                                  OR NEW.answered_at IS NOT NULL OR NEW.group_id IS NOT NULL{set}) THEN
        RAISE EXCEPTION 'only an answer sets who answered' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.closed_at IS NOT NULL THEN
        NEW.texts := NULL;
    END IF;{wipe}
    IF NEW.body IS DISTINCT FROM OLD.body OR NEW.content_sha256 IS DISTINCT FROM OLD.content_sha256
       OR NEW.run_id IS DISTINCT FROM OLD.run_id OR NEW.seq IS DISTINCT FROM OLD.seq THEN
        RAISE EXCEPTION 'a request is not rewritten' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""


def _reap(*, create: str, more: str = "") -> str:
    """The reaper: workers whose lease lapsed are lost (``more``: what else it does to their running runs'
    requests before those runs end, in later versions)."""
    return _REAP.format(create=create, more=more, schema=SCHEMA, lost=RunStatus.LOST.value)


# version 3's reaper: answers its lost worker had not applied are marked so
_NOT_APPLIED = """    UPDATE requests SET not_applied = 'lost: its worker stopped renewing its lease'
    WHERE answer IS NOT NULL AND applied_at IS NULL AND not_applied IS NULL
      AND run_id IN (SELECT id FROM runs WHERE worker_id = ANY (gone) AND state = 'running');
"""

_REAP = """{create} FUNCTION reap() RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema} AS $$
DECLARE
    gone text[];
BEGIN
    WITH lapsed AS (
        UPDATE workers SET state = 'lost', token = nextval('tokens'), stopped_at = now()
        WHERE state = 'running' AND lease_until < now()
        RETURNING id
    )
    SELECT coalesce(array_agg(id), '{{}}') INTO gone FROM lapsed;
    IF cardinality(gone) = 0 THEN
        RETURN 0;
    END IF;
    UPDATE requests SET closed_at = now(), closed_why = 'lost: its worker stopped renewing its lease'
    WHERE answer IS NULL AND closed_at IS NULL
      AND run_id IN (SELECT id FROM runs WHERE worker_id = ANY (gone) AND state = 'running');
{more}    UPDATE runs SET state = 'ended', status = '{lost}', ended_at = now(),
                    reason = 'its worker stopped renewing its lease', token = NULL
    WHERE worker_id = ANY (gone) AND state = 'running';
    RETURN cardinality(gone);
END $$;"""


_V1 = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
SET LOCAL search_path = {SCHEMA};

CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);

CREATE TABLE fleets (
    id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9._-]{{1,64}}$'),
    name text NOT NULL DEFAULT '' CHECK (length(name) <= 200),
    tasks_sha256 text NOT NULL CHECK (tasks_sha256 ~ '^[0-9a-f]{{64}}$'),
    submitted_by text NOT NULL DEFAULT session_user,
    submitted_at timestamptz NOT NULL DEFAULT now()
);

-- the fencing token of a worker's lease: a new one for every registration, never reused
CREATE SEQUENCE tokens;

CREATE TABLE workers (
    id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9._-]{{1,100}}$'),
    role text NOT NULL DEFAULT session_user,
    host text NOT NULL CHECK (length(host) <= 255),
    pid integer NOT NULL,
    backends text[] NOT NULL,
    concurrency integer NOT NULL,
    runs_dir text NOT NULL CHECK (length(runs_dir) <= 4096),
    token bigint NOT NULL DEFAULT nextval('tokens'),
    lease_s double precision NOT NULL CHECK (lease_s > 0),
    started_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz NOT NULL,
    state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'stopped', 'lost')),
    stopped_at timestamptz
);

CREATE TABLE runs (
    id text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{{0,99}}$'),
    fleet_id text NOT NULL REFERENCES fleets (id) ON DELETE CASCADE,
    position integer NOT NULL,
    task_name text NOT NULL CHECK (length(task_name) <= 64),
    backend text NOT NULL CHECK (length(backend) <= 64),
    -- everything the run needs (team/payload.py), and the SHA-256 of its canonical JSON
    spec jsonb NOT NULL,
    spec_sha256 text NOT NULL CHECK (spec_sha256 ~ '^[0-9a-f]{{64}}$'),
    retry_of text,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'ended')),
    worker_id text REFERENCES workers (id),
    token bigint,
    claimed_at timestamptz,
    phase text,
    turn integer,
    steps integer,
    ended_at timestamptz,
    status text,
    reason text,
    verified boolean,
    -- result.json's seal {{"events", "head", "signature"?}} as the worker wrote it
    seal jsonb,
    -- the worker sealed the run's own folder (then the database is not its only copy)
    sealed_locally boolean NOT NULL DEFAULT false,
    -- audit lines mirrored so far, and when the mirror was pruned
    mirrored bigint NOT NULL DEFAULT 0,
    pruned_at timestamptz,
    UNIQUE (fleet_id, position)
);
CREATE INDEX runs_claimable ON runs (submitted_at, fleet_id, position) WHERE state = 'queued';
CREATE INDEX runs_of_worker ON runs (worker_id) WHERE state = 'running';

CREATE SEQUENCE answer_ids;

CREATE TABLE requests (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    fleet_id text NOT NULL,
    turn integer NOT NULL,
    index integer NOT NULL,
    kind text NOT NULL CHECK (kind IN ('action', 'safety_check', 'budget')),
    -- the decision_requested line's place in the run's chain
    seq bigint NOT NULL,
    -- what the panel shows, typed text left out (team/requests.py)
    body jsonb NOT NULL,
    -- the SHA-256 of the request as the worker posted it (typed text included)
    content_sha256 text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{{64}}$'),
    -- the typed text, only while the request is open: {{"action": text, "3": a gated action's}}
    texts jsonb,
    screen text CHECK (screen IS NULL OR screen ~ '^[0-9a-f]{{64}}$'),
    tier integer NOT NULL,
    posted_at timestamptz NOT NULL DEFAULT now(),
    deadline_s double precision,
    answer text CHECK (answer IN ('approve', 'reject', 'kill')),
    answer_id bigint UNIQUE,
    answered_by text,
    -- how it was answered: a person, or which automated approver
    how text CHECK (how IS NULL OR length(how) <= 100),
    note text CHECK (note IS NULL OR length(note) <= 2000),
    -- answered with others in one transaction: the group's id and how many requests it held
    group_id text CHECK (group_id IS NULL OR group_id ~ '^[A-Za-z0-9._-]{{1,64}}$'),
    group_size integer CHECK (group_size IS NULL OR group_size BETWEEN 1 AND 100000),
    answered_at timestamptz,
    closed_at timestamptz,
    closed_why text,
    applied_at timestamptz,
    -- committed, and not taken by the run (after its deadline, or the run had ended)
    not_applied text,
    UNIQUE (run_id, seq)
);
CREATE INDEX requests_open ON requests (fleet_id, tier, posted_at) WHERE answer IS NULL AND closed_at IS NULL;

-- every audit line of a run with its exact bytes, and its screens once by SHA-256
CREATE TABLE events (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    line bytea NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE screens (
    sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{{64}}$'),
    png bytea NOT NULL
);
CREATE TABLE run_screens (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    sha256 text NOT NULL REFERENCES screens (sha256),
    PRIMARY KEY (run_id, sha256)
);
CREATE INDEX run_screens_by_screen ON run_screens (sha256);

-- The rules of an answer, whoever sends the statement.
-- SECURITY DEFINER: it takes the answer's id from a sequence the analyst may not use; session_user is
-- still the role that authenticated (only current_user changes)
{_guard(())}CREATE TRIGGER guard_request BEFORE UPDATE ON requests FOR EACH ROW EXECUTE FUNCTION guard_request();

CREATE FUNCTION announce_answer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{ANSWERED}', NEW.id::text);
    RETURN NULL;
END $$;
CREATE TRIGGER announce_answer AFTER UPDATE OF answer, closed_at ON requests FOR EACH ROW
    WHEN (OLD.answer IS NULL AND (NEW.answer IS NOT NULL OR NEW.closed_at IS NOT NULL))
    EXECUTE FUNCTION announce_answer();

CREATE FUNCTION announce_request() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{POSTED}', NEW.fleet_id);
    RETURN NULL;
END $$;
CREATE TRIGGER announce_request AFTER INSERT ON requests FOR EACH ROW EXECUTE FUNCTION announce_request();

CREATE FUNCTION announce_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{QUEUED}', NEW.backend);
    RETURN NULL;
END $$;
CREATE TRIGGER announce_run AFTER INSERT ON runs FOR EACH ROW EXECUTE FUNCTION announce_run();

-- Workers whose lease lapsed are lost: their token is spent (fencing), their running runs read lost, and
-- their open requests close with that reason. Any session may call it; it changes only what is due.
{_reap(create="CREATE")}

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{WORKER_ROLE}') THEN
        GRANT USAGE ON SCHEMA {SCHEMA} TO {WORKER_ROLE};
        GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {SCHEMA} TO {WORKER_ROLE};
        GRANT USAGE ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {WORKER_ROLE};
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ANALYST_ROLE}') THEN
        GRANT USAGE ON SCHEMA {SCHEMA} TO {ANALYST_ROLE};
        GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO {ANALYST_ROLE};
        GRANT UPDATE (answer, how, note, group_id, group_size) ON requests TO {ANALYST_ROLE};
        GRANT INSERT ON fleets TO {ANALYST_ROLE};
        GRANT INSERT (id, fleet_id, position, task_name, backend, spec, spec_sha256, retry_of)
            ON runs TO {ANALYST_ROLE};
    END IF;
END $$;
"""

# Version 2: the kill switch from any analyst's terminal. Who pressed it is the session's role, set by the
# server; a queued run ends killed at once, a running one is ended by its worker, which is told.
_V2 = f"""
SET LOCAL search_path = {SCHEMA};

ALTER TABLE runs ADD COLUMN kill_by text, ADD COLUMN kill_at timestamptz;

-- what an analyst was shown with an answer (as a run of one machine records it): the screen's SHA-256 and
-- how long it was on screen; set with the answer only, never changed after
ALTER TABLE requests ADD COLUMN screen_shown text CHECK (screen_shown IS NULL OR screen_shown ~ '^[0-9a-f]{{64}}$'),
    ADD COLUMN shown_ms integer CHECK (shown_ms IS NULL OR shown_ms BETWEEN 0 AND 864000000);
{_guard(("screen_shown", "shown_ms"), replace=True)}
CREATE FUNCTION kill_runs(ids text[]) RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = {SCHEMA} AS $$
DECLARE
    queued integer;
    running integer;
BEGIN
    UPDATE runs SET state = 'ended', status = '{RunStatus.KILLED.value}', ended_at = now(), token = NULL,
                    reason = 'killed by ' || session_user || ' (a team''s kill switch) before it started',
                    kill_by = session_user, kill_at = now()
    WHERE id = ANY (ids) AND state = 'queued';
    GET DIAGNOSTICS queued = ROW_COUNT;
    UPDATE runs SET kill_by = session_user, kill_at = now()
    WHERE id = ANY (ids) AND state = 'running' AND kill_at IS NULL;
    GET DIAGNOSTICS running = ROW_COUNT;
    IF running > 0 THEN
        PERFORM pg_notify('{KILL}', '');
    END IF;
    RETURN queued + running;
END $$;
REVOKE EXECUTE ON FUNCTION kill_runs(text[]) FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ANALYST_ROLE}') THEN
        GRANT EXECUTE ON FUNCTION kill_runs(text[]) TO {ANALYST_ROLE};
        GRANT UPDATE (screen_shown, shown_ms) ON requests TO {ANALYST_ROLE};
    END IF;
END $$;
"""

# Version 3: a scope's grant (a) and an edit (e) travel in the answer; who has a request on their panel.
_V3 = f"""
SET LOCAL search_path = {SCHEMA};

-- a: the run grants the request's scope; e: the action as it will run (its record, typed text as length and
-- SHA-256), and the edited text itself only until the run's worker reads it (wiped then, by the guard)
ALTER TABLE requests ADD COLUMN scope_grant boolean,
    ADD COLUMN edit jsonb CHECK (edit IS NULL OR octet_length(edit::text) <= 8192),
    ADD COLUMN edit_text text CHECK (edit_text IS NULL OR length(edit_text) <= {MAX_TEXT}),
    ADD CONSTRAINT only_an_approval_grants_or_edits
        CHECK ((scope_grant IS NULL AND edit IS NULL AND edit_text IS NULL) OR answer = 'approve'),
    ADD CONSTRAINT an_edits_text_with_its_edit CHECK (edit_text IS NULL OR edit IS NOT NULL);

-- run.json as the run wrote it (exact bytes): a replay or an export from the database has its folder whole
ALTER TABLE runs ADD COLUMN run_json bytea CHECK (run_json IS NULL OR octet_length(run_json) <= 1048576);
{_guard(("screen_shown", "shown_ms", "scope_grant", "edit"), replace=True, wiped=("edit_text",))}
-- an answer its lost worker never read is not applied (and its edited text goes with that)
{_reap(create="CREATE OR REPLACE", more=_NOT_APPLIED)}

-- "read by alice": the requests on an analyst's panel, a short lease renewed while they stay there. A mark
-- counts only while its session lives (pg_stat_activity): a closed terminal's lapse at once.
CREATE TABLE looks (
    request_id bigint NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    role text NOT NULL,
    pid integer NOT NULL,
    until timestamptz NOT NULL,
    PRIMARY KEY (request_id, role, pid)
);
CREATE FUNCTION look(ids bigint[], lease_s double precision) RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = {SCHEMA} AS $$
DECLARE
    marked integer;
BEGIN
    IF cardinality(ids) > {MAX_LOOKS} THEN
        RAISE EXCEPTION 'a panel shows at most {MAX_LOOKS} requests' USING ERRCODE = 'check_violation';
    END IF;
    DELETE FROM looks WHERE until < clock_timestamp()
        OR (role = session_user AND pid = pg_backend_pid() AND NOT (request_id = ANY (ids)));
    INSERT INTO looks (request_id, role, pid, until)
    SELECT id, session_user, pg_backend_pid(),
           clock_timestamp() + make_interval(secs => least(greatest(lease_s, 1), {MAX_LOOK_S}))
    FROM requests WHERE id = ANY (ids) AND answer IS NULL AND closed_at IS NULL
    ON CONFLICT (request_id, role, pid) DO UPDATE SET until = EXCLUDED.until;
    GET DIAGNOSTICS marked = ROW_COUNT;
    RETURN marked;
END $$;
REVOKE EXECUTE ON FUNCTION look(bigint[], double precision) FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{WORKER_ROLE}') THEN
        GRANT SELECT, INSERT, UPDATE ON looks TO {WORKER_ROLE};
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ANALYST_ROLE}') THEN
        GRANT EXECUTE ON FUNCTION look(bigint[], double precision) TO {ANALYST_ROLE};
        GRANT SELECT ON looks TO {ANALYST_ROLE};
        GRANT UPDATE (scope_grant, edit, edit_text) ON requests TO {ANALYST_ROLE};
    END IF;
END $$;
"""

# Version 4 (issue 39): who may decide what. The rules are an admin's; each request takes its rule as it is
# posted (narrowed by its task's policy, never widened); the guard holds every answer to it.
_REWRITE_V4 = """
    IF TG_OP = 'UPDATE' AND (NEW.approvers IS DISTINCT FROM OLD.approvers OR NEW.quorum IS DISTINCT FROM OLD.quorum
        OR NEW.rule_key IS DISTINCT FROM OLD.rule_key OR NEW.escalate_at IS DISTINCT FROM OLD.escalate_at
        OR NEW.escalate_to IS DISTINCT FROM OLD.escalate_to OR NEW.body IS DISTINCT FROM OLD.body
        OR NEW.content_sha256 IS DISTINCT FROM OLD.content_sha256 OR NEW.run_id IS DISTINCT FROM OLD.run_id
        OR NEW.seq IS DISTINCT FROM OLD.seq) THEN
        RAISE EXCEPTION 'a request is not rewritten' USING ERRCODE = 'check_violation';
    END IF;"""
# an answer: from a role the request's rule names (as it is a member now), and under a quorum each approval
# of another role counted until the quorum is met (any reject ends it); an approval counts only with the
# approvals of the same action: one of another (an edit, or the action as proposed where an edit is
# pending, as a screen a moment behind would show it) starts the count again with its own
_ANSWERING_V4 = """
        IF NOT may_answer(OLD.approvers) THEN
            RAISE EXCEPTION 'role % may not answer request %: only % may', session_user, OLD.id,
                coalesce(nullif(array_to_string(OLD.approvers, ', '), ''), 'nobody')
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF OLD.quorum > 1 AND NEW.answer = 'approve' THEN
            DECLARE
                pending jsonb;
                counted integer;
            BEGIN
                IF EXISTS (SELECT 1 FROM approvals WHERE request_id = OLD.id AND role = session_user
                           AND NOT superseded) THEN
                    RAISE EXCEPTION 'request %: % has approved it already; the same role twice counts once', OLD.id,
                        session_user USING ERRCODE = 'unique_violation';
                END IF;
                SELECT a.edit INTO pending FROM approvals a
                WHERE a.request_id = OLD.id AND NOT a.superseded ORDER BY a.id LIMIT 1;
                IF NEW.edit IS DISTINCT FROM pending THEN
                    UPDATE approvals SET superseded = true, edit_text = NULL WHERE request_id = OLD.id
                        AND NOT superseded;
                END IF;
                INSERT INTO approvals (request_id, role, how, note, screen_shown, shown_ms, scope_grant, edit,
                                       edit_text)
                VALUES (OLD.id, session_user, NEW.how, NEW.note, NEW.screen_shown, NEW.shown_ms, NEW.scope_grant,
                        NEW.edit, NEW.edit_text);
                SELECT count(*) INTO counted FROM approvals WHERE request_id = OLD.id AND NOT superseded;
                NEW.approvals := counted;
                IF counted < OLD.quorum THEN
                    -- recorded; the request stays open for another role's approval
                    NEW.answer := NULL; NEW.how := NULL; NEW.note := NULL; NEW.screen_shown := NULL;
                    NEW.shown_ms := NULL; NEW.scope_grant := NULL; NEW.edit := NULL; NEW.edit_text := NULL;
                    NEW.group_id := NULL; NEW.group_size := NULL;
                    RETURN NEW;
                END IF;
                -- the quorum is met: the last approval is the answer, carrying the edit; no text kept beside it
                UPDATE approvals SET edit_text = NULL WHERE request_id = OLD.id;
            END;
        END IF;"""

_V4 = f"""
SET LOCAL search_path = {SCHEMA};

CREATE TABLE rules (
    key text PRIMARY KEY
        CHECK (key ~ '^tier:({TIER_KEYS})$' OR (key !~ '^tier:' AND key ~ '^[A-Za-z0-9_.:+-]{{1,200}}$')),
    -- the roles that may answer (a member of one may); NULL: any analyst
    approvers text[] CHECK (approvers IS NULL OR cardinality(approvers) BETWEEN 1 AND 50),
    quorum integer NOT NULL DEFAULT 1 CHECK (quorum BETWEEN 1 AND {MAX_QUORUM}),
    escalate_after_s double precision CHECK (escalate_after_s IS NULL OR escalate_after_s > 0),
    escalate_to text CHECK (escalate_to IS NULL OR length(escalate_to) <= 63),
    set_by text NOT NULL DEFAULT session_user,
    set_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((escalate_after_s IS NULL) = (escalate_to IS NULL))
);
CREATE FUNCTION stamp_rule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.set_by := session_user;
    NEW.set_at := now();
    RETURN NEW;
END $$;
CREATE TRIGGER stamp_rule BEFORE INSERT OR UPDATE ON rules FOR EACH ROW EXECUTE FUNCTION stamp_rule();

ALTER TABLE requests ADD COLUMN rule_key text,
    ADD COLUMN approvers text[] CHECK (approvers IS NULL OR cardinality(approvers) <= 50),
    ADD COLUMN quorum integer NOT NULL DEFAULT 1 CHECK (quorum BETWEEN 1 AND {MAX_QUORUM}),
    ADD COLUMN approvals integer NOT NULL DEFAULT 0,
    ADD COLUMN escalate_at timestamptz,
    ADD COLUMN escalate_to text,
    ADD COLUMN escalated_at timestamptz;

-- each approval of a request under a quorum (the final one is the answer's too)
CREATE TABLE approvals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id bigint NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    role text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    how text,
    note text,
    screen_shown text,
    shown_ms integer,
    scope_grant boolean,
    edit jsonb,
    -- an edit's typed text while the request is open; wiped when the quorum is met or the request closes
    edit_text text,
    -- an approval of another edit came after it: it no longer counts
    superseded boolean NOT NULL DEFAULT false
);
CREATE INDEX approvals_of ON approvals (request_id);

-- "set aside" (not an answer): the request leaves that role's view until the time
CREATE TABLE asides (
    request_id bigint NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    role text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    until timestamptz NOT NULL
);
CREATE INDEX asides_of ON asides (request_id);

CREATE FUNCTION may_answer(approvers text[]) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT approvers IS NULL OR EXISTS (
        SELECT 1 FROM pg_roles r WHERE r.rolname = ANY (approvers) AND pg_has_role(session_user, r.oid, 'MEMBER'))
$$;

-- a request takes its rule as it is posted: the rule of its policy rule, else of its tier; the task's policy
-- (what the worker sends in approvers and quorum) only narrows it: its roles kept only where they are one of
-- the rule's (or a member of one), its quorum only raised
CREATE FUNCTION rule_request() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = {SCHEMA} AS $$
DECLARE
    r rules%ROWTYPE;
    matched boolean;
    narrowed text[] := NEW.approvers;
BEGIN
    SELECT * INTO r FROM rules WHERE key = NEW.body->>'rule';
    matched := FOUND;
    IF NOT matched THEN
        SELECT * INTO r FROM rules WHERE key = 'tier:' || replace(coalesce(NEW.body->>'label', ''), ' ', '_');
        matched := FOUND;
    END IF;
    NEW.quorum := greatest(coalesce(NEW.quorum, 1), CASE WHEN matched THEN r.quorum ELSE 1 END);
    NEW.approvals := 0;
    NEW.escalated_at := NULL;
    IF NOT matched THEN
        NEW.rule_key := NULL;
        NEW.escalate_at := NULL;
        NEW.escalate_to := NULL;
        RETURN NEW;
    END IF;
    NEW.rule_key := r.key;
    IF r.approvers IS NULL THEN
        NEW.approvers := narrowed;
    ELSIF narrowed IS NULL THEN
        NEW.approvers := r.approvers;
    ELSE
        NEW.approvers := ARRAY(
            SELECT p.rolname FROM pg_roles p WHERE p.rolname = ANY (narrowed) AND EXISTS (
                SELECT 1 FROM pg_roles a WHERE a.rolname = ANY (r.approvers) AND pg_has_role(p.oid, a.oid, 'MEMBER')));
    END IF;
    IF r.escalate_after_s IS NOT NULL THEN
        NEW.escalate_at := coalesce(NEW.posted_at, now()) + make_interval(secs => r.escalate_after_s);
        NEW.escalate_to := r.escalate_to;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER rule_request BEFORE INSERT ON requests FOR EACH ROW EXECUTE FUNCTION rule_request();

{
    _guard(
        ("screen_shown", "shown_ms", "scope_grant", "edit"),
        replace=True,
        wiped=("edit_text",),
        first=_REWRITE_V4,
        answering=_ANSWERING_V4,
    )
}
-- a closed request's pending edits go with it
CREATE FUNCTION wipe_approvals() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = {SCHEMA} AS $$
BEGIN
    UPDATE approvals SET edit_text = NULL WHERE request_id = NEW.id AND edit_text IS NOT NULL;
    RETURN NULL;
END $$;
CREATE TRIGGER wipe_approvals AFTER UPDATE OF closed_at ON requests FOR EACH ROW
    WHEN (OLD.closed_at IS NULL AND NEW.closed_at IS NOT NULL) EXECUTE FUNCTION wipe_approvals();

-- escalation: any reader marks what is due (as reap() declares lapsed workers), and its group is told
CREATE FUNCTION escalate() RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = {SCHEMA} AS $$
DECLARE
    marked integer;
BEGIN
    UPDATE requests SET escalated_at = clock_timestamp()
    WHERE escalate_at <= clock_timestamp() AND escalated_at IS NULL AND answer IS NULL AND closed_at IS NULL;
    GET DIAGNOSTICS marked = ROW_COUNT;
    IF marked > 0 THEN
        PERFORM pg_notify('{ESCALATED}', '');
    END IF;
    RETURN marked;
END $$;

CREATE FUNCTION set_aside(request bigint, minutes double precision) RETURNS timestamptz LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = {SCHEMA} AS $$
DECLARE
    back timestamptz;
BEGIN
    IF minutes IS NULL OR NOT minutes BETWEEN 0.01 AND {MAX_ASIDE_MIN} THEN
        RAISE EXCEPTION 'a request is set aside for 1 s to {MAX_ASIDE_MIN} minutes' USING ERRCODE = 'check_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM requests WHERE id = request AND answer IS NULL AND closed_at IS NULL) THEN
        RAISE EXCEPTION 'request % is not open', request USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO asides (request_id, role, until)
    VALUES (request, session_user, clock_timestamp() + make_interval(secs => minutes * 60)) RETURNING until INTO back;
    RETURN back;
END $$;
REVOKE EXECUTE ON FUNCTION set_aside(bigint, double precision) FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{WORKER_ROLE}') THEN
        GRANT SELECT ON rules TO {WORKER_ROLE};
        GRANT SELECT, INSERT, UPDATE ON approvals, asides TO {WORKER_ROLE};
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ANALYST_ROLE}') THEN
        GRANT SELECT ON rules, approvals, asides TO {ANALYST_ROLE};
        GRANT EXECUTE ON FUNCTION set_aside(bigint, double precision) TO {ANALYST_ROLE};
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ADMIN_ROLE}') THEN
        GRANT USAGE ON SCHEMA {SCHEMA} TO {ADMIN_ROLE};
        GRANT SELECT ON meta TO {ADMIN_ROLE};
        GRANT SELECT, INSERT, UPDATE, DELETE ON rules TO {ADMIN_ROLE};
    END IF;
END $$;
"""

# version 5: an open-weight model's call for the person (its request has no action) is a request too
_V5 = f"""
SET LOCAL search_path = {SCHEMA};

ALTER TABLE requests DROP CONSTRAINT requests_kind_check,
    ADD CONSTRAINT requests_kind_check CHECK (kind IN ('action', 'safety_check', 'budget', 'ask'));
"""

# version 6: drills are each analyst's own, never a request of the queue; an analyst's answer to one travels
# to the run's worker as a row (who answered is the server's role), which the worker records in the run's chain
_V6 = f"""
SET LOCAL search_path = {SCHEMA};

CREATE TABLE drill_answers (
    id bigserial PRIMARY KEY,
    request_id bigint NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    run_id text NOT NULL,
    role text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    record jsonb NOT NULL CHECK (jsonb_typeof(record) = 'object' AND octet_length(record::text) <= {MAX_DRILL_BYTES}),
    recorded_at timestamptz
);
CREATE INDEX drill_answers_due ON drill_answers (run_id) WHERE recorded_at IS NULL;
-- one drill per analyst in front of a request, as the front end shows it: a role cannot flood a run's chain
CREATE UNIQUE INDEX drill_answers_once ON drill_answers (request_id, role);

-- a drill shown in front of a request the role may answer (the approver rules hold for drills too)
CREATE FUNCTION drill_answered(request bigint, record jsonb) RETURNS bigint LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = {SCHEMA} AS $$
DECLARE
    run text;
    made bigint;
BEGIN
    IF record IS NULL OR jsonb_typeof(record) <> 'object' OR octet_length(record::text) > {MAX_DRILL_BYTES} THEN
        RAISE EXCEPTION 'a drill answer is an object of at most {MAX_DRILL_BYTES} bytes'
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT q.run_id INTO run FROM requests q WHERE q.id = request AND may_answer(q.approvers);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'request % is not one this role may answer', request USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO drill_answers (request_id, run_id, role, record) VALUES (request, run, session_user, record)
        ON CONFLICT (request_id, role) DO NOTHING RETURNING id INTO made;
    IF made IS NULL THEN
        RAISE EXCEPTION 'this role answered a drill in front of request % already', request
            USING ERRCODE = 'check_violation';
    END IF;
    PERFORM pg_notify('{ANSWERED}', request::text);
    RETURN made;
END $$;
REVOKE EXECUTE ON FUNCTION drill_answered(bigint, jsonb) FROM PUBLIC;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{WORKER_ROLE}') THEN
        GRANT SELECT, UPDATE ON drill_answers TO {WORKER_ROLE};
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ANALYST_ROLE}') THEN
        GRANT EXECUTE ON FUNCTION drill_answered(bigint, jsonb) TO {ANALYST_ROLE};
    END IF;
END $$;
"""

# (version, SQL): applied in order, each once
MIGRATIONS: tuple[tuple[int, str], ...] = ((1, _V1), (2, _V2), (3, _V3), (4, _V4), (5, _V5), (6, _V6))
LATEST = MIGRATIONS[-1][0]


class SchemaError(RuntimeError):
    """The database's schema cannot be used by this version (newer than it knows, or half made)."""


def version(conn: psycopg.Connection[Any]) -> int:
    """The schema version of the database ``conn`` is on (0: none yet)."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.meta",))
        row = cur.fetchone()
        if row is None or row[0] is None:
            return 0
        cur.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'version'")
        found = cur.fetchone()
    if found is None or not isinstance(found[0], str) or not found[0].isdigit():
        raise SchemaError(f"schema {SCHEMA} has no readable version: run `cua-tui queue upgrade` as its owner")
    return int(found[0])


def migrate(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """Apply the migrations the database lacks; returns (version before, version after). Sessions that
    migrate at once take turns (an advisory lock); each migration is one transaction."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        before = version(conn)
        if before > LATEST:
            raise SchemaError(
                f"the queue's schema is version {before}, newer than this cua-tui knows ({LATEST}): upgrade cua-tui"
            )
        for number, sql in MIGRATIONS:
            if number <= before:
                continue
            conn.execute(sql.encode())
            conn.execute(
                f"INSERT INTO {SCHEMA}.meta (key, value) VALUES ('version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(number),),
            )
    return before, LATEST


def ensure(conn: psycopg.Connection[Any]) -> None:
    """At first use: the schema made or brought up to date, or a SchemaError saying why it cannot be."""
    current = version(conn)
    if current == LATEST:
        return
    if current > LATEST:
        raise SchemaError(
            f"the queue's schema is version {current}, newer than this cua-tui knows ({LATEST}): upgrade cua-tui"
        )
    migrate(conn)
