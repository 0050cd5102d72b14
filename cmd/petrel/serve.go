package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/cluster"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// commonFlags are the flags every store-using subcommand takes.
type commonFlags struct {
	configPath string
	dataDir    string
	logLevel   string
}

func (f *commonFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.configPath, "config", "c", os.Getenv("PETREL_CONFIG"), "TOML config file (env PETREL_CONFIG)")
	cmd.Flags().StringVar(&f.dataDir, "data", "", "data directory of the embedded store (overrides store.path)")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (overrides log.level)")
}

// load reads the config file and environment, then applies flags.
func (f *commonFlags) load() (config.Config, error) {
	cfg, err := config.Load(f.configPath, os.Environ())
	if err != nil {
		return cfg, err
	}
	if f.dataDir != "" {
		cfg.Store.Path = f.dataDir
	}
	if f.logLevel != "" {
		cfg.Log.Level = f.logLevel
	}
	return cfg.Normalize(), nil
}

func newLogger(c config.Log) (*slog.Logger, error) { return newLoggerTo(os.Stderr, c) }

// newLoggerTo returns the logger c describes, writing to w. Durations are
// written as Go durations ("41ms") in both formats: the JSON handler alone
// would write integer nanoseconds, unlike the text log and the docs.
func newLoggerTo(w io.Writer, c config.Log) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", c.Level, err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch c.Format {
	case "json":
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", c.Format)
}

func serveCmd() *cobra.Command {
	var cf commonFlags
	var listen string
	var check bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the relay (zero config: 127.0.0.1:7447, store in ./petrel-data)",
		Long: `Run the relay (zero config: 127.0.0.1:7447, store in ./petrel-data).

SIGINT or SIGTERM stops it gracefully. SIGHUP reads the configuration
again: the [policy] write lists, rate limits and proof of work, the
[relay] message limits and [info] apply at once, other changes at the
next start (the log says which). --check checks a configuration without
starting. See docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			load := func() (config.Config, error) {
				cfg, err := cf.load()
				if err == nil && listen != "" {
					cfg.Server.Listen = listen
				}
				return cfg, err
			}
			cfg, err := load()
			if err != nil {
				return err
			}
			if check {
				if err := checkConfig(cfg); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), checkedLine(cf.configPath, cfg))
				return nil
			}
			return serve(cfg, load)
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&listen, "listen", "l", "", "address to listen on (overrides server.listen)")
	cmd.Flags().BoolVar(&check, "check", false, "check the configuration (file, environment, flags) as serve would, print every problem or one OK line, and exit; opens, binds and connects to nothing")
	return cmd
}

// checkConfig reports, all together, what serve would refuse in cfg
// (loaded: config.Load has checked its numbers and names) before it
// serves, without opening the store, listening or connecting: what
// server.New, relay.New, the policy, the plugin's start, the PostgreSQL
// store's Open and newBridge check first. What only the running system
// can tell (the data directory held by another relay, the database or
// NATS unreachable, the address in use) is not checked.
func checkConfig(cfg config.Config) error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(cfg.Server.Check())
	add(cfg.Relay.Check())
	add(cfg.Info.Check())
	add(cfg.Policy.Validate())
	add(policy.CheckPlugin(cfg.Policy))
	if cfg.Store.Backend == "postgres" {
		if cfg.Store.PostgresURL == "" {
			add(errNoPostgresURL)
		} else {
			add(postgresOptions(cfg, nil).Check())
		}
	}
	add(checkCluster(cfg))
	return errors.Join(errs...)
}

// checkedLine is what serve --check prints for a configuration it takes
// (loaded, so normalized):
// where it came from and what it sets up (no secret: the PostgreSQL URL
// is left out).
func checkedLine(path string, cfg config.Config) string {
	from := "no config file (defaults, PETREL_* environment and flags)"
	if path != "" {
		from = path
	}
	st := "store pebble at " + cfg.Store.Path
	if cfg.Store.Backend == "postgres" {
		st = "store postgres, schema " + cfg.Store.PostgresSchema
	}
	node := "one node"
	if cfg.Cluster.NATSURL != "" {
		node = "cluster on " + cluster.RedactURL(cfg.Cluster.NATSURL) + ", subject " + cfg.Cluster.Subject
	}
	return fmt.Sprintf("config OK: %s: listen %s, %s, %s, verify_mode %s",
		from, cfg.Server.Listen, st, node, cfg.Relay.VerifyMode)
}

// serve runs the relay cfg describes until SIGINT or SIGTERM; at SIGHUP
// it reads the configuration again with load (reload).
func serve(cfg config.Config, load func() (config.Config, error)) error {
	// From the start: a reload during start-up waits for it to end
	// (SIGHUP's default would end the process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	start := time.Now()
	first, again := execMarker()
	if !first.IsZero() {
		start = first // the start-up logged counts both processes
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	slackHow := ""
	if d := timerSlack(cfg.Runtime, servingProcs(cfg.Runtime)); d > 0 {
		// Returns only if it did not execute petrel again.
		if how, err := applyTimerSlack(d, start, again); err != nil {
			log.Warn("timer slack left as inherited", "want", d, "err", err)
		} else {
			log.Debug("timer slack set", "slack", d, "how", how)
			slackHow = how
		}
	}
	// The relay is made after the store; a late commit (postgres) that
	// comes before it is only logged by the store.
	var announce atomic.Pointer[relay.Relay]
	stopRuntime := applyRuntime(cfg.Runtime, log, func() uint64 {
		if rl := announce.Load(); rl != nil {
			return uint64(max(rl.OutQueueBytes(), 0))
		}
		return 0
	}, func() bool {
		rl := announce.Load()
		return rl != nil && rl.InflightEvents() > 0
	})
	defer stopRuntime()
	// The address first: one that is taken (another relay on the port)
	// fails before the store is opened, or created where none was.
	ln, err := server.Bind(cfg.Server)
	if err != nil {
		return err
	}
	serving := false
	defer func() {
		if !serving {
			ln.Close()
		}
	}()
	st, err := openStoreWith(cfg, log, func(ev *nostr.Event, seq uint64) {
		if rl := announce.Load(); rl != nil {
			rl.Announce(ev, seq)
		}
	})
	if err != nil {
		return err
	}
	verifier := nostr.DefaultVerifier()
	if verifier.Name() != nostr.VerifierLibsecp {
		_, why := nostr.LibsecpVerifier()
		log.Warn("signature verification on the pure-Go fallback (3-4x slower); install libsecp256k1-1 for the fast path", "reason", why)
	}
	bridge, err := newBridge(cfg, st, log)
	if err != nil {
		st.Close()
		return err
	}
	var bus relay.Bus
	if bridge != nil {
		bus = bridge
	}
	var refresh time.Duration
	if cfg.Store.Backend == "postgres" {
		// Other nodes may share the store: their NIP-86 changes are read
		// every sharedPolicyRefresh.
		refresh = sharedPolicyRefresh
	}
	rl, err := relay.New(cfg.Relay, relay.Options{
		Store: st, Verifier: verifier, Logger: log, Info: cfg.Info,
		Policy: cfg.Policy, Persister: policyPersister(cfg, st), Bus: bus,
		PolicyRefresh: refresh,
	})
	if err != nil {
		st.Close()
		return err
	}
	announce.Store(rl)
	if bridge != nil {
		// Not reachable yet is fine: the bridge reconnects forever and
		// catches up from the store once it is.
		if err := bridge.Start(rl.Publish); err != nil {
			st.Close()
			return fmt.Errorf("cluster: %w", err)
		}
	}
	srv, err := server.New(cfg.Server, server.Options{Relay: rl, Logger: log, Version: cli.BuildVersion(), Listener: ln})
	if err != nil {
		st.Close()
		return err
	}
	if err := srv.Start(); err != nil {
		st.Close()
		return err
	}
	serving = true
	var ctl *controlServer
	where := []any{"url", srv.URL(), "version", cli.BuildVersion(), "store", cfg.Store.Backend}
	if ps, ok := st.(*pebble.Store); ok {
		ctl = startControl(cfg, log, ps)
		where = append(where, "path", cfg.Store.Path)
		if d := ps.BackgroundPause(); d > 0 {
			where = append(where, "background_pause", d)
		}
	} else {
		where = append(where, "schema", cfg.Store.PostgresSchema)
	}
	if bridge != nil {
		bo := busOptions(cfg) // the node's name as the bus has it (the host name when unset)
		where = append(where, "node", bo.Node, "bus", bo.Subject,
			"bus_url", cluster.RedactURL(bo.URL), "bus_security", bo.Security())
	}
	where = append(where, "verifier", verifier.Name())
	if slack, err := threadSlack(); err == nil {
		where = append(where, "timer_slack", slack)
		if slackHow != "" {
			where = append(where, "timer_slack_set", slackHow)
		}
	}
	log.Info("petrel listening", append(where, "startup", time.Since(start).Round(time.Millisecond))...)

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	running := cfg
	var s os.Signal
	for s == nil {
		select {
		case <-hup:
			var applied bool
			running, applied = reload(running, load, rl, log)
			srv.NoteReload(applied)
		case s = <-sig:
		}
	}
	log.Info("shutting down", "signal", s.String())
	stopAt := time.Now()
	go func() {
		for next := range sig {
			if cli.SecondSignal(s, stopAt, next, time.Now()) {
				break
			}
		}
		log.Warn("second signal: exiting now")
		if ctl != nil {
			_ = os.Remove(ctl.path) // no backup can be served any more
		}
		os.Exit(1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout+10*time.Second)
	defer cancel()
	if bridge != nil {
		bridge.StopDelivery() // nothing more from the bus into a closing relay
	}
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	if bridge != nil {
		if err := bridge.Close(ctx); err != nil {
			log.Warn("cluster close", "err", err)
		}
	}
	ctl.close(ctx)
	if err := st.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	log.Info("stopped")
	return nil
}

// sharedPolicyRefresh is how often a node on a shared store (PostgreSQL)
// reads the NIP-86 state again (8 small reads a node): at once after a
// change through another node when the bus hints at it, within this
// when the hint is lost (docs/operations.md).
const sharedPolicyRefresh = 2 * time.Second

// The settings a reload applies to the running relay: listKeys (the
// write lists: policy.Lists.SetStatic), rateKeys (relay.ReloadRates),
// relay.LiveKeys under [relay] (relay.ReloadLimits) and [info]
// (relay.ReloadInfo). Every other change is logged as waiting for the
// next start.
var listKeys = map[string]bool{
	"policy.banned_pubkeys":   true,
	"policy.allowed_pubkeys":  true,
	"policy.allowed_kinds":    true,
	"policy.disallowed_kinds": true,
	"policy.blocked_ips":      true,
}

// rateKeys: an operator tightens them during a flood without dropping
// every connection.
var rateKeys = map[string]bool{
	"policy.event_rate":         true,
	"policy.event_burst":        true,
	"policy.pubkey_event_rate":  true,
	"policy.pubkey_event_burst": true,
	"policy.req_rate":           true,
	"policy.req_burst":          true,
	"policy.connect_rate":       true,
	"policy.connect_burst":      true,
	"policy.rate_max_keys":      true,
	"policy.min_pow_difficulty": true,
}

// relayLiveKey reports whether k is a [relay] setting a reload applies
// (relay.LiveKeys).
func relayLiveKey(k string) bool {
	name, ok := strings.CutPrefix(k, "relay.")
	return ok && slices.Contains(relay.LiveKeys, name)
}

// reload reads the configuration again (SIGHUP) and returns the one the
// relay now runs with, and whether it was applied. A configuration serve
// --check would refuse is logged and changes nothing. Otherwise the
// write lists' configuration layer is replaced (the NIP-86 layer stays;
// connections a new ban or block concerns are closed, as a NIP-86 ban
// closes them), so are the rate limits, the proof of work, the [relay]
// message limits and [info] (a name, description or icon set through
// NIP-86 still over it), and the other changed keys are logged as
// applying at the next start.
func reload(running config.Config, load func() (config.Config, error), rl *relay.Relay, log *slog.Logger) (config.Config, bool) {
	next, err := load()
	if err == nil {
		err = checkConfig(next)
	}
	if err != nil {
		log.Error("config reload refused; running as before", "err", err)
		return running, false
	}
	live, later := []string{}, []string{}
	var lists, rates, limits, info []string
	for _, k := range config.Changed(running, next) {
		switch {
		case listKeys[k]:
			lists = append(lists, k)
		case rateKeys[k]:
			rates = append(rates, k)
		case relayLiveKey(k):
			limits = append(limits, k)
		case strings.HasPrefix(k, "info."):
			info = append(info, k)
		default:
			later = append(later, k)
		}
	}
	closed := 0
	if len(lists) > 0 {
		if err := rl.Lists().SetStatic(next.Policy); err != nil {
			log.Error("config reload refused; running as before", "err", err)
			return running, false
		}
		config.Copy(&running, next, lists...)
		live = append(live, lists...)
		closed = rl.DisconnectBlocked()
	}
	// apply applies keys with do; keys it could not apply wait for the
	// next start (a later reload tries them again).
	apply := func(keys []string, what string, do func() error) {
		if len(keys) == 0 {
			return
		}
		if err := do(); err != nil {
			log.Error("config reload: "+what+" not applied", "keys", keys, "err", err)
			later = append(later, keys...)
			return
		}
		config.Copy(&running, next, keys...)
		live = append(live, keys...)
	}
	// Fails only for a per-pubkey limit turned on under optimistic
	// verification.
	apply(rates, "rate limits", func() error { return rl.ReloadRates(next.Policy) })
	// next passed checkConfig: does not fail.
	apply(limits, "[relay] limits", func() error { return rl.ReloadLimits(next.Relay) })
	// Fails only when what NIP-86 changed cannot be read.
	apply(info, "[info]", func() error { return rl.ReloadInfo(next.Info) })
	slices.Sort(live)
	slices.Sort(later)
	log.Info("config reloaded", "applied", live, "closed_connections", closed, "at_next_start", later)
	return running, true
}

// policyPersister returns where NIP-86 changes (ban lists, relay name,
// description and icon) are kept: in the store itself, so that they are
// backed up, exported with it and survive like the events. A store that
// cannot keep them falls back to a directory beside its path.
func policyPersister(cfg config.Config, st store.Store) policy.Persister {
	if m, ok := st.(policy.MetaStore); ok {
		return policy.MetaPersister{Store: m}
	}
	p := filepath.Clean(cfg.Store.Path)
	return policy.DirPersister{Dir: filepath.Join(filepath.Dir(p), filepath.Base(p)+"-policy")}
}

// checkCluster reports a cluster (cluster.nats_url) over a store the
// nodes cannot share (newBridge refuses it by the store it is given), and
// what cluster.New would refuse in its options, the bus's credentials and
// TLS files read.
func checkCluster(cfg config.Config) error {
	if cfg.Cluster.NATSURL == "" {
		return errSecurityAlone(cfg.Cluster)
	}
	var errs []error
	if cfg.Store.Backend != "postgres" {
		errs = append(errs, errNotShared(cfg))
	}
	return errors.Join(append(errs, busOptions(cfg).Check())...)
}

// errSecurityAlone reports the bus's credentials or TLS files set without
// cluster.nats_url: the node would run alone, which they say is not meant.
func errSecurityAlone(c config.Cluster) error {
	var set []string
	for _, f := range []struct{ key, value string }{
		{"nats_credentials", c.NATSCredentials}, {"nats_nkey_seed", c.NATSNKeySeed},
		{"nats_tls_ca", c.NATSTLSCA}, {"nats_tls_cert", c.NATSTLSCert}, {"nats_tls_key", c.NATSTLSKey},
	} {
		if f.value != "" {
			set = append(set, "cluster."+f.key)
		}
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("%s set but cluster.nats_url is not: this node would run alone, without the bus", strings.Join(set, ", "))
}

// busOptions returns the bridge's options for cfg's cluster section (the
// node named by the host name when it names none), with the largest event
// the relay accepts; newBridge adds the store and the log.
func busOptions(cfg config.Config) cluster.Options {
	c := cfg.Cluster
	node := c.Node
	if node == "" {
		node, _ = os.Hostname()
	}
	return cluster.Options{
		URL: c.NATSURL, Node: node, Subject: c.Subject,
		Credentials: c.NATSCredentials, NKeySeed: c.NATSNKeySeed,
		TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey,
		CatchUpMargin: c.CatchUpMargin, HeartbeatInterval: c.HeartbeatInterval,
		SilenceTimeout: c.SilenceTimeout, DedupWindow: c.DedupWindow, DedupMax: c.DedupMax,
		PublishQueue: c.PublishQueue, ReconnectBuffer: c.ReconnectBuffer,
		MaxEventBytes: cfg.Relay.Normalize().MaxEventBytes,
	}
}

func errNotShared(cfg config.Config) error {
	return fmt.Errorf("cluster.nats_url is set but store backend %q is not shared: a cluster needs store.backend = \"postgres\"", cfg.Store.Backend)
}

// newBridge returns the cluster's live bus when cluster.nats_url is set,
// or nil for a single node. A cluster needs a store the nodes share.
func newBridge(cfg config.Config, st store.Store, log *slog.Logger) (*cluster.Bridge, error) {
	c := cfg.Cluster
	if c.NATSURL == "" {
		if err := errSecurityAlone(c); err != nil {
			return nil, err
		}
		if cfg.Store.Backend == "postgres" {
			log.Warn("store.backend is postgres but cluster.nats_url is not set: events accepted by other nodes are not delivered live here")
		}
		return nil, nil
	}
	feed, ok := st.(store.Feed)
	if !ok {
		return nil, errNotShared(cfg)
	}
	o := busOptions(cfg)
	o.Feed, o.Logger = feed, log
	return cluster.New(o) // its errors say "cluster:"
}
