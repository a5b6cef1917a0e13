-- The delivery ledger (SPEC §4). A message is what a caller handed in; an
-- obligation is one part of it owed to one chat. Per-chat FIFO follows
-- obligations.id (acceptance order).
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    idempotency_key TEXT    NOT NULL UNIQUE,
    payload_sha256  TEXT    NOT NULL,
    platform        TEXT    NOT NULL,
    chat_id         TEXT    NOT NULL,
    parts           INTEGER NOT NULL CHECK (parts >= 1),
    created_at      TEXT    NOT NULL
);

CREATE TABLE obligations (
    id                  INTEGER PRIMARY KEY,
    message_id          INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    part                INTEGER NOT NULL CHECK (part >= 0),
    delivery_key        TEXT    NOT NULL UNIQUE,
    platform            TEXT    NOT NULL,
    chat_id             TEXT    NOT NULL,
    text                TEXT    NOT NULL,
    state               TEXT    NOT NULL CHECK (state IN ('pending', 'attempting', 'delivered', 'failed', 'abandoned')),
    attempts            INTEGER NOT NULL DEFAULT 0,
    fencing_token       INTEGER NOT NULL DEFAULT 0,
    owner               TEXT,
    lease_until         TEXT,
    next_attempt_at     TEXT    NOT NULL,
    ambiguous           INTEGER NOT NULL DEFAULT 0,
    error_class         TEXT,
    error               TEXT,
    platform_message_id TEXT,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    UNIQUE (message_id, part)
);

CREATE INDEX obligations_open_by_chat ON obligations (platform, chat_id, id)
    WHERE state IN ('pending', 'attempting', 'failed');
CREATE INDEX obligations_open ON obligations (id)
    WHERE state IN ('pending', 'attempting', 'failed');
CREATE INDEX obligations_terminal_by_age ON obligations (updated_at)
    WHERE state IN ('delivered', 'abandoned');
CREATE INDEX obligations_by_message ON obligations (message_id, part);

-- Terminal rows never change (SPEC §4). Deletion (retention) is allowed.
CREATE TRIGGER obligations_terminal_immutable
BEFORE UPDATE ON obligations
WHEN OLD.state IN ('delivered', 'abandoned')
BEGIN
    SELECT RAISE(ABORT, 'obligation is terminal');
END;

-- One row per finished attempt (and per attempt lost with its owner): the
-- history behind an obligation's state.
CREATE TABLE attempts (
    id            INTEGER PRIMARY KEY,
    obligation_id INTEGER NOT NULL REFERENCES obligations (id) ON DELETE CASCADE,
    attempt       INTEGER NOT NULL,
    fencing_token INTEGER NOT NULL,
    owner         TEXT    NOT NULL,
    outcome       TEXT    NOT NULL,
    error_class   TEXT,
    error         TEXT,
    redelivery    INTEGER NOT NULL,
    at            TEXT    NOT NULL
);
CREATE INDEX attempts_by_obligation ON attempts (obligation_id, attempt);

-- A platform's "wait before sending again" (429 Retry-After), per chat, or
-- for the whole platform when chat_id is ''. Kept in the ledger so every
-- process and every restart honours it.
CREATE TABLE chat_holds (
    platform   TEXT NOT NULL,
    chat_id    TEXT NOT NULL,
    not_before TEXT NOT NULL,
    reason     TEXT NOT NULL,
    PRIMARY KEY (platform, chat_id)
);
