package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestDeployFilesInDocs: docs/operations.md shows deploy/haproxy.cfg (the
// file the other tests run HAProxy with), deploy/nginx.conf and
// deploy/petrel.service as they are, so that the documented configuration
// is the tested one.
func TestDeployFilesInDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	f := func(file, lang string) {
		t.Helper()
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks := fencedBlocks(string(doc), lang)
		for _, b := range blocks {
			if b == strings.TrimRight(string(want), "\n") {
				return
			}
		}
		t.Errorf("docs/operations.md has no ```%s block identical to %s (%d %s blocks): copy the file into the doc", lang, file, len(blocks), lang)
	}
	f("../../deploy/haproxy.cfg", "haproxy")
	f("../../deploy/nginx.conf", "nginx")
	f("../../deploy/petrel.service", "ini")
}

// fencedBlocks returns the contents of the markdown code blocks opened
// with ```lang.
func fencedBlocks(doc, lang string) []string {
	var out []string
	var cur []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return out
}
