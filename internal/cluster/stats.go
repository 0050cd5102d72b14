package cluster

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a bridge's figures, for /stats and /metrics.
// Counters count since the bridge was created.
type Stats struct {
	Node    string `json:"node"`
	Subject string `json:"subject"`
	// Connected: the bus connection is up now.
	Connected   bool  `json:"connected"`
	Disconnects int64 `json:"disconnects"`
	Reconnects  int64 `json:"reconnects"`
	// LastOutageStart and LastOutageEnd: when this node last noticed its
	// bus connection drop, and when it came back (zero: never; End before
	// Start: the outage goes on).
	LastOutageStart time.Time `json:"last_outage_start,omitzero"`
	LastOutageEnd   time.Time `json:"last_outage_end,omitzero"`

	// Published: events this node handed to NATS. PublishDrops: events it
	// could not (its publish queue was full, the reconnect buffer was
	// full, the event exceeded the server's payload limit, or the bridge
	// was closed); the other nodes catch them up from the store.
	Published    int64 `json:"published"`
	PublishDrops int64 `json:"publish_drops"`

	// Received: events from other nodes. Heartbeats: heartbeats from
	// other nodes. EchoesIgnored: this node's own messages heard back.
	// BadMessages: messages that were not a readable envelope or event.
	Received      int64 `json:"received"`
	Heartbeats    int64 `json:"heartbeats_received"`
	EchoesIgnored int64 `json:"echoes_ignored"`
	BadMessages   int64 `json:"bad_messages"`
	// DuplicatesSkipped: events from the bus or a catch-up that this node
	// had fanned out already (the de-duplication window held them).
	DuplicatesSkipped int64 `json:"duplicates_skipped"`
	// DeletedSkipped: events from the bus or a catch-up that a deletion
	// or request to vanish seen first had removed.
	DeletedSkipped int64 `json:"deleted_skipped"`
	// ExpiredSkipped: events from the bus or a catch-up whose NIP-40
	// expiration had passed.
	ExpiredSkipped int64 `json:"expired_skipped"`

	// GapsDetected: breaks in another node's bus sequence (messages lost
	// on the way); MessagesLost adds up their sizes. SlowConsumerDrops:
	// messages NATS dropped because this node did not keep up (past
	// PendingMsgs or PendingBytes). OriginsSilent: times another node went
	// unheard for SilenceTimeout. Origins: the nodes heard lately.
	GapsDetected      int64 `json:"gaps_detected"`
	MessagesLost      int64 `json:"messages_lost"`
	SlowConsumerDrops int64 `json:"slow_consumer_drops"`
	OriginsSilent     int64 `json:"origins_silent"`
	Origins           int   `json:"origins"`

	// CatchUps: catch-ups from the store completed; CaughtUp: events they
	// handed to the relay for fan-out (the dispatcher fans each event out
	// once: one the bus also brought while a catch-up ran is counted here
	// and, where the dispatcher drops the second, in DuplicatesSkipped);
	// CatchUpErrors: catch-ups that failed (retried).
	CatchUps      int64 `json:"catchups"`
	CaughtUp      int64 `json:"caught_up_events"`
	CatchUpErrors int64 `json:"catchup_errors"`

	// DedupSize: ids in the de-duplication window. DedupOverflows: ids
	// dropped early because it was full. DedupShort: catch-ups that
	// reached back past what the window still held (they may have
	// repeated events).
	DedupSize      int   `json:"dedup_size"`
	DedupOverflows int64 `json:"dedup_overflows"`
	DedupShort     int64 `json:"dedup_short"`

	// PolicyHintsSent: hints that the NIP-86 state changed through this
	// node, sent to the others; PolicyHintsReceived: such hints from
	// other nodes (each makes the relay read the state again, at most
	// every 100 ms).
	PolicyHintsSent     int64 `json:"policy_hints_sent"`
	PolicyHintsReceived int64 `json:"policy_hints_received"`

	// RateSharesSent: messages of what this node's rate limits took,
	// sent to the others (one a limit every 100 ms while it takes any);
	// RateSharesReceived: such messages from other nodes, taken from
	// this node's buckets.
	RateSharesSent     int64 `json:"rate_shares_sent"`
	RateSharesReceived int64 `json:"rate_shares_received"`

	// ConnSharesSent: messages of the client addresses holding many
	// connections on this node, sent to the others (every 250 ms while
	// there are any); ConnSharesReceived: such messages from other nodes.
	ConnSharesSent     int64 `json:"conn_shares_sent"`
	ConnSharesReceived int64 `json:"conn_shares_received"`

	// ConnectFailures: attempts to reach the bus that failed (the server
	// down, the credentials or TLS refused). BusErrors: errors the NATS
	// server reported for this node's messages or subscriptions (a
	// permissions violation: the node's NATS user lacks the bus's
	// subjects), and rate or connection shares NATS would not send (one
	// larger than the server's max_payload). The log says why, once a
	// minute for each reason.
	ConnectFailures int64 `json:"connect_failures"`
	BusErrors       int64 `json:"bus_errors"`
}

// counters are the bridge's atomic counters.
type counters struct {
	disconnects, reconnects           atomic.Int64
	published, publishDrops           atomic.Int64
	received, heartbeats, echoes, bad atomic.Int64
	duplicates, deleted, expired      atomic.Int64
	gaps, lost, silent                atomic.Int64
	catchUps, caughtUp, catchUpErrors atomic.Int64
	dedupShort                        atomic.Int64
	policyHintsSent, policyHints      atomic.Int64
	ratesSent, ratesReceived          atomic.Int64
	connsSent, connsReceived          atomic.Int64
	connectFailures, busErrors        atomic.Int64
	lastOutageStart, lastOutageEnd    atomic.Int64 // unix nanos
}

// Stats returns a snapshot of the bridge's figures. It is safe to call at
// any time, from any goroutine.
func (b *Bridge) Stats() Stats {
	c := &b.st
	s := Stats{
		Node:                b.opts.Node,
		Subject:             b.opts.Subject,
		Disconnects:         c.disconnects.Load(),
		Reconnects:          c.reconnects.Load(),
		Published:           c.published.Load(),
		PublishDrops:        c.publishDrops.Load(),
		Received:            c.received.Load(),
		Heartbeats:          c.heartbeats.Load(),
		EchoesIgnored:       c.echoes.Load(),
		BadMessages:         c.bad.Load(),
		DuplicatesSkipped:   c.duplicates.Load(),
		DeletedSkipped:      c.deleted.Load(),
		ExpiredSkipped:      c.expired.Load(),
		GapsDetected:        c.gaps.Load(),
		MessagesLost:        c.lost.Load(),
		OriginsSilent:       c.silent.Load(),
		CatchUps:            c.catchUps.Load(),
		CaughtUp:            c.caughtUp.Load(),
		CatchUpErrors:       c.catchUpErrors.Load(),
		DedupShort:          c.dedupShort.Load(),
		PolicyHintsSent:     c.policyHintsSent.Load(),
		PolicyHintsReceived: c.policyHints.Load(),
		RateSharesSent:      c.ratesSent.Load(),
		RateSharesReceived:  c.ratesReceived.Load(),
		ConnSharesSent:      c.connsSent.Load(),
		ConnSharesReceived:  c.connsReceived.Load(),
		ConnectFailures:     c.connectFailures.Load(),
		BusErrors:           c.busErrors.Load(),
	}
	if t := c.lastOutageStart.Load(); t != 0 {
		s.LastOutageStart = time.Unix(0, t)
	}
	if t := c.lastOutageEnd.Load(); t != 0 {
		s.LastOutageEnd = time.Unix(0, t)
	}
	s.DedupSize, s.DedupOverflows = b.win.size()
	b.mu.Lock()
	s.Origins = len(b.origins)
	nc, sub := b.nc, b.sub
	b.mu.Unlock()
	if nc != nil {
		s.Connected = nc.IsConnected()
	}
	if sub != nil {
		if n, err := sub.Dropped(); err == nil {
			b.droppedSeen.Store(int64(n))
		}
	}
	s.SlowConsumerDrops = b.droppedSeen.Load()
	return s
}

// Figure returns the figure of s under its /stats key (in "cluster"):
// the counters and gauges the dashboard charts, connected as 1 or 0.
// ok is false for a key it does not chart.
func (s Stats) Figure(key string) (v int64, ok bool) {
	switch key {
	case "connected":
		if s.Connected {
			return 1, true
		}
		return 0, true
	case "origins":
		return int64(s.Origins), true
	case "published":
		return s.Published, true
	case "received":
		return s.Received, true
	case "caught_up_events":
		return s.CaughtUp, true
	case "messages_lost":
		return s.MessagesLost, true
	case "bus_errors":
		return s.BusErrors, true
	}
	return 0, false
}
