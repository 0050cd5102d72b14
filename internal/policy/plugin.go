package policy

import (
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// This file holds the Plugin itself: its configuration, start, Close and
// counters. The protocol's encoding is in plugin_protocol.go, the table of
// requests waiting for an answer in plugin_requests.go, and the supervision
// of the process in plugin_process.go.

// Messages of decisions the relay makes for the plugin.
const (
	msgTimeout   = "error: write policy plugin timed out"
	msgExited    = "error: write policy plugin exited before answering"
	msgReloaded  = "error: write policy plugin was restarted before answering"
	msgMalformed = "error: write policy plugin gave a malformed answer"
	msgShutdown  = "error: relay is shutting down"
)

var (
	rejPluginBusy     = nostr.Reject(nostr.PrefixRateLimited, "the write policy is busy, try again later")
	rejPluginShutdown = nostr.Reject(nostr.PrefixError, "relay is shutting down")
)

// PluginStats are a plugin's counters.
type PluginStats struct {
	Requests       int64 `json:"requests"` // events submitted (not counting Refused)
	Accepted       int64 `json:"accepted"`
	Rejected       int64 `json:"rejected"` // rejected by the plugin
	ShadowRejected int64 `json:"shadow_rejected"`
	Timeouts       int64 `json:"timeouts"` // rejected: no answer within the timeout
	Failed         int64 `json:"failed"`   // rejected: the process died or was restarted first, or answered garbage
	Refused        int64 `json:"refused"`  // refused at once by Check: too many in flight
	Restarts       int64 `json:"restarts"` // processes started after the first
	Inflight       int   `json:"inflight"` // events waiting for an answer now
}

// Plugin runs an external write-policy process speaking strfry's plugin
// protocol: one JSON line per event on its stdin, one JSON line per answer
// on its stdout, matched by event id (answers may come in any order). Its
// stderr goes to the log, line by line. Safe for concurrent use.
//
// Failures fail closed: an event whose answer does not come within the
// timeout is rejected with "error: write policy plugin timed out" (strfry
// says "error: internal error" for every plugin failure; petrel says which),
// one still waiting when the process exits is rejected with "error: write
// policy plugin exited before answering", and a malformed output line is
// logged and rejects the oldest request the process has not answered
// (plugins answer in order; a well-formed answer with an unknown action
// rejects its own request). A late answer for a request already rejected is
// ignored.
//
// The process is restarted when it exits (after a backoff that starts at
// 100ms and doubles up to 10s while the process dies without answering
// anything), when its file changes (path form only; polled every second),
// and when a request written to it times out while it has written nothing
// since that request nor for a whole timeout (it is killed: stuck). A
// replaced process gets its stdin closed and may answer what it already
// has for up to the timeout, then is killed; new events go to the new
// process at once. Events not yet written to any process wait (within
// their timeout) for the next one.
type Plugin struct {
	cmdline     string // absolute path (path form) or shell command
	watch       bool   // path form: the file is watched
	timeout     time.Duration
	maxInflight int
	log         *slog.Logger
	epoch       time.Time // origin of the monotonic nanos below

	// Tunables; tests shorten them before start.
	pollEvery  time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	drainGrace time.Duration // how long output is read after the process exited

	mu     sync.Mutex
	closed bool
	head   *req // pending requests, in submission order (= deadline order)
	tail   *req
	unsent *req // first pending request not yet written to a process
	byID   map[nostr.ID][]*req
	n      int
	cur    *proc // the process new requests are written to; nil while down
	gen    uint64

	sendSig chan struct{} // capacity 1: unsent requests may exist
	reapSig chan struct{} // capacity 1: the pending list became non-empty
	kick    chan uint64   // capacity 1: restart this generation (stuck)
	quit    chan struct{}
	wg      sync.WaitGroup

	requests, accepted, rejected, shadow atomic.Int64
	timeouts, failed, refused, restarts  atomic.Int64
}

// StartPlugin starts the plugin of cfg (cfg.Plugin must not be empty) and
// returns once its first process is running; it fails if that process
// cannot be started (missing or non-executable file). Logs go to log
// (slog.Default() if nil). Close stops it.
func StartPlugin(cfg Config, log *slog.Logger) (*Plugin, error) {
	cfg = cfg.Normalize()
	p, err := newPlugin(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// CheckPlugin reports a plugin given as a path (cfg.Plugin without a
// space or tab) that is not an executable file, without starting it
// (petrel serve --check). A shell command is not checked: only the shell
// can tell.
func CheckPlugin(cfg Config) error {
	cmd := strings.TrimSpace(cfg.Plugin)
	if cmd == "" || strings.ContainsAny(cmd, " \t") {
		return nil
	}
	abs, err := filepath.Abs(cmd)
	if err == nil {
		_, err = exec.LookPath(abs)
	}
	if err != nil {
		return fmt.Errorf("policy: plugin %q: %w", cmd, err)
	}
	return nil
}

// newPlugin builds a Plugin without starting it.
func newPlugin(cfg Config, log *slog.Logger) (*Plugin, error) {
	cmd := strings.TrimSpace(cfg.Plugin)
	if cmd == "" {
		return nil, errors.New("policy: no plugin configured")
	}
	if log == nil {
		log = slog.Default()
	}
	p := &Plugin{
		cmdline:     cmd,
		watch:       !strings.ContainsAny(cmd, " \t"),
		timeout:     cfg.PluginTimeout,
		maxInflight: cfg.PluginMaxInflight,
		epoch:       time.Now(),
		pollEvery:   time.Second,
		minBackoff:  100 * time.Millisecond,
		maxBackoff:  10 * time.Second,
		drainGrace:  500 * time.Millisecond,
		byID:        make(map[nostr.ID][]*req),
		sendSig:     make(chan struct{}, 1),
		reapSig:     make(chan struct{}, 1),
		kick:        make(chan uint64, 1),
		quit:        make(chan struct{}),
	}
	if p.watch {
		abs, err := filepath.Abs(cmd)
		if err != nil {
			return nil, fmt.Errorf("policy: plugin %q: %w", cmd, err)
		}
		p.cmdline = abs
	}
	p.log = log.With("plugin", p.cmdline)
	return p, nil
}

// start spawns the first process and the supervisor and reaper goroutines.
func (p *Plugin) start() error {
	pr, err := p.spawn()
	if err != nil {
		return fmt.Errorf("policy: start plugin %q: %w", p.cmdline, err)
	}
	p.wg.Add(2)
	go p.supervise(pr)
	go p.reap()
	return nil
}

func (p *Plugin) since() int64 { return int64(time.Since(p.epoch)) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Close stops the plugin: the process gets its stdin closed and up to the
// timeout to answer what it has, then is killed; every event still waiting
// is rejected with "error: relay is shutting down". It returns when every
// goroutine of the plugin has ended and every done has been called. Later
// Checks are refused.
func (p *Plugin) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	close(p.quit)
	p.wg.Wait()
	p.failWhere(func(*req) bool { return true }, msgShutdown)
	return nil
}

// Stats returns the plugin's counters.
func (p *Plugin) Stats() PluginStats {
	p.mu.Lock()
	n := p.n
	p.mu.Unlock()
	return PluginStats{
		Requests: p.requests.Load(), Accepted: p.accepted.Load(), Rejected: p.rejected.Load(),
		ShadowRejected: p.shadow.Load(), Timeouts: p.timeouts.Load(), Failed: p.failed.Load(),
		Refused: p.refused.Load(), Restarts: p.restarts.Load(), Inflight: n,
	}
}
