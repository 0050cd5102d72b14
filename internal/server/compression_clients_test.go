package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// clientReport is what an outside client (Node's ws, a browser) reports:
// the extensions it negotiated and every message it received, in order.
type clientReport struct {
	Extensions string   `json:"extensions"`
	Messages   []string `json:"messages"`
	Error      string   `json:"error"`
}

// checkOutsideClient runs an outside client against a relay with
// compression on: start begins it (subscription subID to kinds 1, a
// signal on ready after EOSE, its report on result once it has all the
// events). Two of testNotes are stored before it connects and three
// published after its EOSE; it must have negotiated permessage-deflate
// and received exactly what an uncompressed client subscribed the same
// way receives, and the relay must have sent compressed frames.
func checkOutsideClient(t *testing.T, subID string, start func(url string, want int) (ready <-chan struct{}, result <-chan clientReport)) {
	r := relaytest.Start(t, relaytest.Options{})
	notes := testNotes()
	pub := relaytest.Dial(t, r.URL)
	for _, ev := range notes[:2] {
		pub.MustPublish(ev)
	}
	plain := relaytest.Dial(t, r.URL)
	plain.SendRaw(`["REQ","` + subID + `",{"kinds":[1]}]`)
	var want []string
	for {
		m := plain.ReadRaw()
		want = append(want, string(m))
		if strings.HasPrefix(string(m), `["EOSE"`) {
			break
		}
	}
	ready, result := start(r.URL, len(notes))
	select {
	case <-ready:
	case rep := <-result:
		t.Fatalf("client ended before EOSE: %+v", rep)
	case <-time.After(60 * time.Second):
		t.Fatal("client not ready after 60s")
	}
	before := r.Stats().FramesCompressed
	for _, ev := range notes[2:] {
		pub.MustPublish(ev)
		want = append(want, string(plain.ReadRaw()))
	}
	var rep clientReport
	select {
	case rep = <-result:
	case <-time.After(60 * time.Second):
		t.Fatal("no report from the client after 60s")
	}
	if rep.Error != "" {
		t.Fatalf("client: %s", rep.Error)
	}
	if !strings.Contains(rep.Extensions, "permessage-deflate") {
		t.Fatalf("client negotiated %q; want permessage-deflate", rep.Extensions)
	}
	if len(rep.Messages) != len(want) {
		t.Fatalf("client got %d messages; want %d", len(rep.Messages), len(want))
	}
	for i := range want {
		if rep.Messages[i] != want[i] {
			t.Fatalf("message %d: client got %q; want %q", i, rep.Messages[i], want[i])
		}
	}
	if got := r.Stats().FramesCompressed - before; got < int64(len(notes)-2) {
		t.Fatalf("%d live frames compressed; want %d", got, len(notes)-2)
	}
	t.Logf("negotiated %q, %d messages identical", rep.Extensions, len(want))
}

// nodeWS returns the directory of an npm install of testdata/node (Node's
// ws), installing it into the user's cache directory the first time, or
// skips the test if node or npm is missing or the install fails.
func nodeWS(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed (the Node ws interop test needs node and npm)", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "petrel-test", "node-ws")
	lock, err := os.ReadFile("testdata/node/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	if old, err := os.ReadFile(filepath.Join(dir, "package-lock.json")); err != nil || string(old) != string(lock) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join("testdata/node", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--prefix", dir).CombinedOutput()
		if err != nil {
			_ = os.Remove(filepath.Join(dir, "package-lock.json"))
			t.Skipf("skipping: npm ci of Node's ws failed (no registry?): %v %s", err, out)
		}
	}
	return dir
}

// TestCompressionNodeWS: Node's ws client negotiates permessage-deflate
// and receives exactly what an uncompressed client does.
func TestCompressionNodeWS(t *testing.T) {
	dir := nodeWS(t)
	script, err := filepath.Abs("testdata/node/client.js")
	if err != nil {
		t.Fatal(err)
	}
	checkOutsideClient(t, "node", func(url string, want int) (<-chan struct{}, <-chan clientReport) {
		ready := make(chan struct{})
		result := make(chan clientReport, 1)
		cmd := exec.Command("node", script, url, strconv.Itoa(want))
		cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if line == "READY" {
					close(ready)
					continue
				}
				var rep clientReport
				if err := json.Unmarshal([]byte(line), &rep); err != nil {
					rep.Error = "unreadable report: " + line
				}
				result <- rep
				return
			}
			result <- clientReport{Error: "node exited without a report"}
		}()
		return ready, result
	})
}

// TestCompressionBrowser: headless Chromium's WebSocket negotiates
// permessage-deflate and receives exactly what an uncompressed client
// does.
func TestCompressionBrowser(t *testing.T) {
	var browser string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("skipping: no chromium, chromium-browser or google-chrome on PATH")
	}
	page, err := os.ReadFile("testdata/browser.html")
	if err != nil {
		t.Fatal(err)
	}
	checkOutsideClient(t, "browser", func(relayURL string, want int) (<-chan struct{}, <-chan clientReport) {
		ready := make(chan struct{}, 1)
		result := make(chan clientReport, 1)
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(page)
		})
		mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
			select {
			case ready <- struct{}{}:
			default:
			}
		})
		mux.HandleFunc("/result", func(w http.ResponseWriter, r *http.Request) {
			var rep clientReport
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &rep); err != nil {
				rep.Error = "unreadable report: " + string(b)
			}
			select {
			case result <- rep:
			default:
			}
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		pageURL := srv.URL + "/?" + url.Values{"relay": {relayURL}, "want": {strconv.Itoa(want)}}.Encode()
		cmd := exec.Command(browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-extensions", "--user-data-dir="+browserProfile(t), pageURL)
		// Its own process group, so that the cleanup ends the browser's
		// helper processes too, not the browser process alone.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		return ready, result
	})
}
