package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/bench"
	"github.com/petrel-relay/petrel/internal/cli"
)

func init() { extraCommands = append(extraCommands, benchCmd) }

// Exit codes of `petrel bench`.
const (
	benchExitOK      = 0
	benchExitError   = 1 // bad options, nothing measured
	benchExitFailure = 2 // measured, with failures (listed first)
)

// benchExit ends the process with a scenario's exit code; tests replace it.
var benchExit = os.Exit

// benchFlags are the flags every scenario takes.
type benchFlags struct {
	o         bench.Options
	rates     string
	start     float64
	step      float64
	steps     int
	jsonOut   bool
	quiet     bool
	createdAt int64
	cpuProf   string
	traceOut  string
	nodeURLs  string
	pids      string
}

func (f *benchFlags) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	o := &f.o
	fs.StringVar(&o.URL, "url", "ws://127.0.0.1:7447", "relay WebSocket URL (127.0.0.0/8 or ::1 unless --allow-remote)")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "allow a target that is not a loopback address")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the generated authors and events")
	fs.IntVar(&o.Authors, "authors", 100, "number of generated authors")
	fs.Int64Var(&f.createdAt, "created-at", 0, "created_at of the first generated event, unix seconds (0: so the newest event is now); pin it with --seed for byte-identical events")
	fs.IntVar(&o.Events, "events", 0, "events to publish (ingest, parallel: 10000; fanout: 1000)")
	fs.IntVar(&o.Window, "window", 64, "events in flight per publishing connection")
	fs.IntVar(&o.Conns, "conns", 0, "connections (parallel, ladder: 8; conns: 1000; req, feed, search: 1)")
	fs.IntVar(&o.Subs, "subs", 100, "fanout subscribers")
	fs.IntVar(&o.Pubs, "pubs", 1, "fanout publishing connections")
	fs.StringVar(&o.Text, "text", bench.TextVocabulary, "generated content: vocabulary (248 words, evenly) or natural (Zipf over 200,000 words: a search index's real cost)")
	fs.IntVar(&o.Fill, "fill", 10000, "events stored before req, feed and search (-1: query what is there)")
	fs.IntVar(&o.Requests, "requests", 200, "REQs measured by req, feed and search")
	fs.IntVar(&o.Limit, "limit", 1000, "events per req REQ (split over several filters above the relay's max_limit)")
	fs.StringVar(&f.rates, "rates", "", "ladder offered rates, events/s, comma-separated (default 1000,2000,4000,8000,16000)")
	fs.Float64Var(&f.start, "start", 0, "ladder: first rate (with --step and --steps, instead of --rates)")
	fs.Float64Var(&f.step, "step", 0, "ladder: rate increment between steps")
	fs.IntVar(&f.steps, "steps", 0, "ladder: number of steps")
	fs.DurationVar(&o.Hold, "hold", 5*time.Second, "ladder step length; conns idle hold before the liveness check")
	fs.DurationVar(&o.MaxP99, "max-p99", 15*time.Millisecond, "ladder: p99 OK latency bound of a passing step")
	fs.Float64Var(&o.MaxErrorRate, "max-error-rate", 0.001, "ladder: refused+missing per sent bound of a passing step and of capacity")
	fs.IntVar(&o.MaxEvents, "max-events", 1_000_000, "most events any scenario pre-signs (ladder: over all steps)")
	fs.IntVar(&o.PerIP, "per-ip", 100, "conns: connections per source address 127.0.0.2, 127.0.0.3, ... (keep at or below the relay's per-IP cap; -1: do not bind)")
	fs.IntVar(&o.PerProcess, "per-process", 0, "conns: most connections per client process; more start worker processes (default 15000, less if the open-file limit is lower)")
	fs.IntVar(&o.DialConcurrency, "dial-concurrency", 64, "connections being opened at once")
	fs.DurationVar(&o.Timeout, "timeout", 0, "bound on the whole scenario, signing excluded (default 120s; ladder: 60s plus --hold and 10s a step)")
	fs.IntVar(&o.PID, "pid", 0, "relay process id: report its CPU time and memory from /proc")
	fs.StringVar(&o.OKTrace, "oktrace", "", "ladder: a petrel relay's debug listener (server.pprof_listen, http://host:port; same host only): split each step's OK latency into before the relay's parse, inside it, and after its OK was queued")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout instead of the table")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fs.StringVar(&f.cpuProf, "cpuprofile", "", "write the bench client's own CPU profile to this file (to check the client is not the bottleneck)")
	fs.StringVar(&f.traceOut, "trace", "", "write the bench client's own runtime trace to this file (go tool trace; where the client's own latency goes)")
	fs.BoolVar(&o.Compress, "compress", false, "offer permessage-deflate on every connection (the wire figures then count compressed bytes)")
	fs.IntVar(&o.SlowSubs, "slow-subs", 0, "fanout: make this many subscribers slow readers")
	fs.DurationVar(&o.SlowReadDelay, "slow-read-delay", 20*time.Millisecond, "fanout: delay per message of a slow subscriber")
	fs.IntVar(&o.SlowReadBuffer, "slow-read-buffer", 4096, "fanout: socket receive buffer of a slow subscriber, bytes")
	fs.StringVar(&o.SubURL, "sub-url", "", "fanout: the subscribers' relay URL (another node of a cluster; default --url)")
	fs.StringVar(&f.nodeURLs, "node-urls", "", "conns: spread the connections over these relay URLs, comma-separated (the nodes of a cluster; the liveness events still go to --url)")
	fs.IntVar(&o.LiveEvents, "live-events", 1, "conns: events published after the hold, each to be received exactly once by every subscription (at most 64)")
	fs.StringVar(&f.pids, "pids", "", "conns: more relay process ids, comma-separated, whose RSS is summed with --pid's")
	fs.Float64Var(&o.Rate, "rate", 0, "fanout: publish open-loop at this many events/s over all publishers (0: as fast as --window allows)")
}

// options returns the scenario options the flags describe.
func (f *benchFlags) options() (bench.Options, error) {
	o := f.o
	o.CreatedAt = f.createdAt
	if f.nodeURLs != "" {
		for _, u := range strings.Split(f.nodeURLs, ",") {
			o.NodeURLs = append(o.NodeURLs, strings.TrimSpace(u))
		}
	}
	if f.pids != "" {
		for _, p := range strings.Split(f.pids, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil || n <= 0 {
				return o, fmt.Errorf("--pids: %q is not a process id", p)
			}
			o.PIDs = append(o.PIDs, n)
		}
	}
	switch {
	case f.rates != "" && f.steps > 0:
		return o, errors.New("give --rates or --start/--step/--steps, not both")
	case f.rates != "":
		for _, s := range strings.Split(f.rates, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return o, fmt.Errorf("--rates: %q is not a number", strings.TrimSpace(s))
			}
			o.Rates = append(o.Rates, v)
		}
	case f.steps > 0:
		if f.start <= 0 || f.step <= 0 {
			return o, errors.New("--steps needs --start and --step above 0")
		}
		for i := 0; i < f.steps; i++ {
			o.Rates = append(o.Rates, f.start+float64(i)*f.step)
		}
	}
	return o, nil
}

// scenarioFuncs maps scenario names to their functions.
var scenarioFuncs = map[string]func(bench.Options) (*bench.Result, error){
	bench.ScenarioIngest:   bench.Ingest,
	bench.ScenarioParallel: bench.Parallel,
	bench.ScenarioFanout:   bench.Fanout,
	bench.ScenarioReq:      bench.Req,
	bench.ScenarioFeed:     bench.Feed,
	bench.ScenarioSearch:   bench.Search,
	bench.ScenarioConns:    bench.Conns,
	bench.ScenarioLadder:   bench.Ladder,
}

var scenarioHelp = map[string]string{
	bench.ScenarioIngest:   "publish --events over one connection with --window events in flight",
	bench.ScenarioParallel: "publish --events over --conns connections, each with --window in flight",
	bench.ScenarioFanout:   "--subs subscribers; publish --events from --pubs connections; count every delivery",
	bench.ScenarioReq:      "fill, then repeat a stored REQ for --limit events; latency to EOSE",
	bench.ScenarioFeed:     "fill, then repeat a 20-author kind-1 timeline REQ (limit 500); latency to EOSE",
	bench.ScenarioSearch:   "fill, then repeat a NIP-50 search REQ (limit 500); says so if the relay refuses or ignores search",
	bench.ScenarioConns:    "hold --conns idle subscribed connections for --hold, then check each receives one event",
	bench.ScenarioLadder:   "open-loop offered rates in steps; knee and capacity",
}

// startProfiles starts the bench client's own CPU profile (--cpuprofile)
// and runtime trace (--trace), those asked for. stop ends them and closes
// their files; call it before benchExit, which skips deferred calls.
func (f *benchFlags) startProfiles() (stop func() error, err error) {
	var stops []func() error
	stop = func() error {
		var first error
		for i := len(stops) - 1; i >= 0; i-- {
			if err := stops[i](); err != nil && first == nil {
				first = err
			}
		}
		stops = nil
		return first
	}
	for _, p := range []struct {
		path  string
		start func(io.Writer) error
		end   func()
	}{{f.cpuProf, pprof.StartCPUProfile, pprof.StopCPUProfile}, {f.traceOut, trace.Start, trace.Stop}} {
		if p.path == "" {
			continue
		}
		file, err := os.Create(p.path)
		if err == nil {
			if err = p.start(file); err != nil {
				file.Close()
			}
		}
		if err != nil {
			stop()
			return nil, err
		}
		stops = append(stops, func() error { p.end(); return file.Close() })
	}
	return stop, nil
}

func benchCmd() *cobra.Command {
	var f benchFlags
	cmd := cli.Group(&cobra.Command{
		Use:   "bench <scenario>",
		Short: "Load-test a Nostr relay (any NIP-01 relay) on this machine",
		Long: `Load-test a Nostr relay with deterministic signed events.

Every scenario checks its counts exactly (one OK per EVENT, every expected
delivery exactly once). A run that lost anything prints FAIL and the reasons
on its first line (and a "failures" array with --json) and exits with code 2.
Targets are limited to loopback addresses unless --allow-remote.`,
	})
	f.register(cmd)
	for _, name := range bench.Scenarios {
		name := name
		cmd.AddCommand(&cobra.Command{
			Use:   name,
			Short: scenarioHelp[name],
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, args []string) error {
				o, err := f.options()
				if err != nil {
					return err
				}
				if name == bench.ScenarioConns {
					exe, err := os.Executable()
					if err != nil {
						return err
					}
					o.WorkerCommand = []string{exe, "bench", "conns-worker"}
				}
				stopProfiles, err := f.startProfiles()
				if err != nil {
					return err
				}
				code := runBench(name, o, f.jsonOut, f.quiet, c.OutOrStdout(), c.ErrOrStderr())
				perr := stopProfiles()
				if code != benchExitOK {
					if perr != nil {
						fmt.Fprintln(c.ErrOrStderr(), "petrel bench:", perr)
					}
					benchExit(code)
				}
				return perr
			},
		})
	}
	cmd.AddCommand(&cobra.Command{
		Use:    "conns-worker",
		Short:  "worker process of the conns scenario (JSON lines on stdin/stdout)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return bench.RunConnsWorker(os.Stdin, os.Stdout)
		},
	})
	return cmd
}

// runBench runs one scenario, writes its report and returns the exit
// code: 0, 1 (options refused, nothing measured) or 2 (failures).
func runBench(name string, o bench.Options, jsonOut, quiet bool, stdout, stderr io.Writer) int {
	fn, ok := scenarioFuncs[name]
	if !ok {
		fmt.Fprintf(stderr, "petrel bench: unknown scenario %q\n", name)
		return benchExitError
	}
	if !quiet {
		if p := newBenchProgress(stderr); p != nil {
			o.Progress = p
		}
	}
	res, err := fn(o)
	if err != nil {
		if jsonOut {
			json.NewEncoder(stdout).Encode(map[string]any{"scenario": name, "error": err.Error(), "failures": []string{err.Error()}})
		}
		// The line names the command: not the package's "bench: " again.
		fmt.Fprintf(stderr, "petrel bench %s: %s\n", name, strings.TrimPrefix(err.Error(), "bench: "))
		return benchExitError
	}
	if jsonOut {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			fmt.Fprintf(stderr, "petrel bench: %v\n", err)
			return benchExitError
		}
	} else if err := res.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "petrel bench: %v\n", err)
		return benchExitError
	}
	if res.Failed() {
		return benchExitFailure
	}
	return benchExitOK
}
