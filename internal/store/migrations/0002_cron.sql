-- The scheduler (SPEC §5): jobs, their executions (each one carries its
-- fire claim: owner, fencing token, expiry refreshed by heartbeats), every
-- attempt to claim an occurrence, and occurrences missed during outages.
CREATE TABLE jobs (
    id                 INTEGER PRIMARY KEY,
    name               TEXT    NOT NULL,
    spec               TEXT    NOT NULL,
    zone               TEXT    NOT NULL DEFAULT '',
    anchor             TEXT    NOT NULL,
    action             TEXT    NOT NULL,
    platform           TEXT    NOT NULL DEFAULT '',
    chat_id            TEXT    NOT NULL DEFAULT '',
    catchup            TEXT    NOT NULL DEFAULT 'latest' CHECK (catchup IN ('latest', 'skip', 'all')),
    catchup_cap        INTEGER NOT NULL DEFAULT 10 CHECK (catchup_cap >= 1),
    grace_ms           INTEGER NOT NULL DEFAULT 0 CHECK (grace_ms >= 0),
    budget_ms          INTEGER NOT NULL CHECK (budget_ms > 0),
    rerun_interrupted  INTEGER NOT NULL DEFAULT 0,
    paused             INTEGER NOT NULL DEFAULT 0,
    deleted            INTEGER NOT NULL DEFAULT 0,
    next_run_at        TEXT,
    missed             INTEGER NOT NULL DEFAULT 0,
    last_missed_at     TEXT,
    last_missed_reason TEXT,
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL
);
CREATE UNIQUE INDEX jobs_live_name ON jobs (name) WHERE deleted = 0;
-- The due scan: one probe of this index per tick, however many jobs exist.
CREATE INDEX jobs_due ON jobs (next_run_at) WHERE paused = 0 AND deleted = 0 AND next_run_at IS NOT NULL;

CREATE TABLE executions (
    id               INTEGER PRIMARY KEY,
    job_id           INTEGER NOT NULL REFERENCES jobs (id),
    kind             TEXT    NOT NULL CHECK (kind IN ('scheduled', 'manual', 'rerun')),
    slot             TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('claimed', 'running', 'succeeded', 'failed', 'interrupted', 'cancelled')),
    cause            TEXT,
    late_ms          INTEGER NOT NULL DEFAULT 0,
    catchup          INTEGER NOT NULL DEFAULT 0,
    owner            TEXT,
    fencing_token    INTEGER NOT NULL DEFAULT 1,
    claim_expires_at TEXT,
    heartbeat_at     TEXT,
    output           TEXT,
    truncated        INTEGER NOT NULL DEFAULT 0,
    message_id       INTEGER,
    pgid             INTEGER,
    claimed_at       TEXT    NOT NULL,
    started_at       TEXT,
    finished_at      TEXT,
    UNIQUE (job_id, kind, slot)
);
CREATE INDEX executions_live ON executions (claim_expires_at) WHERE state IN ('claimed', 'running');
CREATE INDEX executions_by_job ON executions (job_id, id);

CREATE TRIGGER executions_terminal_immutable
BEFORE UPDATE ON executions
WHEN OLD.state IN ('succeeded', 'failed', 'interrupted', 'cancelled')
BEGIN
    SELECT RAISE(ABORT, 'execution is terminal');
END;

CREATE TABLE fire_attempts (
    id      INTEGER PRIMARY KEY,
    job_id  INTEGER NOT NULL,
    slot    TEXT    NOT NULL,
    owner   TEXT    NOT NULL,
    outcome TEXT    NOT NULL CHECK (outcome IN ('acquired', 'not_acquired')),
    at      TEXT    NOT NULL
);
CREATE INDEX fire_attempts_by_job ON fire_attempts (job_id, slot);

CREATE TABLE missed_occurrences (
    id         INTEGER PRIMARY KEY,
    job_id     INTEGER NOT NULL,
    first_slot TEXT    NOT NULL,
    last_slot  TEXT    NOT NULL,
    count      INTEGER NOT NULL CHECK (count >= 1),
    reason     TEXT    NOT NULL,
    at         TEXT    NOT NULL
);
CREATE INDEX missed_by_job ON missed_occurrences (job_id, id);
