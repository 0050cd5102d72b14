-- petrel PostgreSQL store, schema version 1. Applied by Open inside the
-- store's schema (search_path), in one transaction, under the migration
-- advisory lock. docs/storage.md ("PostgreSQL backend") explains every
-- table and index; keep both in step.

-- Every stored event. id is the NIP-01 id (32 bytes), pubkey the author
-- (32 bytes). dkey is set for replaceable and addressable events only:
-- the address's d part (0x00 d, or 0x01 sha256(d) for d longer than 256
-- bytes; replaceable kinds have 0x00 alone). tagkeys are the event's
-- single-letter tag keys (see tags). doc_len, terms and tfreqs are its
-- NIP-50 analysis (terms sorted, tfreqs their frequencies), NULL when
-- it has nothing searchable. seq is the writing transaction's xid8
-- (store.SaveResult.Seq); accepted_at the server clock at insert.
CREATE TABLE events (
    id          bytea       NOT NULL PRIMARY KEY,
    pubkey      bytea       NOT NULL,
    created_at  bigint      NOT NULL,
    kind        integer     NOT NULL,
    dkey        bytea,
    expiration  bigint,
    tagkeys     bytea[]     NOT NULL,
    doc_len     integer,
    terms       bytea[],
    tfreqs      smallint[],
    seq         bigint      NOT NULL,
    accepted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    raw         bytea       NOT NULL
);

-- Newest-first streams: created_at descending, then id ascending, the
-- order Query returns. expiration is included so that a stream's
-- expiry check needs no heap visit (an index-only scan, where the
-- visibility map allows).
CREATE INDEX events_created     ON events (created_at DESC, id) INCLUDE (expiration);
CREATE INDEX events_pubkey      ON events (pubkey, created_at DESC, id) INCLUDE (expiration);
CREATE INDEX events_kind        ON events (kind, created_at DESC, id) INCLUDE (expiration);
CREATE INDEX events_pubkey_kind ON events (pubkey, kind, created_at DESC, id) INCLUDE (expiration);
-- One version per replaceable or addressable address, enforced by the
-- database whatever node writes.
CREATE UNIQUE INDEX events_address ON events (pubkey, kind, dkey) WHERE dkey IS NOT NULL;
CREATE INDEX events_expiration ON events (expiration) WHERE expiration IS NOT NULL;
CREATE INDEX events_accepted    ON events (accepted_at);
CREATE INDEX events_terms       ON events USING gin (terms) WHERE terms IS NOT NULL;

-- One row per (single-letter tag, value) of each stored event: tagkey is
-- the tag name byte, then 0x01 and 32 raw bytes for 64-character
-- lowercase hex values, 0x02 and the value for values up to 256 bytes,
-- 0x03 and sha256(value) for longer ones.
CREATE TABLE tags (
    tagkey     bytea   NOT NULL,
    created_at bigint  NOT NULL,
    id         bytea   NOT NULL,
    kind       integer NOT NULL
);
CREATE UNIQUE INDEX tags_key ON tags (tagkey, created_at DESC, id) INCLUDE (kind);

-- NIP-09 tombstones: ids deleted by their author ("e"), and addresses
-- deleted up to a created_at ("a"). Never purged.
CREATE TABLE deleted_ids (
    id      bytea NOT NULL,
    deleter bytea NOT NULL,
    PRIMARY KEY (id, deleter)
);
CREATE TABLE deleted_addrs (
    pubkey     bytea   NOT NULL,
    kind       integer NOT NULL,
    dkey       bytea   NOT NULL,
    created_at bigint  NOT NULL,
    PRIMARY KEY (pubkey, kind, dkey)
);

-- NIP-62: the newest request to vanish of each author. Never purged.
CREATE TABLE vanished (
    pubkey     bytea  NOT NULL PRIMARY KEY,
    created_at bigint NOT NULL
);

-- NIP-50 collection figures, one row per writing node (and 'base', into
-- which Open folds the rows of nodes that are gone): a query sums them,
-- so no row is updated by every node.
CREATE TABLE search_stats (
    node      text   NOT NULL PRIMARY KEY,
    docs      bigint NOT NULL,
    total_len bigint NOT NULL
);

-- Takes the writer's author locks, in the order given (the writer sorts
-- them, so that two writers never wait for each other in a cycle):
-- exclusive where excl is true, shared otherwise. They are held until
-- the transaction ends.
CREATE FUNCTION petrel_lock_authors(keys integer[], excl boolean[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(keys, 1), 0) LOOP
        IF excl[i] THEN
            PERFORM pg_advisory_xact_lock(1885697138, keys[i]);
        ELSE
            PERFORM pg_advisory_xact_lock_shared(1885697138, keys[i]);
        END IF;
    END LOOP;
END
$$;

-- Small named blobs kept beside the events (LoadMeta, SaveMeta): the
-- relay's NIP-86 lists and information, shared by every node.
CREATE TABLE meta (
    name  text  NOT NULL PRIMARY KEY,
    value bytea NOT NULL
);
