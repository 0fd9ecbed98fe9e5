CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agents (
	id            TEXT PRIMARY KEY,
	data          BLOB NOT NULL,
	expires_at    INTEGER NOT NULL,
	registered_at INTEGER NOT NULL,
	last_seen     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_caps (
	capability TEXT NOT NULL,
	agent_id   TEXT NOT NULL,
	PRIMARY KEY (capability, agent_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS agent_caps_agent ON agent_caps(agent_id);

CREATE TABLE IF NOT EXISTS messages (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT,
	id              TEXT NOT NULL UNIQUE,
	sender          TEXT NOT NULL,
	receiver        TEXT NOT NULL,
	state           INTEGER NOT NULL,        -- 0 queued, 1 terminal
	status          TEXT NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	code            INTEGER NOT NULL DEFAULT 0,
	last_error      TEXT NOT NULL DEFAULT '',
	reply           BLOB,
	history         TEXT NOT NULL DEFAULT '[]',
	claim_until     INTEGER NOT NULL DEFAULT 0,
	next_at         INTEGER NOT NULL DEFAULT 0,
	expires_at      INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	conversation_id TEXT,
	correlation_id  TEXT,
	body            BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_queue ON messages(receiver, sender, seq) WHERE state = 0;
CREATE INDEX IF NOT EXISTS messages_expiry ON messages(expires_at) WHERE state = 0;
CREATE INDEX IF NOT EXISTS messages_done ON messages(updated_at) WHERE state = 1;
CREATE INDEX IF NOT EXISTS messages_corr ON messages(correlation_id, seq) WHERE correlation_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_conv ON messages(conversation_id, seq) WHERE conversation_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS lanes (
	receiver    TEXT NOT NULL,
	sender      TEXT NOT NULL,
	pending     INTEGER NOT NULL,
	next_at     INTEGER NOT NULL,
	parked      INTEGER NOT NULL DEFAULT 0,
	claim_until INTEGER NOT NULL DEFAULT 0,
	owner       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (receiver, sender)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lanes_due ON lanes(next_at) WHERE pending > 0 AND parked = 0;

CREATE TABLE IF NOT EXISTS conversations (
	id              TEXT PRIMARY KEY,
	created_at      INTEGER NOT NULL,
	last_message_at INTEGER NOT NULL,
	messages        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS conversations_recent ON conversations(last_message_at);
CREATE TABLE IF NOT EXISTS participants (
	conversation_id TEXT NOT NULL,
	agent_id        TEXT NOT NULL,
	trace_id        TEXT NOT NULL DEFAULT '',
	joined_at       INTEGER NOT NULL,
	PRIMARY KEY (conversation_id, agent_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS participants_agent ON participants(agent_id);

CREATE TABLE IF NOT EXISTS records (
	kind       TEXT NOT NULL,
	id         TEXT NOT NULL,
	idx        TEXT NOT NULL DEFAULT '',
	data       BLOB NOT NULL,
	version    INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (kind, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_idx ON records(kind, idx, updated_at);
