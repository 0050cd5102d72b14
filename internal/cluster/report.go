package cluster

import (
	"github.com/petrel-relay/petrel/internal/relay"
)

var (
	_ relay.Bus          = (*Bridge)(nil)
	_ relay.FanoutGate   = (*Bridge)(nil)
	_ relay.BusReporter  = (*Bridge)(nil)
	_ relay.PolicyHinter = (*Bridge)(nil)
	_ relay.RateSharer   = (*Bridge)(nil)
	_ relay.ConnSharer   = (*Bridge)(nil)
)

// Report implements relay.BusReporter: the bridge's Stats, shown under
// "cluster" in /stats.
func (b *Bridge) Report() any { return b.Stats() }

// Gauges implements relay.BusReporter: the numeric figures of Stats, for
// /metrics (petrel_cluster_<name>).
func (b *Bridge) Gauges() []relay.BusGauge {
	s := b.Stats()
	up := 0.0
	if s.Connected {
		up = 1
	}
	c := func(name, help string, v int64) relay.BusGauge {
		return relay.BusGauge{Name: name, Help: help, Value: float64(v), Counter: true}
	}
	return []relay.BusGauge{
		{Name: "connected", Help: "1 while this node's bus connection is up.", Value: up},
		c("disconnects_total", "Times this node's bus connection dropped.", s.Disconnects),
		c("reconnects_total", "Times it came back.", s.Reconnects),
		c("published_total", "Events this node handed to the bus.", s.Published),
		c("publish_drops_total", "Events this node could not hand to the bus (the other nodes catch them up from the store).", s.PublishDrops),
		c("received_total", "Events received from other nodes.", s.Received),
		c("heartbeats_received_total", "Heartbeats received from other nodes.", s.Heartbeats),
		c("echoes_ignored_total", "This node's own messages heard back.", s.EchoesIgnored),
		c("bad_messages_total", "Bus messages that were not a readable envelope or event.", s.BadMessages),
		c("duplicates_skipped_total", "Events from the bus or a catch-up this node had fanned out already.", s.DuplicatesSkipped),
		c("deleted_skipped_total", "Events from the bus or a catch-up removed by a deletion seen first.", s.DeletedSkipped),
		c("expired_skipped_total", "Events from the bus or a catch-up already expired (NIP-40).", s.ExpiredSkipped),
		c("gaps_detected_total", "Breaks in another node's bus sequence.", s.GapsDetected),
		c("messages_lost_total", "Bus messages lost, by the sizes of the gaps.", s.MessagesLost),
		c("slow_consumer_drops_total", "Messages NATS dropped because this node did not keep up.", s.SlowConsumerDrops),
		c("origins_silent_total", "Times another node went unheard past the silence timeout.", s.OriginsSilent),
		{Name: "origins", Help: "Other nodes heard lately.", Value: float64(s.Origins)},
		c("catchups_total", "Catch-ups from the store completed.", s.CatchUps),
		c("caught_up_events_total", "Events catch-ups handed on for fan-out (one the bus also brought meanwhile is fanned out once).", s.CaughtUp),
		c("catchup_errors_total", "Catch-ups that failed (they are retried).", s.CatchUpErrors),
		{Name: "dedup_size", Help: "Ids in the de-duplication window.", Value: float64(s.DedupSize)},
		c("dedup_overflows_total", "Ids dropped early from the full de-duplication window.", s.DedupOverflows),
		c("dedup_short_total", "Catch-ups that reached back past what the window held.", s.DedupShort),
		c("policy_hints_sent_total", "Hints that the NIP-86 state changed through this node, sent to the others.", s.PolicyHintsSent),
		c("policy_hints_received_total", "Such hints from other nodes (each makes this node read the state again).", s.PolicyHintsReceived),
		c("rate_shares_sent_total", "Messages of what this node's rate limits took, sent to the other nodes.", s.RateSharesSent),
		c("rate_shares_received_total", "Such messages from other nodes, taken from this node's rate-limit buckets.", s.RateSharesReceived),
		c("conn_shares_sent_total", "Messages of the client addresses holding many connections on this node, sent to the other nodes.", s.ConnSharesSent),
		c("conn_shares_received_total", "Such messages from other nodes, counted against server.max_connections_per_ip here.", s.ConnSharesReceived),
		c("connect_failures_total", "Attempts to reach the bus that failed (the log says why).", s.ConnectFailures),
		c("bus_errors_total", "Errors the NATS server reported for this node's messages or subscriptions, such as a permissions violation, and shares NATS would not send (larger than max_payload); the log says which.", s.BusErrors),
	}
}
