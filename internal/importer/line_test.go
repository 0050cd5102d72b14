package importer

import (
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestParseLine(t *testing.T) {
	ev := relaytest.NewKey("import-parse").Note("hi")
	raw := string(ev.Raw)
	f := func(line string, isEvent bool, wantErr string) {
		t.Helper()
		got, ok, err := parseLine([]byte(line))
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("%s: error %v, want %q", line, err, wantErr)
			}
			return
		}
		if err != nil || ok != isEvent {
			t.Fatalf("%s: event %v, error %v", line, ok, err)
		}
		if isEvent && got.ID != ev.ID {
			t.Fatalf("%s: id %s", line, got.ID.Hex())
		}
	}
	f(raw, true, "")
	f(`["EVENT",`+raw+`]`, true, "")
	f(`[ "EVENT" , "s" , `+raw+` ]`, true, "")
	f(`["EVENT","s\"x",`+raw+`]`, true, "")
	f(`["EOSE","s"]`, false, "")
	f(`["OK","`+ev.ID.Hex()+`",true,""]`, false, "")
	f(`["REQ","s",{}]`, false, "")
	f(`["CLOSE","s"]`, false, "")
	f(`["EVENT","s"]`, false, "nostr:")
	f(`["EVENT",{"id":1}]`, false, "nostr:")
	f(`["WHAT"]`, false, "nostr:")
	f(`[`, false, "nostr:")
	f(`{`, false, "nostr:")
}
