package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/suggest"
	"github.com/petrel-relay/petrel/internal/tomlcheck"
)

// Config is the whole configuration file.
type Config struct {
	Server  server.Config `toml:"server"`
	Relay   relay.Config  `toml:"relay"`
	Info    relay.Info    `toml:"info"`
	Policy  policy.Config `toml:"policy"`
	Store   Store         `toml:"store"`
	Cluster Cluster       `toml:"cluster"`
	Log     Log           `toml:"log"`
	Runtime Runtime       `toml:"runtime"`
}

// Store configures the event store.
type Store struct {
	// Backend is "pebble", the embedded store of a single node, or
	// "postgres", the shared store of record of several nodes (see
	// [cluster] and docs/operations.md). Default "pebble".
	Backend string `toml:"backend"`
	// Path is the pebble data directory, created with the store when
	// missing or empty (a directory of other files and no store is
	// refused, as a mistyped path may be). A relative path set in the
	// configuration file is taken from the file's directory; one given
	// with --data or PETREL_STORE_PATH (and the default) from the working
	// directory. Default "./petrel-data".
	Path string `toml:"path"`
	// PostgresURL is the PostgreSQL connection string of the postgres
	// backend (postgres://user@host:5432/db?sslmode=..., or a key=value
	// DSN). Required with backend "postgres".
	PostgresURL string `toml:"postgres_url"`
	// PostgresSchema is the PostgreSQL schema holding petrel's tables
	// (created if missing; migrations run at start under an advisory
	// lock). Every node of a cluster must use the same. Default "petrel".
	PostgresSchema string `toml:"postgres_schema"`
	// PostgresMaxConns caps this node's connections to PostgreSQL (the
	// writer uses one, each running stored query one while it reads).
	// Default 8.
	PostgresMaxConns int `toml:"postgres_max_conns"`
	// NoSync commits without fsync: faster, but a power loss can lose
	// events that were acknowledged. Default false.
	NoSync bool `toml:"no_sync"`
	// CacheBytes is the pebble block cache size. Default 256 MiB.
	CacheBytes int64 `toml:"cache_bytes"`
	// MemTableBytes is the size of one pebble memtable: writes collect in
	// memory (and in the write-ahead log) until one is full, then it is
	// flushed to disk; up to 4 may wait for their flush. Smaller uses less
	// memory and makes more, smaller files. Default 64 MiB.
	MemTableBytes int64 `toml:"memtable_bytes"`
	// WALSpares is how many spare write-ahead log files the pebble store
	// keeps written ahead (zeros, 1.1 x memtable_bytes on disk each, as
	// wal-spare-N in the store's directory). pebble's first logs after
	// every start are new files, and a commit's fdatasync into a new file
	// also writes the file's inode (on a journalled filesystem, commits
	// its journal), which a log written ahead spares it: a synced
	// one-event commit after a restart was 4-9% faster at the median on
	// the test machine's ext4 without a journal and 9-36% with one (docs/
	// BENCHMARKS.md, issue 19). The spares are written at up to 8 MiB/s
	// after a start. Not on a tmpfs. Default 1; negative: none; at most
	// 4.
	WALSpares int `toml:"wal_spares"`
	// BackgroundPause is how long petrel serve's pebble flushes and
	// compactions sleep after each block they write while the relay is
	// committing events and pebble is under no write pressure, so that
	// the request path has the processor first (a 64 MiB flush then
	// took a median 1.5-2.5 s instead of 0.4-0.6 s). On one core, ladders
	// alternated with and without: knee 5,000 against 3,000 events/s (OK
	// p99 at 3,000/s 8.1-9.5 against 14.6-14.7 ms), 2-5% more CPU an
	// event at moderate rates, and at 10,000 offered 8,508-9,486
	// accepted against 9,427-9,533; on a slower guest a smaller gain
	// (OK p99 at 3,000/s a median 17.4 against 18.0-19.6 ms), and past
	// capacity four runs in eight refused 26-37% at 7,000-8,000 offered
	// where the two without went on (docs/BENCHMARKS.md, issue 19);
	// during a write stall there is no pause. 0 (the
	// default): 200µs when Go code runs on one processor (GOMAXPROCS 1),
	// none otherwise (with several, the background runs beside the
	// request path; not measured); negative: none; positive: that value,
	// at most 10ms. Without a pause each block still yields the
	// processor.
	BackgroundPause time.Duration `toml:"background_pause"`
	// MinFreeBytes is the disk space the pebble store keeps free on its
	// filesystem: while less would be left, EVENTs are answered
	// `OK false "error: ..."` (reads and ephemeral events go on), /stats
	// shows store_disk_full and the log says why; writes resume by
	// themselves once space is freed. pebble cannot survive a full disk
	// (a failed log write stops the process), so keep it at least 4 x
	// 64 MiB (the memtables it may have to flush). Default 512 MiB;
	// negative: no reserve.
	MinFreeBytes int64 `toml:"min_free_bytes"`
	// IDFilterBytes caps the in-memory filter of stored event ids that
	// lets the relay answer "not stored yet" for a new event without a
	// database lookup (about a tenth of the CPU an event costs). It takes
	// 2-4 bytes per stored event, rounded up to a power of two, built in
	// the background at the first EVENT after start (and by import, sync
	// and migrate at their first batch, whose duplicate checks it spares
	// too); past the cap it only grows less precise. Default 64 MiB
	// (enough for 32 million events); negative turns it off.
	IDFilterBytes int `toml:"id_filter_bytes"`
	// BodyCacheBytes is the memory for the bodies of the most recently
	// stored events (at most 65,536), which stored queries then read
	// without a database seek: recent events are what feeds ask for, and
	// they sit in the store's memtables, where a seek is slowest. Default
	// 32 MiB; negative turns it off.
	BodyCacheBytes int64 `toml:"body_cache_bytes"`
	// DisableSearch turns the NIP-50 full-text index off: events are
	// stored faster (the index roughly triples the store's write cost per
	// text note), search REQs return nothing and NIP-11 does not list 50.
	// Turning it off drops an existing index; turning it on again rebuilds
	// it at the next start. Default false (search on).
	DisableSearch bool `toml:"disable_search"`
}

// Cluster configures the live bus between the nodes of a cluster (NATS
// core): every node publishes the events it accepts and fans out what the
// others publish; a node that may have missed some catches up from the
// shared store (internal/cluster). Needs store.backend = "postgres".
type Cluster struct {
	// NATSURL is the NATS server (or comma-separated servers), e.g.
	// "nats://127.0.0.1:4222" ("tls://" for TLS); a user and password or
	// a token may be given in it ("nats://petrel:SECRET@host:4222"), and
	// are never logged. Default "": a single node, no bus.
	NATSURL string `toml:"nats_url"`
	// NATSCredentials is a NATS credentials file (a user JWT and its nkey
	// seed, as nsc writes them) for a NATS server in operator (JWT) mode.
	// Default "": none.
	NATSCredentials string `toml:"nats_credentials"`
	// NATSNKeySeed is a file holding a user nkey seed ("SU..."), for a
	// NATS server that lists the user's public nkey. Not with
	// nats_credentials. Default "": none.
	NATSNKeySeed string `toml:"nats_nkey_seed"`
	// NATSTLSCA is a PEM file of the certificate authorities that sign the
	// NATS server's certificate. Default "": the system's. Setting it, or
	// nats_tls_cert, makes the connection TLS.
	NATSTLSCA string `toml:"nats_tls_ca"`
	// NATSTLSCert is a client certificate (PEM file), for a NATS server
	// that verifies its clients; needs nats_tls_key. Default "": none.
	NATSTLSCert string `toml:"nats_tls_cert"`
	// NATSTLSKey is the key of nats_tls_cert (PEM file). Default "":
	// none.
	NATSTLSKey string `toml:"nats_tls_key"`
	// Node names this node in logs and on the bus (1 to 64 bytes).
	// Default "": the host name.
	Node string `toml:"node"`
	// Subject is the NATS subject of the bus; every node of one cluster
	// must use the same, and only the cluster may publish on it (nor on
	// <subject>.policy, where a node says its NIP-86 state changed).
	// Default "petrel.events".
	Subject string `toml:"subject"`
	// CatchUpMargin is how far before a detected loss a catch-up from the
	// store starts: it must cover a commit's way to the bus, a store
	// transaction's length and the clock skew between nodes and the
	// database. Default 5s.
	CatchUpMargin time.Duration `toml:"catchup_margin"`
	// HeartbeatInterval is how often a node tells the others its bus
	// sequence, so a loss of its last messages is seen even when it goes
	// quiet. Default 1s.
	HeartbeatInterval time.Duration `toml:"heartbeat_interval"`
	// SilenceTimeout: a node not heard for this long, while this node
	// reads the bus (it has heard back its own message sent that long
	// after the other's last), is taken as lost and the store is polled
	// for what it committed until it is heard again. A node that falls
	// behind reading the bus (a starved process) takes nobody for silent.
	// Default 3s.
	SilenceTimeout time.Duration `toml:"silence_timeout"`
	// DedupWindow is how long a node remembers the ids it fanned out, so
	// that a catch-up does not deliver them again. Default 30s.
	DedupWindow time.Duration `toml:"dedup_window"`
	// DedupMax caps the ids remembered (about 100 bytes each); past it a
	// catch-up may deliver an event twice, never lose one. Default
	// 262144.
	DedupMax int `toml:"dedup_max"`
	// PublishQueue caps the accepted events waiting for the bus; past it
	// they are dropped from the bus (the other nodes see the gap and
	// catch up from the store). Default 8192.
	PublishQueue int `toml:"publish_queue"`
	// ReconnectBuffer caps the bytes buffered while the bus is
	// unreachable (past it, as a full PublishQueue). Default 8388608;
	// negative: none.
	ReconnectBuffer int `toml:"reconnect_buffer"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `toml:"level"`
	// Format is text or json. Default text.
	Format string `toml:"format"`
}

// Runtime tunes the Go runtime of `petrel serve` (memory use).
type Runtime struct {
	// GCPercent is the garbage collector's target (Go's GOGC): the heap
	// may grow to (1 + GCPercent/100) times the live heap between
	// collections. An idle relay's heap is mostly per-connection state, so
	// a lower target keeps memory per connection low at a small CPU cost.
	// The GOGC environment variable, when set, wins; negative turns the
	// collector off, as GOGC=off does (not for production). Default 50.
	GCPercent int `toml:"gc_percent"`
	// MemoryReleaseInterval is how often the relay checks whether a burst
	// (connections opening, a large query, an import) has left freed heap
	// that the Go runtime keeps resident; once the burst has been over for
	// two checks and at least 16 MiB and a quarter of the heap can be
	// reclaimed, it collects and returns that memory to the OS (the
	// runtime alone would take minutes). Out-queue bytes let go of (slow
	// readers that disconnected) count as reclaimable, so a quiet relay
	// returns them too. A release due while EVENTs are waiting for their
	// OK is put off to the next check that finds none (it holds the
	// processor for its duration). Default 5s; negative: never.
	MemoryReleaseInterval time.Duration `toml:"memory_release_interval"`
	// GOMAXPROCS is how many goroutines run Go code at once (Go's
	// GOMAXPROCS). 0 keeps Go's default, the number of CPUs the process
	// may use. On a single-CPU host, 2 lets the kernel interleave the
	// relay's request path with pebble's background flushes and
	// compactions instead of queueing it behind them for Go's 10 ms time
	// slices, at a CPU cost per event that depends on the host (8-15% on
	// one VM, a third on another; OK p99 gains from large to none: see
	// docs/operations.md and measure with petrel bench ladder).
	// The GOMAXPROCS environment variable, when set, wins. Default 0.
	GOMAXPROCS int `toml:"gomaxprocs"`
	// TimerSlack is the Linux timer slack of every thread of petrel serve:
	// how much later than asked the kernel may wake a sleeping thread.
	// Go's scheduler has a thread (sysmon) that sleeps 20 µs at a time
	// while a system call runs, and the relay makes one for every
	// commit's fsync: at the kernel's default slack (50 µs) that thread
	// wakes several times a commit and hands the processor between
	// threads. With 1ms a relay on one core at 1,000-2,000 events/s made
	// half the context switches and spent about a fifth less CPU an
	// event; bursts are unchanged. The price: nothing else runs during a
	// short fsync (OK p99 at 2,000/s 1.8-4.4 ms higher; docs/BENCHMARKS.md,
	// issue 19). The relay's own timers are milliseconds or longer.
	// 0 (the default): 1ms when Go code runs on one processor
	// (GOMAXPROCS 1, as on a one-CPU host), the inherited slack otherwise
	// (not measured with several processors, where Go's work stealing
	// sleeps a few microseconds too); negative: the inherited slack (50
	// µs, unless the service manager sets one, as systemd's
	// TimerSlackNSec= does); positive: that value, at most 10ms. Go
	// starts its first threads before petrel's code runs, so petrel sets
	// each thread's slack in place when it may (root, CAP_SYS_NICE), and
	// otherwise executes itself again, once, at start, from a thread
	// that has it (same process id, arguments and environment; threads
	// inherit their starter's slack).
	TimerSlack time.Duration `toml:"timer_slack"`
}

// Normalize fills in defaults.
func (c Config) Normalize() Config {
	c.Server = c.Server.Normalize()
	c.Relay = c.Relay.Normalize()
	c.Policy = c.Policy.Normalize()
	if c.Store.Backend == "" {
		c.Store.Backend = "pebble"
	}
	if c.Store.Path == "" {
		c.Store.Path = "./petrel-data"
	}
	if c.Store.CacheBytes == 0 {
		c.Store.CacheBytes = 256 << 20
	}
	if c.Store.IDFilterBytes == 0 {
		c.Store.IDFilterBytes = 64 << 20
	}
	if c.Store.MemTableBytes <= 0 {
		c.Store.MemTableBytes = 64 << 20
	}
	if c.Store.MinFreeBytes == 0 {
		c.Store.MinFreeBytes = 512 << 20
	}
	if c.Store.WALSpares == 0 {
		c.Store.WALSpares = 1
	}
	if c.Store.BodyCacheBytes == 0 {
		c.Store.BodyCacheBytes = 32 << 20
	}
	if c.Store.PostgresSchema == "" {
		c.Store.PostgresSchema = "petrel"
	}
	if c.Store.PostgresMaxConns == 0 {
		c.Store.PostgresMaxConns = 8
	}
	if c.Cluster.Subject == "" {
		c.Cluster.Subject = "petrel.events"
	}
	cl := &c.Cluster
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cl.CatchUpMargin, 5 * time.Second}, {&cl.HeartbeatInterval, time.Second}, {&cl.SilenceTimeout, 3 * time.Second}, {&cl.DedupWindow, 30 * time.Second}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cl.DedupMax == 0 {
		cl.DedupMax = 262144
	}
	if cl.PublishQueue == 0 {
		cl.PublishQueue = 8192
	}
	if cl.ReconnectBuffer == 0 {
		cl.ReconnectBuffer = 8 << 20
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Runtime.GCPercent == 0 {
		c.Runtime.GCPercent = 50
	}
	if c.Runtime.MemoryReleaseInterval == 0 {
		c.Runtime.MemoryReleaseInterval = 5 * time.Second
	}
	return c
}

// Load reads the TOML file at path (if path is not empty), then applies
// environment overrides from environ (os.Environ() form). Unknown keys in
// the file are an error, so a typo does not silently leave a default, and
// so are values that make no sense (Validate).
func Load(path string, environ []string) (Config, error) {
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	}
	return parse(path, data, environ)
}

// parse is Load with the file's text given: data, read from path (no
// file if path is empty).
func parse(path string, data []byte, environ []string) (Config, error) {
	var c Config
	if path != "" {
		if err := tomlcheck.Decode(string(data), &c); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
		// A relative store.path in the file names a directory beside the
		// file, wherever petrel is started from (a systemd unit, a
		// shell in another directory); flags and the environment are
		// taken from the working directory as usual.
		if c.Store.Path != "" && !filepath.IsAbs(c.Store.Path) {
			c.Store.Path = filepath.Join(filepath.Dir(path), c.Store.Path)
		}
	}
	if err := ApplyEnv(&c, environ); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		where := "config"
		if path != "" {
			where = "config " + path
		}
		return c, fmt.Errorf("%s: %w", where, err)
	}
	return c, nil
}

// EnvPrefix prefixes every environment override.
const EnvPrefix = "PETREL_"

// meantEnv is " (did you mean PETREL_X?)" for the setting an unknown
// variable's name (lower case, without the prefix) probably meant, or "".
func meantEnv(name string, fields map[string]reflect.Value) string {
	best := suggest.Closest(name, slices.Sorted(maps.Keys(fields)), 2)
	if best == "" {
		return ""
	}
	return " (did you mean " + EnvPrefix + strings.ToUpper(best) + "?)"
}

// ApplyEnv sets fields from variables named PETREL_<SECTION>_<KEY>, with
// section and key the TOML names in upper case (PETREL_SERVER_LISTEN,
// PETREL_RELAY_MAX_LIMIT). Lists are comma-separated. Unknown PETREL_
// variables that look like overrides are an error.
func ApplyEnv(c *Config, environ []string) error {
	// The map of every setting is made at the first PETREL_ variable: a
	// short client command with none in its environment (the usual case
	// of req --store) pays nothing for it (about 7 page faults).
	var fields map[string]reflect.Value
	var errs []error
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		if isReservedEnv(strings.TrimPrefix(k, EnvPrefix)) {
			continue
		}
		name := strings.ToLower(strings.TrimPrefix(k, EnvPrefix))
		if fields == nil {
			fields = map[string]reflect.Value{}
			collect(reflect.ValueOf(c).Elem(), "", fields)
		}
		f, ok := fields[name]
		if !ok {
			errs = append(errs, fmt.Errorf("environment %s: no such setting%s", k, meantEnv(name, fields)))
			continue
		}
		if err := setValue(f, v); err != nil {
			errs = append(errs, fmt.Errorf("environment %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// isReservedEnv names PETREL_ variables that are not config overrides
// (name is what follows the prefix, in any case: compared without
// allocating).
func isReservedEnv(name string) bool {
	for _, r := range []string{"config", "verifier", "prefault", "client_slack", "test_subprocess", "crash_child", "data"} {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return len(name) >= 5 && strings.EqualFold(name[:5], "test_")
}

// Changed returns the settings ("section.key", sorted) whose values
// differ between a and b.
func Changed(a, b Config) []string {
	fa, fb := map[string]reflect.Value{}, map[string]reflect.Value{}
	collect(reflect.ValueOf(&a).Elem(), "", fa)
	collect(reflect.ValueOf(&b).Elem(), "", fb)
	var out []string
	for name, v := range fa {
		w := fb[name]
		if v.Kind() == reflect.Slice && v.Len() == 0 && w.Len() == 0 {
			continue // none, or an empty list: the same
		}
		if !reflect.DeepEqual(v.Interface(), w.Interface()) {
			section, key, _ := strings.Cut(name, "_")
			out = append(out, section+"."+key)
		}
	}
	slices.Sort(out)
	return out
}

// Copy sets the settings keys ("section.key", as Changed names them) of
// dst to their values in src. It panics on a key no setting has.
func Copy(dst *Config, src Config, keys ...string) {
	fd, fs := map[string]reflect.Value{}, map[string]reflect.Value{}
	collect(reflect.ValueOf(dst).Elem(), "", fd)
	collect(reflect.ValueOf(&src).Elem(), "", fs)
	for _, k := range keys {
		name := strings.Replace(k, ".", "_", 1)
		d, ok := fd[name]
		if !ok {
			panic("config: no setting " + k)
		}
		d.Set(fs[name])
	}
}

// collect maps "section_key" to settable fields, by TOML tag.
func collect(v reflect.Value, prefix string, out map[string]reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := strings.Split(sf.Tag.Get("toml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		name := tag
		if prefix != "" {
			name = prefix + "_" + tag
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(time.Duration(0)) {
			collect(fv, name, out)
			continue
		}
		out[name] = fv
	}
}

// numberError says in words why s did not parse as what (strconv's own
// text is "strconv.ParseInt: parsing ...: invalid syntax").
func numberError(s, what string, err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%q is out of range", s)
	}
	return fmt.Errorf("%q is not %s", s, what)
}

func setValue(f reflect.Value, s string) error {
	switch f.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (like 300ms, 10s or 1m30s)", s)
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.Pointer: // an optional value (*bool): set, it is no longer the default
		v := reflect.New(f.Type().Elem())
		if err := setValue(v.Elem(), s); err != nil {
			return err
		}
		f.Set(v)
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(s, 10, f.Type().Bits())
		if err != nil {
			return numberError(s, "a whole number", err)
		}
		f.SetInt(n)
	case reflect.Float64, reflect.Float32:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return numberError(s, "a number", err)
		}
		f.SetFloat(x)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		n, err := strconv.ParseUint(s, 10, f.Type().Bits())
		if err != nil {
			return numberError(s, "a whole number, zero or more", err)
		}
		f.SetUint(n)
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.String {
			var parts []string
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p != "" {
					parts = append(parts, p)
				}
			}
			f.Set(reflect.ValueOf(parts))
			return nil
		}
		if f.Type().Elem().Kind() == reflect.Int {
			var parts []int
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p == "" {
					continue
				}
				n, err := strconv.Atoi(p)
				if err != nil {
					return numberError(p, "a whole number", err)
				}
				parts = append(parts, n)
			}
			f.Set(reflect.ValueOf(parts))
			return nil
		}
		return fmt.Errorf("unsupported list type %s", f.Type())
	default:
		return fmt.Errorf("unsupported type %s", f.Type())
	}
	return nil
}
