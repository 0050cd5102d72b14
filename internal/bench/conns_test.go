package bench

import "testing"

func TestGroupDialError(t *testing.T) {
	for in, want := range map[string]string{
		"dial tcp 127.0.0.7:40312->127.0.0.1:7447: connect: connection refused": "dial tcp 127.0.0.1:7447: connect: connection refused",
		"dial tcp 127.0.0.190:1->127.0.0.1:7447: connect: connection refused":   "dial tcp 127.0.0.1:7447: connect: connection refused",
		"dial tcp [::1]:5000->[::1]:7447: i/o timeout":                          "dial tcp [::1]:7447: i/o timeout",
		"websocket: bad handshake":                                              "websocket: bad handshake",
		"->odd":                                                                 "odd",
	} {
		if got := groupDialError(in); got != want {
			t.Errorf("groupDialError(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFirstErrorKinds(t *testing.T) {
	errs := []string{"a", "b", "c", "d", "e", "f", "g"}
	if got := firstErrorKinds(errs[:maxErrorKinds]); len(got) != maxErrorKinds || got[maxErrorKinds-1] != "e" {
		t.Fatalf("at the limit: %q", got)
	}
	got := firstErrorKinds(errs[:maxErrorKinds+1])
	if len(got) != maxErrorKinds+1 || got[maxErrorKinds] != "and 1 other errors" || got[maxErrorKinds-1] != "e" {
		t.Fatalf("one past the limit: %q", got)
	}
	if errs[maxErrorKinds] != "f" {
		t.Fatal("the caller's slice was modified")
	}
}

func TestParseStatusAnon(t *testing.T) {
	st := "Name:\tpetrel\nVmRSS:\t   40780 kB\nRssAnon:\t    9128 kB\nRssFile:\t   31652 kB\n"
	if got := parseStatusAnon(st); got != 9128<<10 {
		t.Fatalf("RssAnon %d", got)
	}
	if got := parseStatusAnon("VmRSS:\t 1 kB\n"); got != 0 {
		t.Fatalf("no RssAnon line: %d", got)
	}
}
