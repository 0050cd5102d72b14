-- Events held unverified (relay.verify_mode = "optimistic",
-- store.Unverified): durable, never served, never applied, until their
-- signature is checked. Keyed by id and signature, so a forged copy of an
-- id cannot keep the genuine one out.
CREATE TABLE unverified_events (
    id      bytea       NOT NULL,
    sig     bytea       NOT NULL,
    raw     bytea       NOT NULL,
    held_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (id, sig)
);
CREATE INDEX unverified_events_held_at ON unverified_events (held_at);
