// Package e2e holds the end-to-end tests of petrel as many nodes: real
// `petrel serve` processes over PostgreSQL and NATS, started and faulted
// by scripts/cluster.sh (optionally behind a real HAProxy configured from
// deploy/haproxy.cfg), driven over WebSockets with internal/client. The
// package has no code outside its tests.
//
// It is a package of its own, not tests of cmd/petrel, because it tests
// the built binary from the outside as an operator runs it (the same
// script, the same HAProxy file), needs nothing of cmd/petrel's
// internals, and takes a minute or two: `go test ./internal/e2e` runs it
// alone, `go test ./cmd/petrel` stays quick.
//
// What it checks (each test logs its counts):
//   - TestExactlyOnce: an event accepted on any node reaches every
//     matching subscriber on every node exactly once, directly and
//     through HAProxy, and a REQ on any node finds it once its OK has
//     arrived;
//   - TestKillNode: kill -9 of a node while publishers write: no event
//     answered OK:true is lost, the other nodes keep serving (through
//     HAProxy too), their subscribers get every stored event once;
//   - TestNATSRestart: the bus server restarted mid-stream: subscribers
//     on every node end with every accepted event, none twice;
//   - TestPostgresRestart: the database stopped and started again: no
//     OK:true for an event that is not stored, writes answered
//     `OK false "error: ..."` and stored queries `CLOSED "error: ..."`
//     meanwhile, live delivery going on, /stats and /metrics saying so,
//     and writes recovering by themselves.
//
// They need the machine's PostgreSQL (PETREL_TEST_POSTGRES_URL, default
// postgres://postgres@127.0.0.1:5432/test) and NATS (PETREL_TEST_NATS_URL,
// default nats://127.0.0.1:4222), the PostgreSQL server binaries
// (initdb, pg_ctl) and nats-server for the private servers the fault
// tests stop, and haproxy; scripts/setup.sh installs them. A missing one
// fails the tests, unless PETREL_TEST_POSTGRES=skip, PETREL_TEST_NATS=skip
// or PETREL_TEST_E2E=skip says to skip them (or -short). PETREL_TEST_LOG=1
// prints the nodes' logs at the end of each test.
package e2e
