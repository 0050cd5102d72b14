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
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
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

// ControlError is the body of the control socket's error answers.
type ControlError struct {
	Error string `json:"error"`
}

// ControlServed reports whether a running relay answers on the control
// socket of the store in dir (a connection is accepted): a socket left
// behind by a relay that died is not.
func ControlServed(dir string) bool {
	path := ControlSocketPath(dir)
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSocket == 0 {
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

// askQuery runs a query through the control socket of the petrel serve
// holding dir. served is false when no relay answers there: the caller
// then opens the store itself. each gets every line (count: the one
// JSON answer).
func askQuery(ctx context.Context, dir string, filters []nostr.Filter, count bool, each func([]byte) error) (served bool, err error) {
	return AskControlQuery(ctx, dir, filters, QueryRequest{Count: count}, each)
}

// AskControlQuery is askQuery with the request's options (req.Filters is
// set from filters).
func AskControlQuery(ctx context.Context, dir string, filters []nostr.Filter, req QueryRequest, each func([]byte) error) (served bool, err error) {
	path := ControlSocketPath(dir)
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSocket == 0 {
		return false, nil
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableCompression: true,
	}}
	req.Filters = nil
	for i := range filters {
		req.Filters = append(req.Filters, nostr.AppendFilter(nil, &filters[i]))
	}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://petrel/query", bytes.NewReader(body))
	if err != nil {
		return true, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return true, fmt.Errorf("ask the running relay (%s): %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return true, errors.New("the running petrel serve is older and cannot answer queries: stop it, or query it over WebSocket")
	}
	if resp.StatusCode != http.StatusOK {
		var ce ControlError
		if json.NewDecoder(resp.Body).Decode(&ce) != nil || ce.Error == "" {
			ce.Error = resp.Status
		}
		return true, fmt.Errorf("the running relay: %s", ce.Error)
	}
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
