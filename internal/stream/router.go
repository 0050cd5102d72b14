package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	gosync "sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	psync "github.com/petrel-relay/petrel/internal/sync"
	"github.com/petrel-relay/petrel/internal/tomlcheck"
)

// ErrRouterConfig is wrapped by every error about a router config file.
var ErrRouterConfig = errors.New("stream: router config")

// RouterConfig is the file `petrel router` reads: the local relay, the
// defaults of every stream, and groups of remote relays that share a
// direction and a filter (strfry's router config, in TOML).
type RouterConfig struct {
	// Local is the local relay's URL. Default: the one the caller gives
	// (petrel router: ws:// to the petrel config's server.listen).
	Local string `toml:"local"`
	// CatchUp, Remember and Window are the defaults of Options.CatchUp,
	// Options.Remember and Options.Window for every group. CatchUp "0s":
	// no catch-up.
	CatchUp  *time.Duration `toml:"catchup"`
	Remember int            `toml:"remember"`
	Window   int            `toml:"window"`
	// Groups maps a group's name to the group.
	Groups map[string]RouterGroup `toml:"groups"`
}

// RouterGroup is one group of streams: one Stream per URL, all with the
// same direction and filter.
type RouterGroup struct {
	// Dir is "down", "up" or "both" (required).
	Dir string `toml:"dir"`
	// URLs are the remote relays (at least one).
	URLs []string `toml:"urls"`
	// Filter is a NIP-01 filter written as a TOML table, for example
	// { kinds = [1, 7], "#t" = ["nostr"] }. Default: every event.
	Filter map[string]any `toml:"filter"`
	// CatchUp, Remember and Window override the file's defaults.
	CatchUp  *time.Duration `toml:"catchup"`
	Remember int            `toml:"remember"`
	Window   int            `toml:"window"`
}

// LoadRouterConfig reads and checks a router config file. Unknown keys
// are errors.
func LoadRouterConfig(path string) (RouterConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return RouterConfig{}, fmt.Errorf("%w: %w", ErrRouterConfig, err)
	}
	return parseRouterConfig(path, data)
}

// parseRouterConfig checks data, the text of the router config file at
// path (named in errors).
func parseRouterConfig(path string, data []byte) (RouterConfig, error) {
	var c RouterConfig
	if err := tomlcheck.Decode(string(data), &c); err != nil {
		return c, fmt.Errorf("%w: %s: %w", ErrRouterConfig, path, err)
	}
	if len(c.Groups) == 0 {
		return c, fmt.Errorf("%w: %s: no [groups.<name>] defined", ErrRouterConfig, path)
	}
	return c, nil
}

// Streams returns the options of every stream the config defines, one
// per (group, URL), ordered by group name then URL as written. local is
// the local relay when the file names none; normalize completes a typed
// URL (scheme-less host names) and log is every stream's logger. Each
// Options is checked as New would check it.
func (c RouterConfig) Streams(local string, normalize func(string) string, log *slog.Logger) ([]Options, error) {
	if c.Local != "" {
		local = c.Local
	}
	if normalize == nil {
		normalize = func(s string) string { return s }
	}
	var out []Options
	for _, name := range slices.Sorted(maps.Keys(c.Groups)) {
		g := c.Groups[name]
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%w: group %q: %s", ErrRouterConfig, name, fmt.Sprintf(format, args...))
		}
		dir, err := psync.ParseDirection(g.Dir)
		if err != nil {
			return nil, fail("dir %q: want down, up or both", g.Dir)
		}
		if len(g.URLs) == 0 {
			return nil, fail("no urls")
		}
		var f nostr.Filter
		if len(g.Filter) > 0 {
			raw, err := json.Marshal(g.Filter)
			if err != nil {
				return nil, fail("filter: %v", err)
			}
			if f, err = nostr.ParseFilterStrict(raw, nil); err != nil {
				return nil, fail("filter %s: %v", raw, err)
			}
		}
		catchUp := pick(g.CatchUp, c.CatchUp)
		seen := map[string]bool{}
		for _, u := range g.URLs {
			u = normalize(u)
			if seen[u] {
				return nil, fail("%s listed twice", u)
			}
			seen[u] = true
			o := Options{Name: name, Local: normalize(local), Remote: u, Direction: dir, Filter: f,
				Remember: cmpOr(g.Remember, c.Remember), Window: cmpOr(g.Window, c.Window), Logger: log}
			if catchUp != nil {
				o.CatchUp = *catchUp
				if o.CatchUp == 0 {
					o.CatchUp = -1 // "0s" in the file: none
				}
			}
			check := o
			if err := check.normalize(); err != nil {
				return nil, fail("%v", err)
			}
			out = append(out, o)
		}
	}
	return out, nil
}

func pick(a, b *time.Duration) *time.Duration {
	if a != nil {
		return a
	}
	return b
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// Router runs many Streams in one process and can swap its set of
// streams while running (Apply): streams whose options did not change
// keep running, their connections and counters untouched. A stream
// without an AuthKey whose relay requires NIP-42 authentication stops
// (Stream.Run logs why) while the others go on; the next Apply starts it
// again. Its methods are safe for concurrent use.
type Router struct {
	log *slog.Logger
	ctx context.Context

	mu      gosync.Mutex
	running map[string]*routed // by key
	wg      gosync.WaitGroup
}

// routed is one running stream of a Router.
type routed struct {
	o      Options
	s      *Stream
	cancel context.CancelFunc
	done   chan struct{}
}

// ended reports whether the stream's Run has returned.
func (rt *routed) ended() bool {
	select {
	case <-rt.done:
		return true
	default:
		return false
	}
}

// key identifies a stream within a router: its group and remote.
func key(o *Options) string { return o.Name + "\x00" + o.Remote }

// NewRouter returns a Router whose streams run until ctx ends.
func NewRouter(ctx context.Context, log *slog.Logger) *Router {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Router{ctx: ctx, log: log, running: make(map[string]*routed)}
}

// Apply makes the router run exactly the streams of opts: it stops those
// no longer listed or whose options changed (waiting for them to end),
// and starts the new and changed ones, and again those that have stopped
// by themselves (a relay that required authentication: a reload retries
// it, once the relay or the key has been seen to). It returns the
// numbers started, stopped (of those that were running) and kept, or an
// error (and changes nothing) if an Options is invalid.
func (r *Router) Apply(opts []Options) (started, stopped, kept int, err error) {
	want := make(map[string]*Stream, len(opts))
	for i := range opts {
		k := key(&opts[i])
		if want[k] != nil {
			return 0, 0, 0, fmt.Errorf("%w: stream %s of group %q twice", ErrOptions, opts[i].Remote, opts[i].Name)
		}
		s, err := New(opts[i])
		if err != nil {
			return 0, 0, 0, fmt.Errorf("group %q, %s: %w", opts[i].Name, opts[i].Remote, err)
		}
		want[k] = s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, rt := range r.running {
		ended := rt.ended()
		if s := want[k]; s != nil && !ended && sameOptions(&rt.s.o, &s.o) {
			delete(want, k)
			kept++
			continue
		}
		rt.cancel()
		<-rt.done
		delete(r.running, k)
		if !ended {
			stopped++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		s := want[k]
		ctx, cancel := context.WithCancel(r.ctx)
		rt := &routed{o: s.o, s: s, cancel: cancel, done: make(chan struct{})}
		r.running[k] = rt
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer close(rt.done)
			_ = s.Run(ctx)
		}()
		started++
	}
	return started, stopped, kept, nil
}

// sameOptions reports whether two normalized Options run the same
// stream.
func sameOptions(a, b *Options) bool {
	x, y := *a, *b
	x.Logger, y.Logger = nil, nil
	return reflect.DeepEqual(x, y)
}

// Stats returns the counters of the running streams, by group then
// remote.
func (r *Router) Stats() []Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Stats, 0, len(r.running))
	for _, k := range slices.Sorted(maps.Keys(r.running)) {
		out = append(out, r.running[k].s.Stats())
	}
	return out
}

// Wait waits until every stream has ended (after the router's context
// ended).
func (r *Router) Wait() { r.wg.Wait() }
