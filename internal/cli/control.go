package cli

// The client side of petrel serve's control socket (cmd/petrel serves it):
// a Unix socket in the data directory, through which req, count, scan and
// export read a store the running relay holds (POST /query), and backup
// asks for a checkpoint.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// ControlSocketName is the control socket's name in the data directory.
const ControlSocketName = "petrel.sock"

// ControlSocketPath is the control socket of the relay holding the store
// in storePath.
func ControlSocketPath(storePath string) string {
	return filepath.Join(storePath, ControlSocketName)
}

// IsSocket reports whether path is a Unix socket (whether or not a
// process listens on it).
func IsSocket(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&fs.ModeSocket != 0
}

// ControlError is the body of the control socket's error answers.
type ControlError struct {
	Error string `json:"error"`
}

// ControlServed reports whether a running relay answers on the control
// socket of the store in dir (a connection is accepted): a socket left
// behind by a relay that died is not.
func ControlServed(dir string) bool {
	path := ControlSocketPath(dir)
	if !IsSocket(path) {
		return false
	}
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// QueryRequest is the body of POST /query on the control socket.
type QueryRequest struct {
	Filters []json.RawMessage `json:"filters"`
	// Count answers {"count": N} (limits ignored, as COUNT).
	Count bool `json:"count"`
	// IDs answers the ids of the matches, one per line (petrel scan --ids).
	IDs bool `json:"ids,omitempty"`
	// OldestFirst answers the matches oldest first (petrel export
	// --oldest-first).
	OldestFirst bool `json:"oldest_first,omitempty"`
	// Explain answers {"explain": "..."}: how the store answers the
	// filters (petrel scan --explain; with Count, the count's plan).
	Explain bool `json:"explain,omitempty"`
}

// ExplainAnswer is the answer to an Explain request.
type ExplainAnswer struct {
	Explain string `json:"explain"`
}

// CountAnswer is the answer to a counting query.
type CountAnswer struct {
	Count int64 `json:"count"`
}

// MaxQueryBody caps the body of POST /query.
const MaxQueryBody = 1 << 20

// AskControlCount counts the events of filters in the store the petrel
// serve holding dir serves (QueryRequest{Count: true}); served is false
// when no relay answers there.
func AskControlCount(ctx context.Context, dir string, filters []nostr.Filter) (n int64, served bool, err error) {
	served, err = AskControlQuery(ctx, dir, filters, QueryRequest{Count: true}, func(line []byte) error {
		var a CountAnswer
		if err := json.Unmarshal(line, &a); err != nil {
			return fmt.Errorf("the running relay's answer: %w", err)
		}
		n = a.Count
		return nil
	})
	return n, served, err
}

// ErrOlderServe is what PostControl answers when the running relay does
// not know the request (an older petrel serve).
var ErrOlderServe = errors.New("the running petrel serve is older and cannot answer this: stop it first")

// PostControl posts body (JSON) to route ("query", "backup") on the
// control socket of the petrel serve holding the store in dir, and
// returns its answer when it is 200 OK (the caller closes the body).
// served is false when no relay answers there (no socket, or one a
// stopped relay left behind): the caller then opens the store itself. An
// answer other than 200 is an error (ErrOlderServe for 404, else the
// relay's ControlError).
func PostControl(ctx context.Context, dir, route string, body []byte) (resp *http.Response, served bool, err error) {
	return PostControlStream(ctx, dir, route, "application/json", bytes.NewReader(body), nil)
}

// StreamSignals tell a streamed request's body (PostControlStream) what
// became of the connection: the request does not end until the body's
// Read returns, so a body that waits for its input (a pipe) should stop
// when one of them is closed.
type StreamSignals struct {
	// Answered is closed when the relay's answer begins: the body should
	// end (io.EOF), the relay having stopped reading it; writing on
	// could fail and lose the answer.
	Answered chan struct{}
	// Lost is closed when the connection breaks before the relay
	// answered: the body should fail.
	Lost chan struct{}
}

// NewStreamSignals makes a StreamSignals.
func NewStreamSignals() *StreamSignals {
	return &StreamSignals{Answered: make(chan struct{}), Lost: make(chan struct{})}
}

// PostControlStream is PostControl with a body of contentType read from
// body as it is sent (petrel import streams its input this way): route
// may carry a query string. When served is false, nothing was read from
// body. sig, when not nil, is told what becomes of the connection.
func PostControlStream(ctx context.Context, dir, route, contentType string, body io.Reader, sig *StreamSignals) (resp *http.Response, served bool, err error) {
	path := ControlSocketPath(dir)
	if !IsSocket(path) {
		return nil, false, nil
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", path)
			if err != nil || sig == nil {
				return c, err
			}
			return &watchedConn{Conn: c, sig: sig}, nil
		},
		DisableCompression: true,
	}}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://petrel/"+route, body)
	if err != nil {
		return nil, true, err
	}
	hr.Header.Set("Content-Type", contentType)
	resp, err = hc.Do(hr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, true, fmt.Errorf("ask the running relay (%s): %w", path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, true, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, true, ErrOlderServe
	}
	var ce ControlError
	if json.NewDecoder(resp.Body).Decode(&ce) != nil || ce.Error == "" {
		ce.Error = resp.Status
	}
	return nil, true, fmt.Errorf("the running relay: %s", ce.Error)
}

// watchedConn tells sig what it reads: the transport reads the
// connection all along, so the relay's answer, or its death, is seen at
// once.
type watchedConn struct {
	net.Conn
	sig      *StreamSignals
	answered sync.Once
	lost     sync.Once
	got      atomic.Bool
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.got.Swap(true) {
		c.answered.Do(func() { close(c.sig.Answered) })
	}
	if err != nil && !c.got.Load() {
		c.lost.Do(func() { close(c.sig.Lost) })
	}
	return n, err
}

// AskControlQuery runs a query through the control socket of the petrel
// serve holding dir (req.Filters is set from filters). served is false
// when no relay answers there: the caller then opens the store itself.
// each gets every line of the answer (one JSON object for Count and
// Explain).
func AskControlQuery(ctx context.Context, dir string, filters []nostr.Filter, req QueryRequest, each func([]byte) error) (served bool, err error) {
	req.Filters = nil
	for i := range filters {
		req.Filters = append(req.Filters, nostr.AppendFilter(nil, &filters[i]))
	}
	body, _ := json.Marshal(req)
	resp, served, err := PostControl(ctx, dir, "query", body)
	if errors.Is(err, ErrOlderServe) {
		err = fmt.Errorf("%w, or query it over WebSocket", err)
	}
	if !served || err != nil {
		return served, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	// The buffer starts small and doubles for a longer line: the lines
	// arrive a few KiB a read whatever its size, and every page of it
	// the scanner fills is fresh memory, a page fault in a short command
	// (a 256 KiB buffer was 55 faults of the 500-event feed).
	sc.Buffer(make([]byte, 16<<10), 64<<20)
	for sc.Scan() {
		if err := each(sc.Bytes()); err != nil {
			return true, err
		}
	}
	if err := sc.Err(); err != nil {
		return true, fmt.Errorf("the running relay's answer: %w", err)
	}
	return true, nil
}
