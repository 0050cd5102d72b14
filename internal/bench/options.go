package bench

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"
)

// Scenario names, as given to `petrel bench`.
const (
	ScenarioIngest   = "ingest"
	ScenarioParallel = "parallel"
	ScenarioFanout   = "fanout"
	ScenarioReq      = "req"
	ScenarioFeed     = "feed"
	ScenarioSearch   = "search"
	ScenarioConns    = "conns"
	ScenarioLadder   = "ladder"
)

// Scenarios lists every scenario name.
var Scenarios = []string{ScenarioIngest, ScenarioParallel, ScenarioFanout, ScenarioReq, ScenarioFeed, ScenarioSearch, ScenarioConns, ScenarioLadder}

// Options configure a scenario. Zero fields take the default named in
// their comment, which may depend on the scenario (see Normalize).
type Options struct {
	// URL is the relay's WebSocket URL. Required.
	URL string
	// AllowRemote permits a target outside 127.0.0.0/8 and ::1.
	AllowRemote bool

	// Seed selects the generated authors and events. Default 0.
	Seed uint64
	// Authors is the number of generated authors. Default 100.
	Authors int
	// Text is how generated content is written: TextVocabulary (default,
	// 248 words) or TextNatural (Zipf over NaturalWords words; see
	// GenConfig.Text).
	Text string
	// CreatedAt pins the created_at of the first generated event (unix
	// seconds), so that the same Seed gives byte-identical events across
	// runs. Default 0: derived from the clock so the newest event is now.
	CreatedAt int64

	// Events is the number of events published: ingest and parallel
	// default 10000, fanout 1000.
	Events int
	// Window is the number of events in flight (sent, OK not yet received)
	// per publishing connection. Default 64.
	Window int
	// Conns is the number of connections: parallel and ladder default 8,
	// conns 1000, req/feed/search 1 (concurrent queriers).
	Conns int
	// Subs is the number of fanout subscribers. Default 100.
	Subs int
	// Pubs is the number of fanout publishing connections. Default 1.
	Pubs int

	// Fill is the number of events stored before req, feed and search are
	// measured. Default 10000; negative: store nothing, query what is
	// there.
	Fill int
	// Requests is the number of REQs measured by req, feed and search.
	// Default 200.
	Requests int
	// Limit is the number of events the req scenario asks for. Default
	// 1000. Above the relay's NIP-11 max_limit the request is split into
	// several filters over disjoint author sets (the result says so).
	Limit int

	// Rates are the ladder's offered rates in events per second. Default
	// 1000, 2000, 4000, 8000, 16000.
	Rates []float64
	// Hold is how long each ladder step lasts, and how long the conns
	// scenario holds its connections idle before the liveness check.
	// Default 5s.
	Hold time.Duration
	// MaxP99 is the ladder's latency bound for a passing step. Default
	// 15ms.
	MaxP99 time.Duration
	// MaxErrorRate is the ladder's bound on refused plus unanswered events
	// per sent event for a passing step and for capacity. Default 0.001.
	MaxErrorRate float64
	// MaxEvents bounds the events any scenario pre-signs (Events, Fill, or
	// for the ladder the sum of rate times hold over all steps), so that a
	// typo cannot exhaust memory. Default 1,000,000.
	MaxEvents int

	// PerIP is the number of connections per source address: against a
	// loopback target, a scenario opening more connections than PerIP
	// (conns always) binds them to 127.0.0.2, 127.0.0.3, ... in groups of
	// PerIP, so neither ephemeral ports nor a relay's per-IP cap limit the
	// count (set it at or below the relay's cap). Default 100; negative:
	// do not bind source addresses.
	PerIP int
	// PerProcess is the most connections one process holds in the conns
	// scenario; above it worker subprocesses are started. Default 15000,
	// lowered to fit the open-file limit.
	PerProcess int
	// WorkerCommand starts one conns worker process (argv) that runs
	// RunConnsWorker on its stdin and stdout. Required when the conns
	// scenario needs more than one process.
	WorkerCommand []string
	// DialConcurrency is the number of connections being opened at once.
	// Default 64.
	DialConcurrency int

	// Timeout bounds the whole scenario, signing excluded (its clock
	// stands still while events are signed). Default 120s; for the
	// ladder, 60s plus Hold and the drain's allowance (drainStall) per
	// step, so that a default ladder is never cut short by its own
	// timeout.
	Timeout time.Duration
	// PID, if not 0, is the relay's process id: its CPU time and memory
	// are read from /proc during the measurement.
	PID int
	// OKTrace, if set, is a petrel relay's debug listener
	// (server.pprof_listen, as http://host:port): the ladder traces each
	// step's OKs there (/debug/petrel/oktrace/) and splits the step's
	// latency into before the relay's parse, inside the relay and after
	// its OK was queued (LadderStep.OKTrace). Same host only: the split
	// compares the client's clock with the relay's.
	OKTrace string
	// Progress, if not nil, is told what the scenario is doing.
	Progress Progress

	// SlowSubs makes that many fanout subscribers slow readers: they sleep
	// SlowReadDelay (default 20ms) before handling each message and use a
	// SlowReadBuffer-byte socket receive buffer (default 4096). For
	// checking how a relay treats slow consumers, and that the bench
	// reports what they lose.
	SlowSubs       int
	SlowReadDelay  time.Duration
	SlowReadBuffer int

	// SubURL, if set, is where the fanout subscribers connect, while the
	// publishers use URL: with two nodes of a cluster it measures
	// cross-node delivery. Default URL.
	SubURL string
	// Rate, if above 0, paces fanout publishing open-loop at that many
	// events per second over all publishing connections (event i is due
	// at start + i/Rate; Window still caps the events in flight). Default
	// 0: as fast as the window allows.
	Rate float64
	// NodeURLs, if set, spreads the conns scenario's connections over
	// these relays (connection i to NodeURLs[i % len]), the nodes of one
	// cluster; the liveness events are still published to URL.
	NodeURLs []string
	// LiveEvents is the number of events the conns scenario publishes
	// after the hold, one after the other (each after the previous one's
	// OK); every subscription must receive each exactly once. Default 1,
	// at most 64.
	LiveEvents int
	// PIDs are more relay processes (the other nodes) whose RSS the conns
	// scenario sums with PID's for its idle memory per connection.
	PIDs []int
	// Compress makes every connection offer permessage-deflate (RFC
	// 7692); the result's wire figures then count compressed bytes.
	Compress bool
}

// Normalize returns o with the defaults for scenario filled in.
func (o Options) Normalize(scenario string) Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Authors, 100)
	def(&o.Window, 64)
	if o.Text == "" {
		o.Text = TextVocabulary
	}
	switch scenario {
	case ScenarioFanout:
		def(&o.Events, 1000)
	default:
		def(&o.Events, 10000)
	}
	switch scenario {
	case ScenarioConns:
		def(&o.Conns, 1000)
	case ScenarioReq, ScenarioFeed, ScenarioSearch:
		def(&o.Conns, 1)
	default:
		def(&o.Conns, 8)
	}
	def(&o.Subs, 100)
	def(&o.Pubs, 1)
	def(&o.Fill, 10000)
	if o.Fill < 0 {
		o.Fill = 0
	}
	def(&o.Requests, 200)
	def(&o.Limit, 1000)
	if len(o.Rates) == 0 {
		o.Rates = []float64{1000, 2000, 4000, 8000, 16000}
	}
	if o.Hold <= 0 {
		o.Hold = 5 * time.Second
	}
	if o.MaxP99 <= 0 {
		o.MaxP99 = 15 * time.Millisecond
	}
	if o.MaxErrorRate <= 0 {
		o.MaxErrorRate = 0.001
	}
	def(&o.MaxEvents, 1_000_000)
	def(&o.PerIP, 100)
	def(&o.PerProcess, defaultPerProcess())
	def(&o.DialConcurrency, 64)
	if o.Timeout <= 0 {
		o.Timeout = 120 * time.Second
		if scenario == ScenarioLadder {
			o.Timeout = 60*time.Second + time.Duration(len(o.Rates))*(o.Hold+drainStall)
		}
	}
	if o.SlowReadDelay <= 0 {
		o.SlowReadDelay = 20 * time.Millisecond
	}
	def(&o.SlowReadBuffer, 4096)
	return o
}

// defaultPerProcess is 15000 connections, or fewer when the open-file
// limit leaves less room (500 descriptors are kept for everything else).
func defaultPerProcess() int {
	var rl syscall.Rlimit
	n := 15000
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < uint64(n+500) {
		n = max(int(rl.Cur)-500, 100)
	}
	return n
}

// Errors returned for options that cannot run.
var (
	ErrRemote  = errors.New("bench: target is not a loopback address (use --allow-remote)")
	ErrOptions = errors.New("bench: invalid options")
)

// CheckTarget parses a ws:// or wss:// URL and refuses a host that is not
// loopback (127.0.0.0/8, ::1, or a name resolving only to those) unless
// allowRemote is set.
func CheckTarget(raw string, allowRemote bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: url %q: %v", ErrOptions, raw, err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return nil, fmt.Errorf("%w: url %q: scheme must be ws or wss", ErrOptions, raw)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%w: url %q has no host", ErrOptions, raw)
	}
	if allowRemote {
		return u, nil
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.LookupIP(host)
		if err != nil {
			return nil, fmt.Errorf("%w: resolve %q: %v", ErrRemote, host, err)
		}
		ips = addrs
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("%w: %q resolves to nothing", ErrRemote, host)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return nil, fmt.Errorf("%w: %q is %s", ErrRemote, host, ip)
		}
	}
	return u, nil
}

// Progress is told what a scenario is doing, for a progress bar. Its
// methods are called from one goroutine at a time.
type Progress interface {
	// Phase starts a named phase of total steps (0: unknown), ending the
	// previous one.
	Phase(name string, total int64)
	// Set reports the steps done so far in the current phase.
	Set(done int64)
	// Done ends the last phase.
	Done()
}
