package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/server"
)

// serveProc is a petrel serve process started by a test.
type serveProc struct {
	cmd  *exec.Cmd
	URL  string // ws://host:port
	HTTP string // http://host:port

	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
}

var listeningURL = regexp.MustCompile(`petrel listening.*? url=(ws://[^\s"]+)`)

// startServeProc runs bin serve with args (and PETREL_CONFIG cleared, env
// added) and waits for it to listen. The process is stopped with SIGTERM
// at the end of the test.
func startServeProc(t *testing.T, bin string, env []string, args ...string) *serveProc {
	t.Helper()
	return startProc(t, bin, env, append([]string{"serve"}, args...)...)
}

// startProc runs bin with args (a petrel serve command line, or one that
// executes one in the same process) as startServeProc does.
func startProc(t *testing.T, bin string, env []string, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(append(os.Environ(), "PETREL_CONFIG="), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listeningURL.FindStringSubmatch(sc.Text()); m != nil && !sent {
				url <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
		if !sent {
			close(url)
		}
		p.cmd.Wait()
	}()
	t.Cleanup(p.stop)
	select {
	case u, ok := <-url:
		if !ok {
			t.Fatalf("petrel serve exited before listening:\n%s", p.Log())
		}
		p.URL = u
		p.HTTP = "http://" + strings.TrimPrefix(u, "ws://")
	case <-time.After(60 * time.Second):
		t.Fatalf("petrel serve not listening after 60s:\n%s", p.Log())
	}
	return p
}

// Log returns what the process has logged so far.
func (p *serveProc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *serveProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// Stats reads /stats.
func (p *serveProc) Stats(t *testing.T) server.Stats {
	t.Helper()
	resp, err := http.Get(p.HTTP + "/stats")
	if err != nil {
		t.Fatalf("GET /stats: %v", err)
	}
	defer resp.Body.Close()
	var st server.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /stats: %v", err)
	}
	return st
}
