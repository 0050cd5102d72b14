// Command allowlist is a petrel (and strfry) write-policy plugin that
// accepts events only from the pubkeys listed in a file: a members-only
// relay.
//
//	go build -o /usr/local/bin/petrel-allowlist ./examples/plugins/allowlist
//
//	[policy]
//	plugin = "/usr/local/bin/petrel-allowlist -pubkeys /etc/petrel/members.txt"
//
// The file has one hex pubkey per line; blank lines and lines starting
// with # are skipped, and so is anything after the key on its line (a
// name, say). It is read again when it changes (checked at most once a
// second), so members can be added while the relay runs; a file that
// cannot be read keeps the previous list (and says so on stderr, which the
// relay logs). Flags:
//
//	-tagged   also accept events that p-tag a member (replies, mentions,
//	          direct messages to members from outside)
//	-authed   also accept events sent over a connection authenticated
//	          (NIP-42) as a member, whoever their author (petrel's "authed"
//	          field; strfry does not send it)
//	-msg      the refusal ("restricted: ..." by default)
//
// It only needs the standard library: copy it out and build it anywhere.
//
// Protocol (strfry's, which petrel speaks): one JSON request per line on
// stdin, {"type":"new","event":{...},"receivedAt":...,"sourceType":"IP4",
// "sourceInfo":"203.0.113.7","authed":"<hex>"}, one JSON answer per line
// on stdout, {"id":"<event id>","action":"accept"|"reject"|"shadowReject",
// "msg":"..."}.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"
)

// request is one line from the relay.
type request struct {
	Type  string `json:"type"`
	Event struct {
		ID     string     `json:"id"`
		PubKey string     `json:"pubkey"`
		Kind   int        `json:"kind"`
		Tags   [][]string `json:"tags"`
	} `json:"event"`
	Authed string `json:"authed"`
}

// answer is one line to the relay.
type answer struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Msg    string `json:"msg,omitempty"`
}

// members is the allow list, read again from its file when it changes.
type members struct {
	path    string
	set     map[string]bool
	mod     time.Time
	checked time.Time
	now     func() time.Time
}

// load reads the file if it changed since the last read (at most once a
// second unless force).
func (m *members) load(force bool) error {
	now := m.now()
	if !force && now.Sub(m.checked) < time.Second {
		return nil
	}
	m.checked = now
	fi, err := os.Stat(m.path)
	if err != nil {
		return err
	}
	if !force && fi.ModTime().Equal(m.mod) {
		return nil
	}
	f, err := os.Open(m.path)
	if err != nil {
		return err
	}
	defer f.Close()
	set, err := parseMembers(f)
	if err != nil {
		return fmt.Errorf("%s: %w", m.path, err)
	}
	m.set, m.mod = set, fi.ModTime()
	log.Printf("loaded %d members from %s", len(set), m.path)
	return nil
}

// parseMembers reads one hex pubkey per line.
func parseMembers(r io.Reader) (map[string]bool, error) {
	set := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key := strings.ToLower(strings.Fields(line)[0])
		if b, err := hex.DecodeString(key); err != nil || len(b) != 32 {
			return nil, fmt.Errorf("line %d: %q is not a 64-character hex pubkey", n, key)
		}
		set[key] = true
	}
	return set, sc.Err()
}

// policy decides on requests.
type policy struct {
	members *members
	tagged  bool
	authed  bool
	msg     string
}

func (p *policy) decide(req *request) answer {
	a := answer{ID: req.Event.ID, Action: "accept"}
	if req.Type != "new" {
		return a
	}
	if err := p.members.load(false); err != nil {
		log.Printf("%v; keeping the previous list", err)
	}
	set := p.members.set
	switch {
	case set[strings.ToLower(req.Event.PubKey)]:
		return a
	case p.authed && req.Authed != "" && set[strings.ToLower(req.Authed)]:
		return a
	case p.tagged:
		for _, t := range req.Event.Tags {
			if len(t) >= 2 && t[0] == "p" && set[strings.ToLower(t[1])] {
				return a
			}
		}
	}
	a.Action, a.Msg = "reject", p.msg
	return a
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("allowlist: ")
	path := flag.String("pubkeys", "members.txt", "file of allowed hex pubkeys, one per line")
	tagged := flag.Bool("tagged", false, "also accept events that p-tag a member")
	authed := flag.Bool("authed", false, "also accept events sent by a connection authenticated as a member")
	msg := flag.String("msg", "restricted: this relay accepts events from its members only", "the refusal message")
	flag.Parse()

	p := &policy{members: &members{path: *path, now: time.Now}, tagged: *tagged, authed: *authed, msg: *msg}
	if err := p.members.load(true); err != nil {
		log.Fatal(err) // the relay restarts the plugin, and logs this
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			log.Printf("not a request: %v", err)
			continue
		}
		if err := enc.Encode(p.decide(&req)); err != nil {
			log.Fatal(err)
		}
		// Answer at once: the relay holds the event until then.
		if err := out.Flush(); err != nil {
			log.Fatal(err)
		}
	}
	if err := out.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := in.Err(); err != nil {
		log.Fatal(err)
	}
}
