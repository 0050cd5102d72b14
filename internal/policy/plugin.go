package policy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Action is a write-policy plugin's verdict on one event.
type Action uint8

// Actions, as strfry names them.
const (
	// Accept lets the event go on to the relay's other checks.
	Accept Action = iota + 1
	// Reject refuses the event with Decision.Msg.
	Reject
	// ShadowReject tells the client the event was accepted (OK true) but
	// neither stores nor broadcasts it.
	ShadowReject
)

// actionNames are the actions' names in the plugin protocol.
var actionNames = [...]string{Accept: "accept", Reject: "reject", ShadowReject: "shadowReject"}

// String returns the action's name in the plugin protocol.
func (a Action) String() string {
	if int(a) < len(actionNames) && actionNames[a] != "" {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// parseAction returns the action named name in the plugin protocol.
func parseAction(name string) (Action, bool) {
	for a, n := range actionNames {
		if n != "" && n == name {
			return Action(a), true
		}
	}
	return 0, false
}

// Decision is a plugin's answer for one event.
type Decision struct {
	Action Action
	// Msg is the message the plugin gave (strfry: "only used for reject"),
	// or the relay's own "error: ..." message when the plugin failed to
	// answer. It may be empty and may lack a NIP-01 prefix; use Rejection
	// for what to send.
	Msg string
}

// Rejection returns the OK-false message for a Reject: Msg itself if it
// starts with a NIP-01 prefix ("blocked: no spam"), else Msg under
// "blocked:" ("blocked: rejected by the relay's write policy" if Msg is
// empty). It returns nil for Accept and ShadowReject.
func (d Decision) Rejection() *nostr.Rejection {
	if d.Action != Reject {
		return nil
	}
	if p, text, ok := strings.Cut(d.Msg, ":"); ok {
		switch pr := nostr.Prefix(p); pr {
		case nostr.PrefixDuplicate, nostr.PrefixPoW, nostr.PrefixBlocked, nostr.PrefixRateLimited,
			nostr.PrefixInvalid, nostr.PrefixRestricted, nostr.PrefixMute, nostr.PrefixError,
			nostr.PrefixAuthRequired:
			return nostr.Reject(pr, strings.TrimPrefix(text, " "))
		}
	}
	if d.Msg == "" {
		return nostr.Reject(nostr.PrefixBlocked, "rejected by the relay's write policy")
	}
	return nostr.Reject(nostr.PrefixBlocked, d.Msg)
}

// SourceType says where an event came from: strfry's sourceType.
type SourceType string

// Source types. Events from clients are IP4 or IP6.
const (
	SourceIP4    SourceType = "IP4"
	SourceIP6    SourceType = "IP6"
	SourceImport SourceType = "Import"
	SourceStream SourceType = "Stream"
	SourceSync   SourceType = "Sync"
	SourceStored SourceType = "Stored"
)

// Meta is what the plugin is told about an event besides the event.
type Meta struct {
	// ReceivedAt is when the relay received the event; zero means now.
	ReceivedAt time.Time
	// SourceType is the channel the event came from.
	SourceType SourceType
	// SourceInfo is the client's address for IP4/IP6, or a relay URL or
	// file name for the others.
	SourceInfo string
	// Authed is the pubkey the connection authenticated as (NIP-42), or
	// the zero key if none. petrel adds it as "authed" (hex, or "").
	Authed nostr.PubKey
}

// MetaFromIP returns the Meta of an event received from a client at ip,
// authenticated as authed (zero: not authenticated).
func MetaFromIP(ip netip.Addr, authed nostr.PubKey) Meta {
	ip = ip.Unmap()
	st := SourceIP6
	if ip.Is4() {
		st = SourceIP4
	}
	return Meta{SourceType: st, SourceInfo: ip.WithZone("").String(), Authed: authed}
}

// appendRequest appends the plugin protocol's input line for ev:
//
//	{"type":"new","event":{...},"receivedAt":<unix s>,"sourceType":"IP4","sourceInfo":"<ip>","authed":"<hex or empty>"}
func appendRequest(dst []byte, ev *nostr.Event, m Meta) []byte {
	dst = append(dst, `{"type":"new","event":`...)
	raw := ev.Raw
	switch {
	case len(raw) == 0:
		dst = nostr.AppendEvent(dst, ev)
	case bytes.ContainsAny(raw, "\r\n"):
		// Whitespace between tokens would break the line protocol.
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			dst = nostr.AppendEvent(dst, ev)
		} else {
			dst = append(dst, b.Bytes()...)
		}
	default:
		dst = append(dst, raw...)
	}
	at := m.ReceivedAt
	if at.IsZero() {
		at = time.Now()
	}
	dst = append(dst, `,"receivedAt":`...)
	dst = strconv.AppendInt(dst, at.Unix(), 10)
	st := m.SourceType
	if st == "" {
		st = SourceIP4
	}
	dst = append(dst, `,"sourceType":`...)
	dst = nostr.AppendString(dst, strings.ToValidUTF8(string(st), "\uFFFD"))
	dst = append(dst, `,"sourceInfo":`...)
	dst = nostr.AppendString(dst, strings.ToValidUTF8(m.SourceInfo, "\uFFFD"))
	dst = append(dst, `,"authed":"`...)
	if m.Authed != (nostr.PubKey{}) {
		dst = append(dst, m.Authed.Hex()...)
	}
	return append(dst, "\"}\n"...)
}

// answer is one output line of the plugin protocol.
type answer struct {
	ID     nostr.ID
	Action Action
	Msg    string
}

// Errors of parseAnswer.
var (
	errAnswerSyntax = errors.New("policy: plugin answer is not a JSON object with an event id")
	errAnswerAction = errors.New("policy: plugin answer has an unknown action")
)

// parseAnswer parses one output line. With errAnswerAction the id is
// valid (the answer belongs to a request); with errAnswerSyntax it is not.
func parseAnswer(line []byte) (answer, error) {
	var a struct {
		ID     string          `json:"id"`
		Action string          `json:"action"`
		Msg    json.RawMessage `json:"msg"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return answer{}, fmt.Errorf("%w: %v", errAnswerSyntax, err)
	}
	id, err := nostr.ParseID(strings.ToLower(a.ID))
	if err != nil {
		return answer{}, fmt.Errorf("%w: id %q", errAnswerSyntax, a.ID)
	}
	out := answer{ID: id}
	if len(a.Msg) > 0 && string(a.Msg) != "null" {
		if err := json.Unmarshal(a.Msg, &out.Msg); err != nil {
			return out, fmt.Errorf("%w: msg is not a string", errAnswerAction)
		}
	}
	act, ok := parseAction(a.Action)
	if !ok {
		return out, fmt.Errorf("%w: %q", errAnswerAction, a.Action)
	}
	out.Action = act
	return out, nil
}

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
	Requests       int64 // events submitted (not counting Refused)
	Accepted       int64
	Rejected       int64 // rejected by the plugin
	ShadowRejected int64
	Timeouts       int64 // rejected: no answer within the timeout
	Failed         int64 // rejected: the process died or was restarted first, or answered garbage
	Refused        int64 // refused at once by Check: too many in flight
	Restarts       int64 // processes started after the first
	Inflight       int   // events waiting for an answer now
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
// and when it has answered nothing for a whole timeout while requests were
// waiting (it is killed: stuck). A replaced process gets its stdin closed
// and may answer what it already has for up to the timeout, then is
// killed; new events go to the new process at once. Events not yet written
// to any process wait (within their timeout) for the next one.
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

// req is one event waiting for the plugin.
type req struct {
	id       nostr.ID
	line     []byte
	done     func(Decision)
	deadline int64 // nanos since epoch
	gen      uint64
	sentAt   int64 // nanos since epoch; valid when gen != 0
	prev     *req
	next     *req
	resolved bool
}

// proc is one running plugin process.
type proc struct {
	gen        uint64
	cmd        *exec.Cmd
	stdin      *os.File
	stdout     *os.File
	stderr     *os.File
	stamp      fileStamp
	stopOnce   sync.Once
	stop       chan struct{} // closed: the writer must exit
	waited     chan struct{} // closed when cmd.Wait returned
	readerDone chan struct{}
	stderrDone chan struct{}
	lastAnswer atomic.Int64 // nanos since epoch of the last answer line
	answered   atomic.Bool
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
	p.setCurrent(pr)
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

// Check submits ev to the plugin without blocking. If it returns nil, done
// is called exactly once later, from a goroutine of the plugin, with the
// decision; done must not block (hand the result off) and must not call
// Close. If it returns a
// rejection ("rate-limited:" when PluginMaxInflight events are already
// waiting, "error:" after Close), done is never called. ev and meta are not
// retained beyond the request line built here.
func (p *Plugin) Check(ev *nostr.Event, meta Meta, done func(Decision)) *nostr.Rejection {
	line := appendRequest(make([]byte, 0, len(ev.Raw)+160), ev, meta)
	r := &req{id: ev.ID, line: line, done: done, deadline: p.since() + int64(p.timeout)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return rejPluginShutdown
	}
	if p.n >= p.maxInflight {
		p.mu.Unlock()
		p.refused.Add(1)
		return rejPluginBusy
	}
	first := p.head == nil
	if first {
		p.head = r
	} else {
		p.tail.next, r.prev = r, p.tail
	}
	p.tail = r
	if p.unsent == nil {
		p.unsent = r
	}
	p.byID[r.id] = append(p.byID[r.id], r)
	p.n++
	p.mu.Unlock()
	p.requests.Add(1)
	signal(p.sendSig)
	if first {
		signal(p.reapSig)
	}
	return nil
}

// unlink removes r from the pending structures. p.mu must be held.
func (p *Plugin) unlink(r *req) {
	r.resolved = true
	if p.unsent == r {
		p.unsent = r.next
	}
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		p.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		p.tail = r.prev
	}
	r.prev, r.next = nil, nil
	list := p.byID[r.id]
	for i, x := range list {
		if x == r {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.byID, r.id)
	} else {
		p.byID[r.id] = list
	}
	p.n--
}

// failWhere rejects, with msg, every pending request for which match
// holds. p.mu must not be held.
func (p *Plugin) failWhere(match func(*req) bool, msg string) int {
	var out []*req
	p.mu.Lock()
	for r := p.head; r != nil; {
		next := r.next
		if match(r) {
			p.unlink(r)
			out = append(out, r)
		}
		r = next
	}
	p.mu.Unlock()
	if msg != msgShutdown {
		p.failed.Add(int64(len(out)))
	}
	for _, r := range out {
		r.done(Decision{Action: Reject, Msg: msg})
	}
	return len(out)
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

// setCurrent makes pr (may be nil) the process new requests go to.
func (p *Plugin) setCurrent(pr *proc) {
	p.mu.Lock()
	p.cur = pr
	p.mu.Unlock()
	signal(p.sendSig)
}

// spawn starts a process with its reader, stderr logger, writer and
// waiter goroutines.
func (p *Plugin) spawn() (*proc, error) {
	var stamp fileStamp
	if p.watch {
		st, err := statFile(p.cmdline)
		if err != nil {
			return nil, err
		}
		stamp = st
	}
	var cmd *exec.Cmd
	if p.watch {
		cmd = exec.Command(p.cmdline)
	} else {
		cmd = exec.Command("/bin/sh", "-c", p.cmdline)
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	inR.Close()
	outW.Close()
	errW.Close()
	p.mu.Lock()
	p.gen++
	gen := p.gen
	p.mu.Unlock()
	pr := &proc{
		gen: gen, cmd: cmd, stdin: inW, stdout: outR, stderr: errR, stamp: stamp,
		stop: make(chan struct{}), waited: make(chan struct{}),
		readerDone: make(chan struct{}), stderrDone: make(chan struct{}),
	}
	pr.lastAnswer.Store(p.since())
	p.log.Info("write policy plugin started", "pid", cmd.Process.Pid, "generation", gen)
	p.wg.Add(4)
	go func() {
		defer p.wg.Done()
		_ = cmd.Wait()
		close(pr.waited)
	}()
	go p.readAnswers(pr)
	go p.logStderr(pr)
	go p.write(pr)
	return pr, nil
}

// kill kills the process and its process group, unless it was reaped.
func (pr *proc) kill() {
	select {
	case <-pr.waited:
		return
	default:
	}
	killProcessGroup(pr.cmd)
}

func (pr *proc) stopWriter() { pr.stopOnce.Do(func() { close(pr.stop) }) }

// retire ends pr: its writer stops (closing its stdin), it gets up to wait
// to exit by itself, then is killed; its remaining output is read (up to
// drainGrace), and its unanswered requests are rejected with msg.
func (p *Plugin) retire(pr *proc, msg string, wait time.Duration) {
	pr.stopWriter()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-pr.waited:
		case <-t.C:
		}
		t.Stop()
	}
	pr.kill()
	<-pr.waited
	// Read what the process wrote before it exited. If a child it started
	// still holds a pipe open past the grace period, stop reading.
	grace := time.NewTimer(p.drainGrace)
	defer grace.Stop()
	expired := false
	for _, x := range []struct {
		done chan struct{}
		f    *os.File
	}{{pr.readerDone, pr.stdout}, {pr.stderrDone, pr.stderr}} {
		if !expired {
			select {
			case <-x.done:
				continue
			case <-grace.C:
				expired = true
			}
		}
		select {
		case <-x.done:
		default:
			x.f.Close()
			<-x.done
		}
	}
	p.failWhere(func(r *req) bool { return r.gen == pr.gen }, msg)
}

// supervise restarts the process when it exits, its file changes or it is
// stuck, until Close.
func (p *Plugin) supervise(pr *proc) {
	defer p.wg.Done()
	backoff := p.minBackoff
	restart := time.NewTimer(time.Hour)
	restart.Stop()
	var poll <-chan time.Time
	if p.watch {
		t := time.NewTicker(p.pollEvery)
		defer t.Stop()
		poll = t.C
	}
	var bad fileStamp // a changed file that failed to start: not retried until it changes again
	waited := pr.waited
	for {
		select {
		case <-p.quit:
			restart.Stop()
			if pr != nil {
				// pr stays current so that its writer sends what was
				// submitted before Close, then closes its stdin.
				p.retire(pr, msgShutdown, p.timeout)
				p.setCurrent(nil)
			}
			return
		case <-restart.C:
			np, err := p.spawn()
			if err != nil {
				p.log.Error("write policy plugin: cannot start", "err", err, "retry_in", backoff)
				restart.Reset(backoff)
				backoff = min(2*backoff, p.maxBackoff)
				continue
			}
			p.restarts.Add(1)
			pr, waited = np, np.waited
			p.setCurrent(pr)
		case <-waited:
			p.setCurrent(nil)
			p.log.Warn("write policy plugin exited", "pid", pr.cmd.Process.Pid, "status", pr.cmd.ProcessState.String())
			p.retire(pr, msgExited, 0)
			if pr.answered.Load() {
				backoff = p.minBackoff
			}
			restart.Reset(backoff)
			backoff = min(2*backoff, p.maxBackoff)
			pr, waited = nil, nil
		case <-poll:
			if pr == nil {
				continue // the restart will use the new file
			}
			st, err := statFile(p.cmdline)
			if err != nil || st == pr.stamp || st == bad {
				continue
			}
			p.log.Info("write policy plugin file changed: restarting")
			np, err := p.spawn()
			if err != nil {
				p.log.Error("write policy plugin: cannot start the new version, keeping the old one", "err", err)
				bad = st
				continue
			}
			p.restarts.Add(1)
			old := pr
			pr, waited = np, np.waited
			p.setCurrent(pr)
			backoff = p.minBackoff
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.retire(old, msgReloaded, p.timeout)
			}()
		case g := <-p.kick:
			if pr != nil && pr.gen == g {
				p.log.Warn("write policy plugin answered nothing within the timeout: killing it", "pid", pr.cmd.Process.Pid)
				pr.kill()
			}
		}
	}
}

// write sends pending requests to pr while it is the current process.
func (p *Plugin) write(pr *proc) {
	defer p.wg.Done()
	defer pr.stdin.Close()
	const maxBatch = 256
	var buf []byte
	for {
		p.mu.Lock()
		if p.cur != pr {
			p.mu.Unlock()
			signal(p.sendSig) // pass the signal on to the current writer
			return
		}
		buf = buf[:0]
		now := p.since()
		for n := 0; p.unsent != nil && n < maxBatch; n++ {
			r := p.unsent
			r.gen, r.sentAt = pr.gen, now
			buf = append(buf, r.line...)
			r.line = nil
			p.unsent = r.next
		}
		p.mu.Unlock()
		if len(buf) == 0 {
			select {
			case <-p.sendSig:
				continue
			case <-pr.stop:
				signal(p.sendSig)
				return
			}
		}
		if _, err := pr.stdin.Write(buf); err != nil {
			// The process is gone or closed its stdin: what was written
			// is rejected when it is retired.
			p.log.Warn("write policy plugin: write failed: killing it", "err", err)
			pr.kill()
			<-pr.stop
			signal(p.sendSig)
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// readAnswers reads pr's stdout and resolves requests.
func (p *Plugin) readAnswers(pr *proc) {
	defer p.wg.Done()
	defer close(pr.readerDone)
	defer pr.stdout.Close()
	br := bufio.NewReaderSize(pr.stdout, 64<<10)
	for {
		line, long, err := readLine(br)
		if len(line) > 0 || long {
			p.handleLine(pr, line, long)
		}
		if err != nil {
			return
		}
	}
}

// handleLine resolves the request a line answers.
func (p *Plugin) handleLine(pr *proc, line []byte, long bool) {
	pr.lastAnswer.Store(p.since())
	var a answer
	var err error
	if long {
		err = fmt.Errorf("%w: line longer than 64 KiB", errAnswerSyntax)
	} else {
		a, err = parseAnswer(line)
	}
	var r *req
	p.mu.Lock()
	if err == nil || errors.Is(err, errAnswerAction) {
		for _, x := range p.byID[a.ID] {
			if x.gen == pr.gen {
				r = x
				break
			}
		}
		if r == nil {
			p.mu.Unlock()
			p.log.Debug("write policy plugin answered an event that is not waiting (late answer?)", "id", a.ID.Hex())
			return
		}
	} else {
		// No usable id: blame the oldest request this process has.
		for x := p.head; x != nil; x = x.next {
			if x.gen == pr.gen {
				r = x
				break
			}
		}
	}
	if r != nil {
		p.unlink(r)
	}
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("write policy plugin: malformed answer", "err", err, "line", truncate(line, 200))
		if r != nil {
			p.failed.Add(1)
			r.done(Decision{Action: Reject, Msg: msgMalformed})
		}
		return
	}
	pr.answered.Store(true)
	switch a.Action {
	case Accept:
		p.accepted.Add(1)
	case Reject:
		p.rejected.Add(1)
	case ShadowReject:
		p.shadow.Add(1)
	}
	r.done(Decision{Action: a.Action, Msg: a.Msg})
}

// logStderr logs pr's stderr line by line.
func (p *Plugin) logStderr(pr *proc) {
	defer p.wg.Done()
	defer close(pr.stderrDone)
	defer pr.stderr.Close()
	br := bufio.NewReaderSize(pr.stderr, 16<<10)
	pid := pr.cmd.Process.Pid
	for {
		line, long, err := readLine(br)
		if len(line) > 0 {
			attrs := []any{"pid", pid, "line", string(line)}
			if long {
				attrs = append(attrs, "truncated", true)
			}
			p.log.Info("write policy plugin stderr", attrs...)
		}
		if err != nil {
			return
		}
	}
}

// reap rejects requests whose deadline has passed, and asks for a restart
// of a process that has answered nothing since such a request was sent.
func (p *Plugin) reap() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		now := p.since()
		var expired []*req
		p.mu.Lock()
		for p.head != nil && p.head.deadline <= now {
			r := p.head
			p.unlink(r)
			expired = append(expired, r)
		}
		var next int64 = -1
		if p.head != nil {
			next = p.head.deadline
		}
		cur := p.cur
		p.mu.Unlock()
		for _, r := range expired {
			if cur != nil && r.gen == cur.gen && cur.lastAnswer.Load() < r.sentAt {
				select {
				case p.kick <- r.gen:
				default:
				}
			}
			p.timeouts.Add(1)
			r.done(Decision{Action: Reject, Msg: msgTimeout})
		}
		if next >= 0 {
			timer.Reset(time.Duration(next - now))
			select {
			case <-timer.C:
			case <-p.quit:
				return
			}
			continue
		}
		select {
		case <-p.reapSig:
		case <-p.quit:
			return
		}
	}
}

// readLine returns the next line of br without its line ending. A line
// longer than br's buffer is returned cut to the buffer's size with long
// set, and the rest of it is skipped. err is set at the end of input (a
// last line without a newline is returned with it).
func readLine(br *bufio.Reader) (line []byte, long bool, err error) {
	line, err = br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		line = append([]byte(nil), line...)
		long = true
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
	}
	line = bytes.TrimRight(line, "\r\n")
	if err == io.EOF && len(line) == 0 {
		return nil, long, err
	}
	return line, long, err
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
