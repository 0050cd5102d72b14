// Command testprogress runs `go test` on packages and shows progress per
// package as it goes, for `make test`: a plain `go test ./...` prints a
// package's result only when it ends and keeps later packages' results
// back until the earlier ones are printed, so a run was silent for
// minutes at a time.
//
//	testprogress [-j N] [-every 30s] PACKAGES... [-- GO-TEST-FLAGS...]
//
// Each package is tested by its own `go test -json` (so its events stream
// as they happen), up to -j at once. A line is printed when a package
// ends (ok or FAIL, its time and its counts, and the output of its failed
// tests), and every -every the packages still running, with their
// running tests. The last line is "N passed, N failed, N skipped" (top
// level tests); the exit status is 1 when any package failed (a failed
// test, a build failure, a crash or a timeout), 0 otherwise.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// pkgRun is the state of one package's test process.
type pkgRun struct {
	name                    string
	start                   time.Time
	running                 map[string]bool // top-level tests running now
	outputs                 map[string]*capped
	pkgOut                  bytes.Buffer // output outside any test (build errors, panics, summary)
	passed, failed, skipped int
	failedTests             []string
	result                  string // pass, fail, skip (no tests)
}

type runner struct {
	mu      sync.Mutex
	out     io.Writer
	active  map[string]*pkgRun
	passed  int
	failed  int
	skipped int
	pkgFail []string
}

func main() {
	jobs := flag.Int("j", runtime.NumCPU(), "packages tested at once")
	every := flag.Duration("every", 30*time.Second, "how often to list the packages still running")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testprogress [-j N] [-every 30s] PACKAGES... [-- GO-TEST-FLAGS...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	patterns, testFlags := flag.Args(), []string(nil)
	if i := slices.Index(patterns, "--"); i >= 0 {
		patterns, testFlags = patterns[:i], patterns[i+1:]
	}
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	pkgs, err := listPackages(patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	r := &runner{out: os.Stdout, active: map[string]*pkgRun{}}
	stop := make(chan struct{})
	go r.heartbeat(*every, stop)
	work := make(chan string)
	var wg sync.WaitGroup
	for range max(1, *jobs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				r.test(p, testFlags)
			}
		}()
	}
	for _, p := range pkgs {
		work <- p
	}
	close(work)
	wg.Wait()
	close(stop)
	if len(r.pkgFail) > 0 {
		fmt.Fprintf(r.out, "\nFAILED: %s\n", strings.Join(r.pkgFail, " "))
	}
	fmt.Fprintf(r.out, "%d passed, %d failed, %d skipped\n", r.passed, r.failed, r.skipped)
	if len(r.pkgFail) > 0 {
		os.Exit(1)
	}
}

// listPackages expands the patterns as go test would.
func listPackages(patterns []string) ([]string, error) {
	cmd := exec.Command("go", append([]string{"list"}, patterns...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(patterns, " "), err)
	}
	return strings.Fields(string(out)), nil
}

// test runs one package's tests and reports them.
func (r *runner) test(pkg string, testFlags []string) {
	p := &pkgRun{name: pkg, start: time.Now(), running: map[string]bool{}, outputs: map[string]*capped{}}
	r.mu.Lock()
	r.active[pkg] = p
	r.mu.Unlock()

	args := append(append([]string{"test", "-json"}, testFlags...), pkg)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err == nil {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			r.handle(p, sc.Bytes())
		}
		err = cmd.Wait()
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.active, pkg)
	elapsed := time.Since(p.start).Round(100 * time.Millisecond)
	r.passed += p.passed
	r.failed += p.failed
	r.skipped += p.skipped
	counts := fmt.Sprintf("%d passed", p.passed)
	if p.failed > 0 {
		counts += fmt.Sprintf(", %d failed", p.failed)
	}
	if p.skipped > 0 {
		counts += fmt.Sprintf(", %d skipped", p.skipped)
	}
	switch {
	case err == nil && p.result == "skip":
		fmt.Fprintf(r.out, "-    %s (no tests)\n", pkg)
	case err == nil && p.failed == 0:
		fmt.Fprintf(r.out, "ok   %s %v (%s)\n", pkg, elapsed, counts)
	default:
		r.pkgFail = append(r.pkgFail, pkg)
		fmt.Fprintf(r.out, "FAIL %s %v (%s)\n", pkg, elapsed, counts)
		shown := false
		for _, t := range p.failedTests {
			if b := p.outputs[t]; b != nil && b.len() > 0 {
				indent(r.out, b.String())
				shown = true
			}
		}
		if !shown {
			// A build failure, a crash, a timeout or a race found
			// outside any test: what the package printed outside its
			// tests says which.
			indent(r.out, p.pkgOut.String())
		}
		indent(r.out, stderr.String())
		if err != nil && stderr.Len() == 0 {
			indent(r.out, err.Error()+"\n")
		}
	}
}

// handle takes one line of a package's JSON output.
func (r *runner) handle(p *pkgRun, line []byte) {
	var e event
	if json.Unmarshal(line, &e) != nil {
		p.pkgOut.Write(line)
		p.pkgOut.WriteByte('\n')
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	top := e.Test != "" && !strings.Contains(e.Test, "/")
	if e.Test == "" {
		switch e.Action {
		case "output", "build-output":
			p.pkgOut.WriteString(e.Output)
		case "pass", "fail", "skip":
			p.result = e.Action
		}
		return
	}
	root, _, _ := strings.Cut(e.Test, "/")
	switch e.Action {
	case "run":
		if top {
			p.running[e.Test] = true
		}
	case "output":
		b := p.outputs[root]
		if b == nil {
			b = &capped{}
			p.outputs[root] = b
		}
		b.add(e.Output)
	case "pass", "fail", "skip":
		if !top {
			return
		}
		delete(p.running, e.Test)
		switch e.Action {
		case "pass":
			p.passed++
			delete(p.outputs, e.Test)
		case "fail":
			p.failed++
			p.failedTests = append(p.failedTests, e.Test)
		case "skip":
			p.skipped++
			delete(p.outputs, e.Test)
		}
	}
}

// capped keeps the start and the end of a test's output: a chatty test
// (a relay logging through t.Log) can print megabytes, and its failure
// message comes last, so keeping only the start would drop the why.
type capped struct {
	head    bytes.Buffer
	tail    []string // lines after the head, the oldest dropped first
	tailLen int
	dropped int // bytes dropped between the head and the tail
}

// The head keeps up to capHead bytes, the tail up to capTail.
const capHead, capTail = 32 << 10, 96 << 10

func (c *capped) add(s string) {
	if c.head.Len()+len(s) <= capHead && len(c.tail) == 0 {
		c.head.WriteString(s)
		return
	}
	c.tail = append(c.tail, s)
	c.tailLen += len(s)
	for c.tailLen > capTail && len(c.tail) > 1 {
		c.tailLen -= len(c.tail[0])
		c.dropped += len(c.tail[0])
		c.tail = c.tail[1:]
	}
}

func (c *capped) len() int { return c.head.Len() + c.tailLen }

func (c *capped) String() string {
	var b strings.Builder
	b.Write(c.head.Bytes())
	if c.dropped > 0 {
		fmt.Fprintf(&b, "... %d bytes of output left out ...\n", c.dropped)
	}
	for _, l := range c.tail {
		b.WriteString(l)
	}
	return b.String()
}

// heartbeat lists the packages still running every d.
func (r *runner) heartbeat(d time.Duration, stop <-chan struct{}) {
	if d <= 0 {
		return
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		names := make([]string, 0, len(r.active))
		for n := range r.active {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			p := r.active[n]
			tests := make([]string, 0, len(p.running))
			for t := range p.running {
				tests = append(tests, t)
			}
			slices.Sort(tests)
			if len(tests) > 4 {
				tests = append(tests[:4], fmt.Sprintf("and %d more", len(tests)-4))
			}
			now := "building"
			if len(tests) > 0 {
				now = "running " + strings.Join(tests, ", ")
			} else if p.passed+p.failed+p.skipped > 0 {
				now = "between tests"
			}
			fmt.Fprintf(r.out, "...  %s %v: %d passed so far, %s\n", n, time.Since(p.start).Round(time.Second), p.passed, now)
		}
		r.mu.Unlock()
	}
}

// indent writes s to w, each line indented.
func indent(w io.Writer, s string) {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return
	}
	for _, l := range strings.Split(s, "\n") {
		fmt.Fprintf(w, "    %s\n", l)
	}
}
