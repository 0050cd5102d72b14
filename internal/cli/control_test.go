package cli

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// PostControl: no socket and a socket nobody accepts on are not served; a
// relay's 200 is handed over, its 404 is ErrOlderServe (an older serve),
// any other status the relay's ControlError.
func TestPostControl(t *testing.T) {
	ctx := t.Context()
	if _, served, err := PostControl(ctx, t.TempDir(), "query", nil); served || err != nil {
		t.Fatalf("no socket: served %v, %v", served, err)
	}
	stale := staleSocketDir(t)
	if _, served, err := PostControl(ctx, stale, "query", nil); served || err != nil {
		t.Fatalf("stale socket: served %v, %v", served, err)
	}

	dir := t.TempDir()
	ln, err := net.Listen("unix", ControlSocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) })
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(ControlError{Error: "another backup is running"})
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	resp, served, err := PostControl(ctx, dir, "echo", []byte(`{"x":1}`))
	if !served || err != nil {
		t.Fatalf("echo: served %v, %v", served, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `{"x":1}` {
		t.Fatalf("echo: %q", b)
	}
	if _, served, err := PostControl(ctx, dir, "nosuch", nil); !served || !errors.Is(err, ErrOlderServe) {
		t.Fatalf("unknown route: served %v, %v", served, err)
	}
	if _, served, err := PostControl(ctx, dir, "fail", nil); !served || err == nil || !strings.Contains(err.Error(), "another backup is running") {
		t.Fatalf("refused: served %v, %v", served, err)
	}
}

// staleSocketDir returns a data directory holding the control socket a
// killed relay leaves behind: a socket file nothing accepts on.
func staleSocketDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: ControlSocketPath(dir), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetUnlinkOnClose(false)
	sl.Close()
	return dir
}
