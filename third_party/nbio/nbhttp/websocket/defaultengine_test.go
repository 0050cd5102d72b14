package websocket

import (
	"os"
	"os/exec"
	"testing"

	"github.com/lesismal/nbio/nbhttp"
)

// TestDefaultEngineMadeOnFirstUse (petrel patch 13): linking the package
// makes no engine (no goroutines at init); the first NewUpgrader makes
// DefaultEngine and every later one shares it. It runs in a child process
// of its own, since other tests in this binary make upgraders first.
func TestDefaultEngineMadeOnFirstUse(t *testing.T) {
	if os.Getenv("NBIO_TEST_DEFAULT_ENGINE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultEngineMadeOnFirstUse$", "-test.v")
		cmd.Env = append(os.Environ(), "NBIO_TEST_DEFAULT_ENGINE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	if DefaultEngine != nil {
		t.Fatal("DefaultEngine was made at init")
	}
	u1 := NewUpgrader()
	if u1.Engine == nil || u1.Engine != DefaultEngine {
		t.Fatalf("first upgrader's engine %p, DefaultEngine %p", u1.Engine, DefaultEngine)
	}
	if u2 := NewUpgrader(); u2.Engine != u1.Engine {
		t.Fatalf("second upgrader's engine %p, first's %p", u2.Engine, u1.Engine)
	}
}

// TestUpgraderWithEngine (petrel patch 14): an upgrader made for an
// engine uses it and makes no DefaultEngine. A child process, as above.
func TestUpgraderWithEngine(t *testing.T) {
	if os.Getenv("NBIO_TEST_DEFAULT_ENGINE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUpgraderWithEngine$", "-test.v")
		cmd.Env = append(os.Environ(), "NBIO_TEST_DEFAULT_ENGINE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	engine := nbhttp.NewEngine(nbhttp.Config{})
	u := NewUpgraderWithEngine(engine)
	if u.Engine != engine {
		t.Fatalf("upgrader's engine %p, want %p", u.Engine, engine)
	}
	if u.MessageLengthLimit != DefaultMessageLengthLimit || u.KeepaliveTime != nbhttp.DefaultKeepaliveTime {
		t.Fatalf("upgrader made for an engine lost NewUpgrader's defaults: %+v", u.commonFields)
	}
	if DefaultEngine != nil {
		t.Fatal("NewUpgraderWithEngine made DefaultEngine")
	}
}
