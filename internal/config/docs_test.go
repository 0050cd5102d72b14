package config

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// The example configuration file and docs/config.md are generated from the
// Config structs' own doc comments and from Normalize's defaults, so they
// cannot drift from the code. TestConfigDocs fails when either file is out
// of date; regenerate with:
//
//	PETREL_UPDATE_DOCS=1 go test ./internal/config -run TestConfigDocs

// section is one [table] of the file.
type section struct {
	name   string
	doc    string
	file   string // source file declaring the struct, relative to the repo root
	typ    string // struct type name
	value  reflect.Value
	fields []fieldDoc
}

type fieldDoc struct {
	key, doc string
	def      any
	machine  string // the default in words, when it depends on the machine
}

// machineDefaults are the keys whose default depends on the machine the
// relay runs on, in words: the files are generated on one machine and read
// on others. TestMachineDefaults checks the words against Normalize.
var machineDefaults = map[string]string{
	"relay.query_workers":  "the number of CPUs",
	"relay.verify_workers": "the number of CPUs",
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// structDocs returns the doc comment of every toml-tagged field of the
// struct typ declared in file.
func structDocs(t *testing.T, file, typ string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typ {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fl := range st.Fields.List {
			if fl.Tag == nil {
				continue
			}
			tag := reflect.StructTag(strings.Trim(fl.Tag.Value, "`")).Get("toml")
			tag = strings.Split(tag, ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			out[tag] = strings.TrimSpace(fl.Doc.Text())
		}
		return false
	})
	if len(out) == 0 {
		t.Fatalf("no documented fields for %s in %s", typ, file)
	}
	return out
}

func tomlValue(v any) string {
	switch x := v.(type) {
	case time.Duration:
		return fmt.Sprintf("%q", x.String())
	case string:
		return fmt.Sprintf("%q", x)
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.Len() == 0 {
		return "[]"
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(map[string]any{"v": v}); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(strings.TrimPrefix(b.String(), "v = "))
}

func sections(t *testing.T) []section {
	t.Helper()
	root := repoRoot(t)
	c := Config{}.Normalize()
	list := []section{
		{name: "server", doc: "The network edge: listening address, connection limits, deadlines, NIP-86 admins.", file: "internal/server/config.go", typ: "Config", value: reflect.ValueOf(c.Server)},
		{name: "relay", doc: "The protocol engine: message and filter limits, queues, timeouts, AUTH, read protection, NIP-77.", file: "internal/relay/config.go", typ: "Config", value: reflect.ValueOf(c.Relay)},
		{name: "info", doc: "The NIP-11 relay information document (name and description may also be changed at run time through NIP-86).", file: "internal/relay/info.go", typ: "Info", value: reflect.ValueOf(c.Info)},
		{name: "store", doc: "The event store.", file: "internal/config/config.go", typ: "Store", value: reflect.ValueOf(c.Store)},
		{name: "cluster", doc: "The live bus between the nodes of a cluster (NATS); needs the postgres store backend.", file: "internal/config/config.go", typ: "Cluster", value: reflect.ValueOf(c.Cluster)},
		{name: "policy", doc: "Write policy: rate limits, write lists, the write-policy plugin, proof of work.", file: "internal/policy/config.go", typ: "Config", value: reflect.ValueOf(c.Policy)},
		{name: "log", doc: "Logging.", file: "internal/config/config.go", typ: "Log", value: reflect.ValueOf(c.Log)},
		{name: "runtime", doc: "The Go runtime of petrel serve: garbage collector target and returning freed memory to the OS.", file: "internal/config/config.go", typ: "Runtime", value: reflect.ValueOf(c.Runtime)},
	}
	for i := range list {
		s := &list[i]
		docs := structDocs(t, filepath.Join(root, s.file), s.typ)
		typ := s.value.Type()
		for j := 0; j < typ.NumField(); j++ {
			tag := strings.Split(typ.Field(j).Tag.Get("toml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			d, ok := docs[tag]
			if !ok || d == "" {
				t.Errorf("[%s] %s has no doc comment", s.name, tag)
			}
			s.fields = append(s.fields, fieldDoc{key: tag, doc: d, def: s.value.Field(j).Interface(), machine: machineDefaults[s.name+"."+tag]})
		}
	}
	return list
}

func renderExample(secs []section) []byte {
	var b bytes.Buffer
	b.WriteString(`# petrel.example.toml: every setting petrel reads, with its default.
#
# Generated from the code (internal/config/docs_test.go); do not edit by hand.
# Every key is optional: petrel runs with none of them (zero config listens
# on 127.0.0.1:7447 with the store in ./petrel-data). Uncomment what you
# change. Any key can also be set from the environment as
# PETREL_<SECTION>_<KEY> (PETREL_SERVER_LISTEN=0.0.0.0:7447); lists are
# comma-separated there. Durations are Go durations ("10s", "15m").
`)
	for _, s := range secs {
		fmt.Fprintf(&b, "\n# %s\n[%s]\n", s.doc, s.name)
		for _, f := range s.fields {
			b.WriteString("\n")
			for _, line := range strings.Split(f.doc, "\n") {
				b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
			}
			if f.machine != "" {
				// 0 takes the default on whatever machine reads the file.
				fmt.Fprintf(&b, "#%s = 0 # %s\n", f.key, f.machine)
				continue
			}
			fmt.Fprintf(&b, "#%s = %s\n", f.key, tomlValue(f.def))
		}
	}
	return b.Bytes()
}

func renderMarkdown(secs []section) []byte {
	var b bytes.Buffer
	b.WriteString(`# Configuration

<!-- Generated from the code by internal/config/docs_test.go; do not edit by hand. -->

petrel reads one TOML file (` + "`petrel serve --config petrel.toml`" + `, or
` + "`PETREL_CONFIG`" + `), then environment overrides named
` + "`PETREL_<SECTION>_<KEY>`" + ` (for example ` + "`PETREL_RELAY_MAX_LIMIT=1000`" + `; lists
are comma-separated), then flags (` + "`--listen`, `--data`, `--log-level`" + `).
Every key is optional. Unknown keys in the file are an error, so a typo
never silently leaves a default in place (the error names the key probably
meant). Durations are strings with their unit (` + "`\"500ms\"`, `\"10s\"`, `\"5m\"`" + `):
a bare number is refused, where TOML decoders elsewhere read it as
nanoseconds. ` + "[`petrel.example.toml`](../petrel.example.toml)" + `
lists the same keys, commented out with their defaults.
` + "`petrel serve --check`" + ` checks a configuration (file, environment and
flags) as ` + "`serve`" + ` would, without starting. SIGHUP (` + "`systemctl reload`" + `)
reads it again: the ` + "`[policy]`" + ` lists (` + "`banned_pubkeys`" + `, ` + "`allowed_pubkeys`" + `,
` + "`allowed_kinds`, `disallowed_kinds`, `blocked_ips`" + `), its rate limits
(` + "`event_rate`, `pubkey_event_rate`, `req_rate`" + `, their bursts, ` + "`rate_max_keys`" + `),
` + "`min_pow_difficulty`" + `, the message limits of ` + "`[relay]`" + ` (` + "`auth_required`" + `,
` + "`max_limit`, `max_subscriptions`" + ` and the others docs/operations.md lists) and
` + "`[info]`" + ` apply at once, every other change at the next start.

Where a limit can be switched off, a negative value means "no limit".
`)
	for _, s := range secs {
		fmt.Fprintf(&b, "\n## [%s]\n\n%s\n\n| key | default | meaning |\n|---|---|---|\n", s.name, s.doc)
		for _, f := range s.fields {
			doc := strings.ReplaceAll(f.doc, "\n", " ")
			doc = strings.ReplaceAll(doc, "|", "\\|")
			def := "`" + strings.ReplaceAll(tomlValue(f.def), "|", "\\|") + "`"
			if f.machine != "" {
				def = f.machine
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.key, def, doc)
		}
	}
	return b.Bytes()
}

func TestConfigDocs(t *testing.T) {
	secs := sections(t)
	root := repoRoot(t)
	files := map[string][]byte{
		"petrel.example.toml": renderExample(secs),
		"docs/config.md":      renderMarkdown(secs),
	}
	for name, want := range files {
		path := filepath.Join(root, name)
		if os.Getenv("PETREL_UPDATE_DOCS") != "" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is out of date with the Config structs; regenerate with PETREL_UPDATE_DOCS=1 go test ./internal/config -run TestConfigDocs", name)
		}
	}
}

// TestExampleLoads: the generated example, uncommented, is a valid
// configuration that reproduces the defaults.
func TestExampleLoads(t *testing.T) {
	ex := renderExample(sections(t))
	var lines []string
	for _, l := range strings.Split(string(ex), "\n") {
		if strings.HasPrefix(l, "#") && strings.Contains(l, " = ") && !strings.HasPrefix(l, "# ") {
			l = strings.TrimPrefix(l, "#")
		}
		lines = append(lines, l)
	}
	path := filepath.Join(t.TempDir(), "petrel.toml")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatalf("example does not load: %v", err)
	}
	// %+v prints a pointer's address: print the optional values'
	// values instead.
	show := func(c Config) string {
		on := *c.Server.Compression
		c.Server.Compression = nil
		return fmt.Sprintf("%+v compression=%v", c, on)
	}
	def := Config{}.Normalize()
	def.Store.Path = filepath.Join(filepath.Dir(path), def.Store.Path) // a relative path in a file is the file's
	if got, want := show(c.Normalize()), show(def); got != want {
		t.Fatalf("example does not reproduce the defaults:\n got %s\nwant %s", got, want)
	}
}

// TestMachineDefaults: the keys documented with a default in words take
// that default (so the words are true on every machine), and no other key
// of the generated files shows a figure that is this machine's CPU count
// by way of runtime.NumCPU (checked by giving Normalize's CPU-dependent
// keys a second look: their zero value must normalize to NumCPU).
func TestMachineDefaults(t *testing.T) {
	c := Config{}.Normalize()
	got := map[string]int{"relay.query_workers": c.Relay.QueryWorkers, "relay.verify_workers": c.Relay.VerifyWorkers}
	for k, words := range machineDefaults {
		v, ok := got[k]
		if !ok || words != "the number of CPUs" || v != runtime.NumCPU() {
			t.Errorf("%s: default %d, documented as %q (NumCPU %d)", k, v, words, runtime.NumCPU())
		}
	}
	md := string(renderMarkdown(sections(t)))
	for _, k := range []string{"query_workers", "verify_workers"} {
		if !strings.Contains(md, "| `"+k+"` | the number of CPUs |") {
			t.Errorf("docs/config.md does not give %s's default as the number of CPUs", k)
		}
	}
}
