-- Switchboard's PostgreSQL schema, version 1.
--
-- Times are timestamptz; "never" / "not set" is 0001-01-01 00:00:00+00 (Go's
-- zero time), which sorts before every real time, so "claim_until <= now"
-- and "next_at <= now" need no NULL handling.

CREATE TABLE agents (
	id            text PRIMARY KEY,
	data          bytea NOT NULL,             -- JSON of core.Agent
	capabilities  text[] NOT NULL DEFAULT '{}', -- capabilities and card tools
	expires_at    timestamptz NOT NULL,
	registered_at timestamptz NOT NULL,
	last_seen     timestamptz NOT NULL
);
CREATE INDEX agents_capabilities ON agents USING gin (capabilities);

CREATE TABLE messages (
	seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id              text NOT NULL UNIQUE,
	sender          text NOT NULL,
	receiver        text NOT NULL,
	state           smallint NOT NULL,        -- 0 queued, 1 terminal
	status          text NOT NULL,
	attempts        integer NOT NULL DEFAULT 0,
	code            integer NOT NULL DEFAULT 0,
	last_error      text NOT NULL DEFAULT '',
	reply           bytea,
	history         jsonb NOT NULL DEFAULT '[]', -- at most 64 events
	claim_until     timestamptz NOT NULL DEFAULT '0001-01-01 00:00:00+00', -- pull lease
	next_at         timestamptz NOT NULL DEFAULT '0001-01-01 00:00:00+00', -- next retry
	expires_at      timestamptz NOT NULL,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	conversation_id text,
	correlation_id  text,
	body            bytea NOT NULL            -- JSON of core.Message, byte for byte
);
CREATE INDEX messages_lane ON messages (receiver, sender, seq) WHERE state = 0;
CREATE INDEX messages_receiver ON messages (receiver, seq) WHERE state = 0;
CREATE INDEX messages_expiry ON messages (expires_at) WHERE state = 0;
CREATE INDEX messages_done ON messages (updated_at) WHERE state = 1;
CREATE INDEX messages_dead ON messages (receiver, updated_at) WHERE state = 1 AND status IN ('timeout', 'rejected');
CREATE INDEX messages_correlation ON messages (correlation_id, seq) WHERE correlation_id IS NOT NULL;
CREATE INDEX messages_conversation ON messages (conversation_id, seq) WHERE conversation_id IS NOT NULL;

-- A lane is a (sender, receiver) pair with queued messages: the unit of
-- ordering, retry backoff, parking and claiming.
CREATE TABLE lanes (
	receiver    text NOT NULL,
	sender      text NOT NULL,
	pending     integer NOT NULL,             -- queued messages
	next_at     timestamptz NOT NULL,         -- due time
	parked      boolean NOT NULL DEFAULT false,
	claim_until timestamptz NOT NULL DEFAULT '0001-01-01 00:00:00+00',
	owner       text NOT NULL DEFAULT '',
	PRIMARY KEY (receiver, sender)
);
CREATE INDEX lanes_due ON lanes (next_at) WHERE pending > 0 AND NOT parked;

CREATE TABLE conversations (
	id              text PRIMARY KEY,
	created_at      timestamptz NOT NULL,
	last_message_at timestamptz NOT NULL,
	messages        integer NOT NULL DEFAULT 0
);
CREATE INDEX conversations_recent ON conversations (last_message_at);

CREATE TABLE participants (
	conversation_id text NOT NULL,
	agent_id        text NOT NULL,
	trace_id        text NOT NULL DEFAULT '',
	joined_at       timestamptz NOT NULL,
	PRIMARY KEY (conversation_id, agent_id)
);
CREATE INDEX participants_agent ON participants (agent_id);

CREATE TABLE records (
	kind       text NOT NULL,
	id         text NOT NULL,
	idx        text NOT NULL DEFAULT '',
	data       bytea NOT NULL,
	version    bigint NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (kind, id)
);
CREATE INDEX records_idx ON records (kind, idx, updated_at);
