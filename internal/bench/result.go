package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is what a scenario measured. Failures lists every way the run
// fell short of exact (lost deliveries, missing OKs, refusals, timeouts,
// dropped connections); a Result with failures must not be quoted as a
// figure without them.
type Result struct {
	Scenario string         `json:"scenario"`
	URL      string         `json:"url"`
	Started  time.Time      `json:"started"`
	Params   map[string]any `json:"params"`
	// Failures: empty (never null) when the run was exact.
	Failures []string `json:"failures"`
	// Notes are facts about the run that are not failures (for example a
	// limit the relay clamped).
	Notes []string `json:"notes,omitempty"`
	// Seconds is the duration of the timed part.
	Seconds float64 `json:"seconds"`

	OK          *OKCounts        `json:"ok,omitempty"`
	Deliveries  *Deliveries      `json:"deliveries,omitempty"`
	Closed      map[string]int64 `json:"closed,omitempty"`  // CLOSED received, by message
	Notices     map[string]int64 `json:"notices,omitempty"` // NOTICE received, by message
	Disconnects int64            `json:"disconnects"`       // connections the relay (or network) ended
	BadMessages int64            `json:"bad_messages"`      // relay messages that did not parse
	// Rates are per second over Seconds: "accepted_events",
	// "deliveries", "requests".
	Rates map[string]float64 `json:"rates_per_s,omitempty"`
	// Latency digests: "ok" (EVENT sent to its OK), "delivery" (EVENT sent
	// to a subscriber's copy), "delivery_from_ok" (the publisher's OK to
	// a subscriber's copy; 0 when the copy came first), "eose" (REQ sent
	// to EOSE), "connect"
	// (dial, upgrade and first EOSE of a conns-scenario connection).
	Latency map[string]Summary `json:"latency,omitempty"`

	Fill    *FillResult   `json:"fill,omitempty"`
	Queries *QueryStats   `json:"queries,omitempty"`
	Conns   *ConnsStats   `json:"conns,omitempty"`
	Ladder  *LadderResult `json:"ladder,omitempty"`

	// Relay is the relay process's use (with Options.PID); Client is this
	// process's (worker subprocesses of the conns scenario not included).
	Relay  *Usage `json:"relay,omitempty"`
	Client *Usage `json:"client,omitempty"`

	// Wire is what the relay sent on the wire during the timed part.
	Wire *WireStats `json:"wire,omitempty"`
}

// WireStats are the bytes the scenario's connections read from the relay
// (TCP payload: WebSocket frames, compressed where negotiated) during the
// timed part.
type WireStats struct {
	// Compress: the connections offered permessage-deflate (--compress);
	// Negotiated counts those the relay accepted it on.
	Compress   bool  `json:"compress"`
	Negotiated int64 `json:"negotiated"`
	BytesIn    int64 `json:"bytes_in"`
	// PerDelivery is BytesIn per live delivery (fanout); PerRequest per
	// answered REQ (req, feed, search).
	PerDelivery float64 `json:"per_delivery,omitempty"`
	PerRequest  float64 `json:"per_request,omitempty"`
}

// OKCounts tallies EVENTs sent and the OKs that answered them.
type OKCounts struct {
	Sent int64 `json:"sent"`
	// Accepted counts OK true; AcceptedWithPrefix counts the OK true
	// messages carrying a prefix (such as "duplicate"), by prefix:
	// those events were not new.
	Accepted           int64            `json:"accepted"`
	AcceptedWithPrefix map[string]int64 `json:"accepted_with_prefix,omitempty"`
	// Refused counts OK false by prefix (the message up to ':').
	Refused map[string]int64 `json:"refused,omitempty"`
	// Missing counts EVENTs sent whose OK never came.
	Missing int64 `json:"missing"`
	// Unexpected counts OKs for an unknown id and second OKs for one id.
	Unexpected int64 `json:"unexpected"`
}

// RefusedTotal returns the number of OK false.
func (c *OKCounts) RefusedTotal() int64 {
	var n int64
	for _, v := range c.Refused {
		n += v
	}
	return n
}

// Deliveries tallies live events received by subscribers.
type Deliveries struct {
	// Expected is subscribers times accepted new events.
	Expected   int64 `json:"expected"`
	Received   int64 `json:"received"`   // distinct expected deliveries
	Duplicated int64 `json:"duplicated"` // second and later copies
	Missing    int64 `json:"missing"`    // Expected - Received
	// Unexpected counts live events that were not among the expected ones
	// (another client's, or an event whose OK was not true).
	Unexpected int64 `json:"unexpected"`
}

// FillResult describes events stored before a query scenario.
type FillResult struct {
	Events   int       `json:"events"`
	Seconds  float64   `json:"seconds"`
	OK       *OKCounts `json:"ok"`
	Accepted float64   `json:"accepted_per_s"`
}

// QueryStats describes the REQs of req, feed and search.
type QueryStats struct {
	Requests  int64  `json:"requests"`
	Completed int64  `json:"completed"` // answered with EOSE
	Closed    int64  `json:"closed"`    // answered with CLOSED
	TimedOut  int64  `json:"timed_out"`
	Filters   string `json:"filters"` // the shape of the REQ sent
	// Events per completed REQ.
	EventsTotal int64 `json:"events_total"`
	EventsMin   int64 `json:"events_min"`
	EventsMax   int64 `json:"events_max"`
	// Mismatched counts events returned that do not match the REQ's filters
	// (for search: that do not contain the word); Unordered counts
	// responses not in descending created_at order; DupInResponse counts
	// events returned twice in one response.
	Mismatched    int64 `json:"mismatched"`
	Unordered     int64 `json:"unordered"`
	DupInResponse int64 `json:"duplicates_in_response"`
	// Bytes is the total size of the EVENT messages received.
	Bytes int64 `json:"bytes"`
}

// Fail records a failure.
func (r *Result) Fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// Note records a fact that is not a failure.
func (r *Result) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Failed reports whether the run had any failure.
func (r *Result) Failed() bool { return len(r.Failures) > 0 }

// Headline returns the first line of the human output: "FAIL <scenario>:
// <failures>" or "OK <scenario>: <main figures>". OK means the run was
// exact (nothing lost, nothing unanswered), not that the relay was fast.
func (r *Result) Headline() string {
	if r.Failed() {
		return fmt.Sprintf("FAIL %s: %s", r.Scenario, strings.Join(r.Failures, "; "))
	}
	var parts []string
	if v, ok := r.Rates["accepted_events"]; ok && r.Scenario != ScenarioFanout {
		parts = append(parts, fmt.Sprintf("%s events accepted/s", human(v)))
	}
	if v, ok := r.Rates["deliveries"]; ok {
		parts = append(parts, fmt.Sprintf("%s deliveries/s", human(v)))
	}
	if v, ok := r.Rates["requests"]; ok {
		parts = append(parts, fmt.Sprintf("%s requests/s", human(v)))
	}
	order := []string{"ok", "delivery", "eose", "connect"}
	switch r.Scenario {
	case ScenarioFanout, ScenarioConns:
		order = []string{"delivery", "connect"}
	case ScenarioLadder:
		order = nil
	}
	for _, k := range order {
		if s, ok := r.Latency[k]; ok && s.Count > 0 {
			parts = append(parts, fmt.Sprintf("%s p50 %s p99 %s", k, ms(s.P50), ms(s.P99)))
			break
		}
	}
	if r.Conns != nil {
		parts = append(parts, fmt.Sprintf("%d connections held", r.Conns.Held))
	}
	if l := r.Ladder; l != nil {
		if l.Knee != nil {
			parts = append(parts, fmt.Sprintf("knee %s/s", human(l.Knee.Offered)))
		} else {
			parts = append(parts, "no passing step")
		}
		parts = append(parts, fmt.Sprintf("capacity %s/s", human(l.Capacity)))
	}
	return fmt.Sprintf("OK %s: %s", r.Scenario, strings.Join(parts, ", "))
}

// WriteText writes the human report: the headline, then a table.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(r.Headline())
	b.WriteByte('\n')
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("scenario", "%s  %s  %.2f s timed  started %s", r.Scenario, r.URL, r.Seconds, r.Started.UTC().Format(time.RFC3339))
	row("params", "%s", formatParams(r.Params))
	for i, f := range r.Failures {
		row(fmt.Sprintf("failure %d", i+1), "%s", f)
	}
	if f := r.Fill; f != nil {
		row("fill", "%d events in %.2f s (%s accepted/s): %s", f.Events, f.Seconds, human(f.Accepted), formatOK(f.OK))
	}
	if r.OK != nil {
		row("events", "%s", formatOK(r.OK))
	}
	if d := r.Deliveries; d != nil {
		row("deliveries", "expected %d  received %d  duplicated %d  missing %d  unexpected %d",
			d.Expected, d.Received, d.Duplicated, d.Missing, d.Unexpected)
	}
	if q := r.Queries; q != nil {
		row("requests", "%d sent  %d EOSE  %d CLOSED  %d timed out", q.Requests, q.Completed, q.Closed, q.TimedOut)
		avg := 0.0
		if q.Completed > 0 {
			avg = float64(q.EventsTotal) / float64(q.Completed)
		}
		row("results", "%.1f events/REQ (min %d, max %d)  %s received  mismatched %d  unordered %d  duplicates %d",
			avg, q.EventsMin, q.EventsMax, humanBytes(q.Bytes), q.Mismatched, q.Unordered, q.DupInResponse)
		row("REQ", "%s", q.Filters)
	}
	if c := r.Conns; c != nil {
		row("connections", "target %d  opened %d  subscribed %d  held %d  failed %d  processes %d  source addresses %d (%s)",
			c.Target, c.Opened, c.Subscribed, c.Held, c.DialFailed, c.Processes, c.SourceAddrs, c.SourceRange)
		row("connect", "%.2f s for all  (%s conns/s)", c.ConnectSeconds, human(c.ConnectRate))
		row("liveness", "expected %d  received %d  missing %d  duplicated %d", c.LivenessExpected, c.LivenessReceived, c.LivenessMissing, c.LivenessDuplicated)
		if c.RelayRSSPerConn != 0 {
			row("relay memory", "%.1f KiB per held connection ((peak sampled RSS - RSS at start) / held)", c.RelayRSSPerConn/1024)
			if c.RelayIdleRSSPerConn > 0 {
				row("relay idle memory", "%.2f KiB per connection ((RSS after the hold, before the liveness event - RSS at start) / subscribed)", c.RelayIdleRSSPerConn/1024)
			}
		}
		if c.Nodes > 1 || c.LiveEvents > 1 {
			row("spread", "%d nodes  %d liveness events  last delivery %.3f s after the first OK", c.Nodes, c.LiveEvents, c.LastDeliverySeconds)
		}
		if c.RelaysIdleRSSPerConn != 0 {
			row("relays idle memory", "%.2f KiB per connection (summed over every relay process; private %.2f KiB)", c.RelaysIdleRSSPerConn/1024, c.RelaysIdleAnonPerConn/1024)
		}
		if c.Subscribed > 0 {
			row("kernel memory", "sockstat TCP mem %.2f KiB, slab %.2f KiB per connection (machine-wide growth over the hold; both ends)", c.KernelSockMemPerConn/1024, c.KernelSlabPerConn/1024)
		}
		if c.ClientRSSPerConn != 0 {
			row("client memory", "%.2f KiB per connection (every client process), %.2f KiB private (RssAnon)", c.ClientRSSPerConn/1024, c.ClientAnonPerConn/1024)
		}
		for _, e := range c.Errors {
			row("conn error", "%s", e)
		}
	}
	if len(r.Rates) > 0 {
		row("rates", "%s", formatRates(r.Rates))
	}
	for _, k := range sortedKeys(r.Latency) {
		s := r.Latency[k]
		row("latency "+k, "n %d  p50 %s  p90 %s  p99 %s  max %s  mean %s", s.Count, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), ms(s.Mean))
	}
	if len(r.Closed) > 0 {
		row("CLOSED", "%s", formatCounts(r.Closed))
	}
	if len(r.Notices) > 0 {
		row("NOTICE", "%s", formatCounts(r.Notices))
	}
	if r.Disconnects > 0 || r.BadMessages > 0 {
		row("errors", "%d connections dropped by the relay  %d unparseable messages", r.Disconnects, r.BadMessages)
	}
	if u := r.Relay; u != nil {
		row("relay", "%s", formatUsage(u))
	}
	if w := r.Wire; w != nil && w.BytesIn > 0 {
		z := "off"
		if w.Compress {
			z = fmt.Sprintf("offered, negotiated on %d connections", w.Negotiated)
		}
		per := ""
		if w.PerDelivery > 0 {
			per += fmt.Sprintf("  %.1f B per delivery", w.PerDelivery)
		}
		if w.PerRequest > 0 {
			per += fmt.Sprintf("  %s per REQ", humanBytes(int64(w.PerRequest)))
		}
		row("wire", "%s read from the relay%s  (compression %s)", humanBytes(w.BytesIn), per, z)
	}
	if u := r.Client; u != nil {
		row("client", "%s", formatUsage(u))
	}
	for _, n := range r.Notes {
		row("note", "%s", n)
	}
	tw.Flush()
	if l := r.Ladder; l != nil {
		b.WriteString(l.table())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatOK(c *OKCounts) string {
	s := fmt.Sprintf("sent %d  accepted %d  refused %d  missing OKs %d", c.Sent, c.Accepted, c.RefusedTotal(), c.Missing)
	if len(c.Refused) > 0 {
		s += "  refused by reason: " + formatCounts(c.Refused)
	}
	if len(c.AcceptedWithPrefix) > 0 {
		s += "  accepted with prefix: " + formatCounts(c.AcceptedWithPrefix)
	}
	if c.Unexpected > 0 {
		s += fmt.Sprintf("  unexpected OKs %d", c.Unexpected)
	}
	return s
}

func formatUsage(u *Usage) string {
	if u.Err != "" && u.Samples == 0 {
		return "pid " + fmt.Sprint(u.PID) + ": " + u.Err
	}
	s := fmt.Sprintf("pid %d  cpu %.2f s  rss start %s  peak %s (sampled)  VmHWM %s",
		u.PID, u.CPUSeconds, humanBytes(u.RSSStartBytes), humanBytes(u.RSSPeakBytes), humanBytes(u.HWMBytes))
	if u.CPUMicrosPerEvent > 0 {
		s += fmt.Sprintf("  %.1f cpu-µs/accepted event", u.CPUMicrosPerEvent)
	}
	if u.CPUMicrosPerDelivery > 0 {
		s += fmt.Sprintf("  %.2f cpu-µs/delivery", u.CPUMicrosPerDelivery)
	}
	if u.CPUMicrosPerRequest > 0 {
		s += fmt.Sprintf("  %.0f cpu-µs/request", u.CPUMicrosPerRequest)
	}
	if u.CPUMicrosPerConn > 0 {
		s += fmt.Sprintf("  %.0f cpu-µs/connection", u.CPUMicrosPerConn)
	}
	if u.Err != "" {
		s += "  (error: " + u.Err + ")"
	}
	return s
}

func formatCounts(m map[string]int64) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%q×%d", k, m[k])
	}
	return strings.Join(parts, "  ")
}

func formatRates(m map[string]float64) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s/s", k, human(m[k]))
	}
	return strings.Join(parts, "  ")
}

func formatParams(m map[string]any) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m[k])
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func ms(v float64) string {
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 100:
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// human formats a rate with thousands separators.
func human(v float64) string {
	if v < 100 {
		return fmt.Sprintf("%.1f", v)
	}
	s := fmt.Sprintf("%.0f", v)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func humanBytes(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 10<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
