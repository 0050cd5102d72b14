package policy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// pluginEnv selects a test plugin behaviour: when it is set, the test
// binary runs as a write-policy plugin instead of running tests (see
// writePluginScript).
const pluginEnv = "PETREL_TEST_PLUGIN"

func TestMain(m *testing.M) {
	if mode := os.Getenv(pluginEnv); mode != "" {
		os.Exit(runTestPlugin(mode))
	}
	os.Exit(m.Run())
}

// testRequest is the part of a plugin request the test plugins read.
type testRequest struct {
	Type  string `json:"type"`
	Event struct {
		ID      string `json:"id"`
		Content string `json:"content"`
		Kind    int    `json:"kind"`
	} `json:"event"`
	ReceivedAt int64  `json:"receivedAt"`
	SourceType string `json:"sourceType"`
	SourceInfo string `json:"sourceInfo"`
	Authed     string `json:"authed"`
}

// runTestPlugin is a write-policy plugin with a behaviour chosen by mode:
//
//	accept     accept everything
//	content    decide by content (see contentAnswer)
//	rejectall  reject everything with "blocked: everything is rejected"
//	hang       read requests, never answer
//	crash      answer PETREL_TEST_PLUGIN_N requests, exit 3 on the next
//	garbage    answer every request with a line that is not JSON
//	stderr     write "plugin saw <id>" to stderr, then accept
//	reverse    answer requests in pairs, second one first (content rules);
//	           a lone request is answered at end of input
func runTestPlugin(mode string) int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	limit, _ := strconv.Atoi(os.Getenv(pluginEnv + "_N"))
	var held []testRequest
	n := 0
	for in.Scan() {
		var req testRequest
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "bad request:", err)
			return 2
		}
		n++
		switch mode {
		case "accept":
			writeAnswer(out, req.Event.ID, "accept", "")
		case "content":
			if action, msg := contentAnswer(req); action != "" {
				writeAnswer(out, req.Event.ID, action, msg)
			}
		case "rejectall":
			writeAnswer(out, req.Event.ID, "reject", "blocked: everything is rejected")
		case "hang":
		case "crash":
			if n > limit {
				return 3
			}
			writeAnswer(out, req.Event.ID, "accept", "")
		case "garbage":
			fmt.Fprintln(out, "this is not json")
		case "stderr":
			fmt.Fprintln(os.Stderr, "plugin saw", req.Event.ID)
			writeAnswer(out, req.Event.ID, "accept", "")
		case "reverse":
			held = append(held, req)
			if len(held) == 2 {
				for _, r := range []testRequest{held[1], held[0]} {
					action, msg := contentAnswer(r)
					writeAnswer(out, r.Event.ID, action, msg)
				}
				held = held[:0]
			}
		default:
			fmt.Fprintln(os.Stderr, "unknown mode", mode)
			return 2
		}
		out.Flush()
	}
	// At end of input, answer what is held (reverse mode): a replaced or
	// closing plugin may still answer.
	for _, r := range held {
		action, msg := contentAnswer(r)
		writeAnswer(out, r.Event.ID, action, msg)
	}
	out.Flush()
	return 0
}

// contentAnswer decides by the event's content: "spam" anywhere rejects
// with "blocked: no spam", "shadow" shadow-rejects, "bad-action" answers an
// unknown action, "noprefix" rejects with "nope", "echo" rejects with the
// request's metadata as the message, "silent" gets no answer (action "";
// content mode only); anything else is accepted.
func contentAnswer(req testRequest) (action, msg string) {
	c := req.Event.Content
	switch {
	case strings.Contains(c, "spam"):
		return "reject", "blocked: no spam"
	case strings.Contains(c, "shadow"):
		return "shadowReject", ""
	case strings.Contains(c, "bad-action"):
		return "maybe", ""
	case strings.Contains(c, "noprefix"):
		return "reject", "nope"
	case strings.Contains(c, "silent"):
		return "", ""
	case strings.Contains(c, "echo"):
		return "reject", fmt.Sprintf("blocked: %s|%s|%s|%s|%d|%d|%s",
			req.Type, req.SourceType, req.SourceInfo, req.Authed, req.ReceivedAt, req.Event.Kind, req.Event.Content)
	}
	return "accept", ""
}

func writeAnswer(w *bufio.Writer, id, action, msg string) {
	b, _ := json.Marshal(map[string]string{"id": id, "action": action, "msg": msg})
	w.Write(b)
	w.WriteByte('\n')
}
