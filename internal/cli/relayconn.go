package cli

// What req, count, event and fetch share to talk to relays: dialling,
// the --auth and --sec flags (sync and stream take them too; the AUTH
// itself is client.Authenticate), printing events once across relays,
// and running one job per relay with each relay's failure reported on
// its own line.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// subID is the subscription id the client commands use.
const subID = "petrel"

// connFlags are the flags of the commands that talk to relays.
type connFlags struct {
	AuthFlags
	timeout time.Duration
}

func (f *connFlags) register(cmd *cobra.Command) {
	f.AuthFlags.Register(cmd)
	timeoutVar(cmd.Flags(), &f.timeout, 10*time.Second, "how long to wait for a relay to connect, and for each answer")
}

// AuthFlags are --sec and --auth: with --auth, a relay that refuses
// something with "auth-required:" gets a NIP-42 AUTH signed with the
// --sec key, and the refused request again. The client commands, sync
// and stream share them.
type AuthFlags struct {
	sec  secretFlag
	auth bool
}

func (f *AuthFlags) Register(cmd *cobra.Command) {
	f.sec.register(cmd)
	cmd.Flags().BoolVar(&f.auth, "auth", false, "answer a relay's NIP-42 AUTH challenge with the --sec key when it asks")
}

// authKey returns the key to authenticate with, or nil without --auth.
func (f *AuthFlags) AuthKey() (*nostr.SecretKey, error) {
	if !f.auth {
		return nil, nil
	}
	sk, err := f.sec.key()
	if err != nil {
		return nil, inputErr("--auth", err)
	}
	return &sk, nil
}

// authHint adds to the error of a relay that required authentication
// while the command had no key (sk nil) how to give it one.
func AuthHint(err error, sk *nostr.SecretKey) error {
	if sk == nil && errors.Is(err, client.ErrAuthRequired) {
		return fmt.Errorf("%w; %s", err, authHintText)
	}
	return err
}

// tellClosed gives a relay's CLOSED of the command's subscription as the
// line says it: "closed: " and the relay's message ("closed: invalid:
// too many values in kinds (max 2)"), without the client's words for
// it. The result wraps err; any other error is returned as it is.
func tellClosed(err error) error {
	var ce *client.ClosedError
	if errors.As(err, &ce) {
		return &toldError{"closed: " + ce.Message, err}
	}
	return err
}

// authHintText says how to give a command the key to authenticate with.
const authHintText = "pass --auth and --sec (hex or nsec, or set " + SecretEnv + ") to authenticate"

// dial connects to url within the timeout. A failure is told as
// connectError tells it, for eachRelay's "<relay>: " line.
func (f *connFlags) dial(ctx context.Context, url string) (*client.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := client.Dial(dctx, url, client.Options{HandshakeTimeout: f.timeout})
	if err != nil {
		return nil, connectError(err, f.timeout)
	}
	return c, nil
}

// connectError tells why a relay could not be reached, for a line that
// names the relay already: the cause without the URL and address that
// the client and net/http repeat ("cannot connect: connection refused",
// "the relay refused the WebSocket upgrade: HTTP 429 Too Many
// Requests"). The result wraps err. An error that is not a failed
// connection (a *client.DialError, a *client.HandshakeError, or net/http's
// *url.Error) is returned as it is.
func connectError(err error, timeout time.Duration) error {
	var he *client.HandshakeError
	var de *client.DialError
	var ue *url.Error
	switch {
	case errors.Is(err, context.Canceled):
		// The command was interrupted (client.Dial ends the handshake
		// with the context's error).
		return &toldError{"interrupted while connecting", err}
	case errors.As(err, &he):
		return &toldError{fmt.Sprintf("the relay refused the WebSocket upgrade: HTTP %d %s", he.Status, http.StatusText(he.Status)), err}
	case errors.As(err, &de):
		cause, _ := connectCause(de.Err, timeout)
		return &toldError{"cannot connect: " + cause, err}
	case errors.As(err, &ue):
		if cause, dial := connectCause(ue.Err, timeout); dial {
			return &toldError{"cannot connect: " + cause, err}
		}
		return &toldError{fmt.Sprintf("the HTTP request failed: %v", ue.Err), err}
	}
	return err
}

// RelayConnectError tells err as "<url>: cannot connect: <cause>" (or
// "<url>: the relay refused the WebSocket upgrade: ...") when err is
// itself a failed connection of client.Dial, whose message names the URL
// and the address again, and as "<url>: the relay closed the connection:
// ..." when it is a connection the relay closed (client.ConnClosedError);
// any other error, wrapped ones included, is
// returned as it is. For the commands whose errors do not name the
// relay already (sync, stream); timeout is the dial's, 0 if it has none.
func RelayConnectError(err error, timeout time.Duration) error {
	var relay string
	switch e := err.(type) {
	case *client.DialError:
		relay = e.URL
	case *client.HandshakeError:
		relay = e.URL
	case *client.ConnClosedError:
		// Ended after it was made: "<url>: the relay closed the
		// connection: ..." (closedByRelay).
		if told := closedByRelay(err); told != err {
			return fmt.Errorf("%s: %w", e.URL, told)
		}
		return err
	default:
		return err
	}
	return fmt.Errorf("%s: %w", relay, connectError(err, timeout))
}

// connectCause is the innermost useful reason of a failed connection:
// "connection refused" rather than "dial tcp 127.0.0.1:1: connect:
// connection refused"; "lookup h: no such host"; a TLS error as TLS
// tells it; "no answer within 10s" for a timeout of either kind ("timed
// out" without a timeout of its own). dial reports a failure to connect
// (the dial, or a timeout) rather than of the exchange after it.
func connectCause(err error, timeout time.Duration) (cause string, dial bool) {
	if isTimeout(err) {
		if timeout <= 0 {
			return "timed out", true
		}
		return fmt.Sprintf("no answer within %v", timeout), true
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" || oe.Err == nil {
		return err.Error(), false
	}
	err = oe.Err
	var se *os.SyscallError
	if errors.As(err, &se) {
		err = se.Err
	}
	return err.Error(), true
}

// isTimeout reports a context deadline or a network timeout.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout()
}

// toldError is an error told in other words than the error it wraps.
type toldError struct {
	msg string
	err error
}

func (e *toldError) Error() string { return e.msg }
func (e *toldError) Unwrap() error { return e.err }

// eventSink writes events to the output once each, whatever relay (or
// page) they come from. It is safe for concurrent use.
type eventSink struct {
	mu     sync.Mutex
	w      *bufio.Writer
	seen   map[nostr.ID]struct{}
	older  map[nostr.ID]struct{} // with window: the generation before seen
	window int                   // remember at least this many ids, at most twice; 0: all
	flush  bool                  // flush after every event (--stream)
	verify nostr.Verifier
	bad    int
	stderr io.Writer
}

// streamWindow is how many ids a --stream sink remembers at least (at most
// twice as many): a stream runs for days, and the ids of every event it
// printed would grow without bound (some 70 bytes each); a duplicate from
// another relay comes within moments of the first copy, far inside it.
const streamWindow = 1 << 18

// newEventSink makes a sink; with stream, it flushes every event and
// remembers the last streamWindow ids or so (not all).
func newEventSink(w io.Writer, stderr io.Writer, stream bool, verify bool) *eventSink {
	s := &eventSink{w: bufio.NewWriterSize(w, 64<<10), seen: make(map[nostr.ID]struct{}), flush: stream, stderr: stderr}
	if stream {
		s.window = streamWindow
	}
	if verify {
		s.verify = nostr.DefaultVerifier()
	}
	return s
}

// put writes ev's raw JSON unless it was written already; it reports
// whether ev was new.
func (s *eventSink) put(ev *nostr.Event, raw []byte, from string) (bool, error) {
	if s.verify != nil && (!nostr.CheckID(ev) || !nostr.VerifyEvent(s.verify, ev)) {
		s.mu.Lock()
		s.bad++
		fmt.Fprintf(s.stderr, "%s: dropped %s: bad id or signature\n", from, ev.ID.Hex())
		s.mu.Unlock()
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.seen[ev.ID]; dup {
		return false, nil
	}
	if _, dup := s.older[ev.ID]; dup {
		return false, nil
	}
	s.seen[ev.ID] = struct{}{}
	if s.window > 0 && len(s.seen) >= s.window {
		s.older, s.seen = s.seen, make(map[nostr.ID]struct{}, s.window)
	}
	s.w.Write(raw)
	if err := s.w.WriteByte('\n'); err != nil {
		return true, err
	}
	if s.flush {
		return true, s.w.Flush()
	}
	return true, nil
}

// putStored writes an event of a local store's answer to one query,
// which the store gives without duplicates (store.Store.Query; through a
// running relay's control socket too). Unless the sink verifies, the
// event is written as stored, neither parsed nor remembered: in a short
// command, the parsed events and the map of seen ids of a 500-event feed
// were about 140 page faults of fresh memory.
func (s *eventSink) putStored(raw []byte, from string) error {
	if s.verify != nil {
		ev, err := nostr.ParseEvent(raw, nil)
		if err != nil {
			return fmt.Errorf("the store returned an event that does not parse: %w", err)
		}
		_, err = s.put(ev, raw, from)
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(raw)
	return s.w.WriteByte('\n')
}

func (s *eventSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Flush()
}

// eachRelay runs job for every relay at once and reports each failure on
// stderr as "<relay>: <error>". It returns errPartial if any failed
// (the only relay's own error when there is one).
func eachRelay(relays []string, stderr io.Writer, job func(url string) error) error {
	errs := make([]error, len(relays))
	var wg sync.WaitGroup
	for i, r := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = closedByRelay(interrupted(job(r)))
		}()
	}
	wg.Wait()
	if len(relays) == 1 {
		if errs[0] != nil {
			return fmt.Errorf("%s: %w", relays[0], errs[0])
		}
		return nil
	}
	failed := false
	for i, err := range errs {
		if err != nil {
			failed = true
			fmt.Fprintf(stderr, "%s: %v\n", relays[i], err)
		}
	}
	if failed {
		return errPartial
	}
	return nil
}

// interrupted tells a job cut short by the command's interruption (its
// context cancelled) as "interrupted", not "context canceled"; other
// errors, and ones told already, are returned as they are.
func interrupted(err error) error {
	var told *toldError
	if err == nil || errors.As(err, &told) || !errors.Is(err, context.Canceled) {
		return err
	}
	return &toldError{"interrupted", err}
}

// closedByRelay tells a connection that ended under a job, for a line
// that names the relay already: "the relay closed the connection: blocked:
// ... (close code 1008)" rather than the client's "client: connection
// closed: <url>: websocket: close 1008 (policy violation): blocked: ...";
// "the connection to the relay broke" when it ended without a close frame.
// Other errors, and ones told already, are returned as they are.
func closedByRelay(err error) error {
	var told *toldError
	var closed *client.ConnClosedError
	var ce *websocket.CloseError
	if err == nil || errors.As(err, &told) || !errors.As(err, &closed) || !errors.As(closed.Err, &ce) {
		return err
	}
	switch {
	case ce.Code == websocket.CloseAbnormalClosure:
		return &toldError{"the connection to the relay broke (it ended without a close frame)", err}
	case ce.Text != "":
		return &toldError{fmt.Sprintf("the relay closed the connection: %s (close code %d)", ce.Text, ce.Code), err}
	}
	return &toldError{fmt.Sprintf("the relay closed the connection (close code %d)", ce.Code), err}
}

// ParseRelay completes a relay given as a person gives it (RelayURL) and
// checks it; the error names the argument as given.
func ParseRelay(a string) (string, error) {
	u := RelayURL(a)
	if a == "" || client.CheckURL(u) != nil {
		return "", fmt.Errorf("%q: not a relay: give host[:port] or a ws:// or wss:// URL", a)
	}
	return u, nil
}

// relayURLs completes every argument with RelayURL and checks it.
func relayURLs(args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	seen := map[string]bool{}
	for _, a := range args {
		u, err := ParseRelay(a)
		if err != nil {
			return nil, err
		}
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out, nil
}
