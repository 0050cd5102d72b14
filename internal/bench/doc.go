// Package bench is petrel's load client: the scenarios behind
// `petrel bench` (ingest, parallel, fanout, req, feed, search, conns,
// ladder), written to work against any NIP-01 relay, not only petrel.
//
// A run has three parts. First, everything that costs client CPU and is not
// part of the measurement is done up front: events are generated
// deterministically from a seed (Generator) and signed in parallel on all
// cores, and connections are dialed. Then the timed part runs, with the
// relay's CPU time and memory sampled from /proc when its pid is known
// (Sampler). Last, every count is checked: each EVENT sent must get exactly
// one OK, each expected delivery must arrive exactly once, and every CLOSED
// and NOTICE is counted. Whatever went wrong is listed in Result.Failures,
// which the command turns into the first line of its output and a non-zero
// exit code: a run never hides a lost message behind a good rate.
//
// Scenario functions (Ingest, Parallel, Fanout, Req, Feed, Search, Conns,
// Ladder) take an Options value and return a *Result; they return an error
// only for options that cannot be run at all. They are bounded in count and
// time (Options.Timeout) and refuse targets outside 127.0.0.0/8 and ::1
// unless Options.AllowRemote is set.
//
// Connections use github.com/gorilla/websocket with one reader goroutine
// per connection (Conn); relay messages are parsed with
// nostr.ParseRelayMessage and handed to the scenario's handler on that
// goroutine. Subscribers that only count deliveries of events they already
// know (fanout, conns) read EVENT messages on a fast path that extracts the
// subscription id and event id without parsing the event
// (DialConfig.FastEvents): with full parsing the client spent more CPU per
// delivery than the relay on the 2-core development machine.
//
// The conns scenario's many idle connections are the exception (lean.go):
// they are dialled and upgraded in blocking mode by a few goroutines, then
// handed to one nbio poller (the vendored, patched third_party/nbio) that
// reads them all into one shared buffer and parses WebSocket frames
// itself, so an idle connection has no goroutine and no buffer of its own
// (a few hundred bytes of Go heap: nbio's Conn and the subscription's
// counters). It answers pings, inflates permessage-deflate, and speaks
// ws:// only. Above the per-process file limit, the conns scenario runs
// worker subprocesses speaking JSON lines (RunConnsWorker).
//
// Latencies are recorded in log-linear histograms (Hist) whose
// percentiles are within 0.4% of the exact nearest-rank value. The
// ladder's OK latency is measured from each event's scheduled send time,
// so that a late generator cannot hide queueing (coordinated omission);
// the generator's lag is reported beside it, and a step whose generator
// fell behind by more than 3% of the hold is excluded from the knee and
// capacity.
package bench
