package relay_test

// Durability: `petrel serve` killed with SIGKILL in the middle of an
// ingest keeps every event it acknowledged with OK true.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// buildPetrel builds cmd/petrel into a temporary directory.
func buildPetrel(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "petrel")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/petrel-relay/petrel/cmd/petrel")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/petrel: %v\n%s", err, out)
	}
	return bin
}

// petrelProc is a running `petrel serve`.
type petrelProc struct {
	cmd  *exec.Cmd
	url  string // ws://host:port
	http string // http://host:port
	done chan struct{}
}

// listenRE finds the address in the "petrel listening" log line (text:
// url=ws://..., JSON: "url":"ws://...").
var listenRE = regexp.MustCompile(`url"?[=:]"?ws://([0-9.]+:[0-9]+)`)

// startPetrel runs `petrel serve` on a free loopback port over dataDir and
// waits until it listens. env adds environment variables (PETREL_...
// configuration overrides).
func startPetrel(t *testing.T, bin, dataDir string, env ...string) *petrelProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--log-level", "info")
	// The time valve (relay.max_event_wait) off, as relaytest has it: a
	// loaded test machine starves the relay past it (seen: TestDurabilityKill9
	// refused "rate-limited:" at load 60), which is not what these tests
	// check. A test may still set it through env.
	cmd.Env = append(append(os.Environ(), "PETREL_RELAY_MAX_EVENT_WAIT=-1s"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start petrel: %v", err)
	}
	p := &petrelProc{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	var logs strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if logs.Len() < 1<<16 {
				logs.WriteString(line + "\n")
			}
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	select {
	case a := <-addr:
		p.url, p.http = "ws://"+a, "http://"+a
	case <-p.done:
		t.Fatalf("petrel serve exited before listening:\n%s", logs.String())
	case <-time.After(relaytest.DefaultTimeout):
		t.Fatalf("petrel serve did not report its address:\n%s", logs.String())
	}
	return p
}

// kill sends SIGKILL and waits for the process to exit.
func (p *petrelProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stats fetches the process's /stats document.
func (p *petrelProc) stats(t *testing.T) map[string]any {
	t.Helper()
	cl := &http.Client{Timeout: relaytest.DefaultTimeout}
	resp, err := cl.Get(p.http + "/stats")
	if err != nil {
		t.Fatalf("/stats: %v", err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("/stats: %v", err)
	}
	return m
}

func TestDurabilityKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs petrel: not in -short")
	}
	bin := buildPetrel(t)
	data := t.TempDir()
	p := startPetrel(t, bin, data)
	if backend, _ := p.stats(t)["store_backend"].(string); backend == "model" || backend == "" {
		t.Skipf("petrel serve runs the in-memory model store (store_backend=%q): durability cannot be tested until cmd/petrel opens the pebble store", backend)
	}

	const n = 4000
	alice := relaytest.NewKey("durability")
	evs := make([]*nostr.Event, n)
	for i := range evs {
		evs[i] = alice.Event(1, fmt.Sprintf("durable %d %s", i, strings.Repeat("d", 200)), nostr.Tags{{"t", "durable"}}, time.Now().Unix()-int64(i))
	}
	killAt := n/10 + rand.IntN(8*n/10) // after this many OK true
	c, err := relaytest.DialWith(t, p.url, relaytest.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Pipelined ingest; SIGKILL once killAt OKs arrived, with more in
	// flight. Errors after the kill are expected.
	acked := map[nostr.ID]bool{}
	sent, outstanding := 0, 0
	killed := false
	for !killed && (sent < n || outstanding > 0) {
		if sent < n && outstanding < 200 {
			if err := c.WriteMessage(websocket.TextMessage, []byte(`["EVENT",`+string(evs[sent].Raw)+`]`)); err != nil {
				t.Fatalf("send: %v", err)
			}
			sent++
			outstanding++
			continue
		}
		m, err := c.ReadWithin(relaytest.DefaultTimeout)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if m.Type != "OK" {
			continue
		}
		outstanding--
		if !m.OK {
			t.Fatalf("OK false %q", m.Message)
		}
		acked[m.EventID] = true
		if len(acked) == killAt {
			p.kill()
			killed = true
		}
	}
	// OKs the client had received but not yet read count too.
	for {
		m, err := c.ReadWithin(0)
		if err != nil {
			break
		}
		if m.Type == "OK" && m.OK {
			acked[m.EventID] = true
		}
	}
	t.Logf("killed after %d acknowledged events (%d sent)", len(acked), sent)

	p2 := startPetrel(t, bin, data)
	q := relaytest.Dial(t, p2.url)
	var ids []*nostr.Event
	for _, ev := range evs {
		if acked[ev.ID] {
			ids = append(ids, ev)
		}
	}
	found := 0
	for i := 0; i < len(ids); i += 500 {
		chunk := ids[i:min(i+500, len(ids))]
		got := q.Req(fmt.Sprintf("ids%d", i), `{"ids":`+idsJSON(chunk)+`}`)
		have := idSet(got)
		for _, ev := range chunk {
			if !have[ev.ID] {
				t.Fatalf("event %.12s was acknowledged with OK true but is gone after kill -9", ev.ID.Hex())
			}
		}
		found += len(got)
	}
	t.Logf("all %d acknowledged events found after restart", found)
}
