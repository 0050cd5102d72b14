package policy

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Tests of the plugin protocol's encoding alone, without a process.

func TestDecisionRejection(t *testing.T) {
	f := func(d Decision, want string) {
		t.Helper()
		got := ""
		if rej := d.Rejection(); rej != nil {
			got = rej.Error()
		}
		if got != want {
			t.Fatalf("%+v: %q, want %q", d, got, want)
		}
	}
	f(Decision{Action: Accept, Msg: "blocked: ignored"}, "")
	f(Decision{Action: ShadowReject}, "")
	f(Decision{Action: Reject}, "blocked: rejected by the relay's write policy")
	f(Decision{Action: Reject, Msg: "blocked: no"}, "blocked: no")
	f(Decision{Action: Reject, Msg: "rate-limited:slow"}, "rate-limited: slow")
	f(Decision{Action: Reject, Msg: "spam: no"}, "blocked: spam: no")
	f(Decision{Action: Reject, Msg: "error: internal error"}, "error: internal error")
}

func TestAppendRequest(t *testing.T) {
	ev := testEvent("line1\nline2 \"quoted\"")
	authed := testKey.PubKey()
	line := appendRequest(nil, ev, Meta{ReceivedAt: time.Unix(42, 0), SourceType: SourceIP4, SourceInfo: "192.0.2.1", Authed: authed})
	if strings.Count(string(line), "\n") != 1 || line[len(line)-1] != '\n' {
		t.Fatalf("not one line: %q", line)
	}
	var got struct {
		Type       string          `json:"type"`
		Event      json.RawMessage `json:"event"`
		ReceivedAt int64           `json:"receivedAt"`
		SourceType string          `json:"sourceType"`
		SourceInfo string          `json:"sourceInfo"`
		Authed     string          `json:"authed"`
	}
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	if got.Type != "new" || string(got.Event) != string(ev.Raw) || got.ReceivedAt != 42 ||
		got.SourceType != "IP4" || got.SourceInfo != "192.0.2.1" || got.Authed != authed.Hex() {
		t.Fatalf("request %+v", got)
	}
	// An event built in code without Raw is serialized.
	ev2 := *ev
	ev2.Raw = nil
	if err := json.Unmarshal(appendRequest(nil, &ev2, Meta{}), &got); err != nil || string(got.Event) != string(ev.Raw) || got.Authed != "" {
		t.Fatalf("event %s, authed %q, err %v", got.Event, got.Authed, err)
	}
}

func TestParseAnswer(t *testing.T) {
	id := testEvent("x").ID
	f := func(line string, want answer, wantErr error) {
		t.Helper()
		got, err := parseAnswer([]byte(line))
		if !errors.Is(err, wantErr) || (err == nil && got != want) {
			t.Fatalf("%s: %+v, %v; want %+v, %v", line, got, err, want, wantErr)
		}
	}
	h := id.Hex()
	f(`{"id":"`+h+`","action":"accept"}`, answer{ID: id, Action: Accept}, nil)
	f(`{"id":"`+h+`","action":"reject","msg":"blocked: x"}`, answer{ID: id, Action: Reject, Msg: "blocked: x"}, nil)
	f(`{"id":"`+h+`","action":"shadowReject","msg":null}`, answer{ID: id, Action: ShadowReject}, nil)
	f(`{"id":"`+strings.ToUpper(h)+`","action":"accept"}`, answer{ID: id, Action: Accept}, nil)
	f(`{"id":"`+h+`","action":"Accept"}`, answer{}, errAnswerAction)
	f(`{"id":"`+h+`","action":"reject","msg":5}`, answer{}, errAnswerAction)
	f(`{"id":"`+h+`"}`, answer{}, errAnswerAction)
	f(`{"id":"abc","action":"accept"}`, answer{}, errAnswerSyntax)
	f(`{"action":"accept"}`, answer{}, errAnswerSyntax)
	f(`not json`, answer{}, errAnswerSyntax)
	f(`[]`, answer{}, errAnswerSyntax)
}

func FuzzParseAnswer(f *testing.F) {
	h := testEvent("x").ID.Hex()
	for _, s := range []string{
		`{"id":"` + h + `","action":"accept"}`,
		`{"id":"` + h + `","action":"reject","msg":"blocked: x"}`,
		`{"id":"` + h + `","action":"shadowReject"}`,
		`{"id":5}`, `garbage`, `{"id":"` + h + `","action":"reject","msg":{"a":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := parseAnswer(line)
		if err == nil && (a.Action < Accept || a.Action > ShadowReject) {
			t.Fatalf("accepted %q with action %v", line, a.Action)
		}
		if err != nil && !errors.Is(err, errAnswerSyntax) && !errors.Is(err, errAnswerAction) {
			t.Fatalf("unclassified error %v", err)
		}
	})
}

func TestActionNames(t *testing.T) {
	for _, a := range []Action{Accept, Reject, ShadowReject} {
		if got, ok := parseAction(a.String()); !ok || got != a {
			t.Errorf("parseAction(%q) = %v, %v", a.String(), got, ok)
		}
	}
	for _, name := range []string{"", "Accept", "action(0)", "shadowreject"} {
		if a, ok := parseAction(name); ok {
			t.Errorf("parseAction(%q) = %v", name, a)
		}
	}
	if s := Action(0).String(); s != "action(0)" {
		t.Errorf("Action(0) = %q", s)
	}
	if s := Action(9).String(); s != "action(9)" {
		t.Errorf("Action(9) = %q", s)
	}
}

func TestMetaFromIP(t *testing.T) {
	f := func(ip string, wantType SourceType, wantInfo string) {
		t.Helper()
		m := MetaFromIP(netip.MustParseAddr(ip), nostr.PubKey{})
		if m.SourceType != wantType || m.SourceInfo != wantInfo || m.Authed != (nostr.PubKey{}) {
			t.Fatalf("%s: %+v, want %s %s", ip, m, wantType, wantInfo)
		}
	}
	f("192.0.2.1", SourceIP4, "192.0.2.1")
	f("::ffff:192.0.2.1", SourceIP4, "192.0.2.1")
	f("2001:db8::1", SourceIP6, "2001:db8::1")
	f("fe80::1%eth0", SourceIP6, "fe80::1")
}

func TestReadLine(t *testing.T) {
	type line struct {
		text string
		long bool
	}
	f := func(in string, want ...line) {
		t.Helper()
		br := bufio.NewReaderSize(strings.NewReader(in), 16) // bufio's minimum size
		var got []line
		for {
			l, long, err := readLine(br)
			if len(l) > 0 || long {
				got = append(got, line{string(l), long})
			}
			if err != nil {
				if err != io.EOF {
					t.Fatalf("%q: %v", in, err)
				}
				break
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%q: lines %+v, want %+v", in, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q: line %d is %+v, want %+v", in, i, got[i], want[i])
			}
		}
	}
	f("")
	f("a\nb\r\n", line{"a", false}, line{"b", false})
	f("no newline", line{"no newline", false})
	f("exactly 15 byte\n", line{"exactly 15 byte", false})
	// Longer than the buffer: cut to it, flagged, and the rest skipped.
	f("0123456789abcdefXYZ\nnext\n", line{"0123456789abcdef", true}, line{"next", false})
	f("0123456789abcdef0123456789abcdefXYZ", line{"0123456789abcdef", true})
}
