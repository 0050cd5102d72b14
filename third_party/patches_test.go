package thirdparty

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The check of a fork against its release. PATCHES.md is read for three
// things:
//
//   - ```diff blocks: unified diffs, applied to the release in the order
//     they appear, each to the result of the ones before it (a series, as
//     a patch queue applies them). Paths are relative to the module root,
//     with or without a/ and b/ prefixes; /dev/null creates or deletes a
//     file. Hunks must apply at the lines they name, with their context.
//   - ```left-out blocks: one pattern a line for the release's files the
//     fork does not carry: "dir/" (a directory and everything in it), or a
//     pattern for the file's base name ("*_test.go"). Every pattern must
//     match a file of the release.
//   - test files of the fork's own (*_test.go that the release does not
//     have), each named in PATCHES.md in backquotes, by its path.
//
// The result must be the fork exactly; PATCHES.md itself is the one other
// file the fork may have.

// fileDiff is one file's part of a unified diff.
type fileDiff struct {
	oldPath, newPath string // "" for /dev/null
	hunks            []hunk
}

// hunk is one @@ section: the old file's lines from oldStart (1-based;
// 0 with oldLen 0 for an empty file), and the lines that replace them.
type hunk struct {
	oldStart, oldLen, newStart, newLen int
	lines                              []hunkLine
}

type hunkLine struct {
	op   byte   // ' ', '-' or '+'
	text string // with its newline, unless the file ends without one
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// diffPath returns the path a ---/+++ line names, "" for /dev/null.
func diffPath(line, prefix string) string {
	p := strings.TrimPrefix(line, prefix)
	if i := strings.IndexByte(p, '\t'); i >= 0 {
		p = p[:i] // a timestamp follows
	}
	p = strings.TrimSpace(p)
	if p == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(p, "a/") || strings.HasPrefix(p, "b/") {
		p = p[2:]
	}
	return path.Clean(p)
}

// parseDiff parses the unified diff of one ```diff block.
func parseDiff(block string) ([]fileDiff, error) {
	lines := strings.SplitAfter(block, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var out []fileDiff
	for i := 0; i < len(lines); {
		l := strings.TrimSuffix(lines[i], "\n")
		switch {
		case strings.HasPrefix(l, "--- "):
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "+++ ") {
				return nil, fmt.Errorf("line %d: --- without +++", i+1)
			}
			out = append(out, fileDiff{
				oldPath: diffPath(l, "--- "),
				newPath: diffPath(strings.TrimSuffix(lines[i+1], "\n"), "+++ "),
			})
			i += 2
		case strings.HasPrefix(l, "@@ "):
			if len(out) == 0 {
				return nil, fmt.Errorf("line %d: hunk before any file header", i+1)
			}
			m := hunkHeader.FindStringSubmatch(l)
			if m == nil {
				return nil, fmt.Errorf("line %d: bad hunk header %q", i+1, l)
			}
			num := func(s string) int {
				if s == "" {
					return 1
				}
				n, _ := strconv.Atoi(s)
				return n
			}
			h := hunk{oldStart: num(m[1]), oldLen: num(m[2]), newStart: num(m[3]), newLen: num(m[4])}
			i++
			oldN, newN := 0, 0
			for i < len(lines) && (oldN < h.oldLen || newN < h.newLen) {
				t := lines[i]
				var hl hunkLine
				switch {
				case t == "\n" || t == "":
					hl = hunkLine{' ', "\n"} // a blank context line whose space was trimmed
				case t[0] == ' ' || t[0] == '-' || t[0] == '+':
					hl = hunkLine{t[0], t[1:]}
				default:
					return nil, fmt.Errorf("line %d: %q inside a hunk", i+1, strings.TrimSuffix(t, "\n"))
				}
				if hl.op != '+' {
					oldN++
				}
				if hl.op != '-' {
					newN++
				}
				h.lines = append(h.lines, hl)
				i++
				if i < len(lines) && strings.HasPrefix(lines[i], `\ No newline at end of file`) {
					last := &h.lines[len(h.lines)-1]
					last.text = strings.TrimSuffix(last.text, "\n")
					i++
				}
			}
			if oldN != h.oldLen || newN != h.newLen {
				return nil, fmt.Errorf("hunk %q: %d old and %d new lines, header says %d and %d", l, oldN, newN, h.oldLen, h.newLen)
			}
			fd := &out[len(out)-1]
			fd.hunks = append(fd.hunks, h)
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "diff ") || strings.HasPrefix(l, "index ") || strings.HasPrefix(l, "Only in "):
			i++ // between files: blank lines and the headers diff -r and git write
		default:
			return nil, fmt.Errorf("line %d: %q outside a hunk", i+1, l)
		}
	}
	return out, nil
}

// splitLines splits b into lines that keep their newlines.
func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	ls := strings.SplitAfter(string(b), "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// applyHunks applies a file's hunks to its lines, strictly: each hunk at
// the line it names, its context and removed lines as they are.
func applyHunks(old []string, hunks []hunk) ([]string, error) {
	var out []string
	pos := 0 // next line of old to copy
	for _, h := range hunks {
		start := h.oldStart - 1
		if h.oldLen == 0 {
			start = h.oldStart // an insertion after line oldStart
		}
		if start < pos || start > len(old) {
			return nil, fmt.Errorf("hunk @@ -%d,%d: out of order or past the end (%d lines)", h.oldStart, h.oldLen, len(old))
		}
		out = append(out, old[pos:start]...)
		pos = start
		for _, l := range h.lines {
			switch l.op {
			case ' ', '-':
				if pos >= len(old) || old[pos] != l.text {
					got := "end of file"
					if pos < len(old) {
						got = fmt.Sprintf("%q", old[pos])
					}
					return nil, fmt.Errorf("hunk @@ -%d,%d: line %d is %s, the diff expects %q", h.oldStart, h.oldLen, pos+1, got, l.text)
				}
				if l.op == ' ' {
					out = append(out, l.text)
				}
				pos++
			case '+':
				out = append(out, l.text)
			}
		}
	}
	return append(out, old[pos:]...), nil
}

// fencedBlocks returns the contents of the markdown fenced blocks whose
// info string is info, in order.
func fencedBlocks(md, info string) []string {
	var blocks []string
	var cur *strings.Builder
	for _, l := range strings.SplitAfter(md, "\n") {
		t := strings.TrimRight(l, "\r\n")
		if cur == nil {
			if strings.HasPrefix(t, "```") && strings.TrimSpace(t[3:]) == info {
				cur = &strings.Builder{}
			}
			continue
		}
		if strings.TrimSpace(t) == "```" {
			blocks = append(blocks, cur.String())
			cur = nil
			continue
		}
		cur.WriteString(l)
	}
	return blocks
}

// leftOut reports whether rel (a slash path) matches a left-out pattern.
func leftOut(pattern, rel string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(rel, pattern)
	}
	if strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, rel)
		return ok
	}
	ok, _ := path.Match(pattern, path.Base(rel))
	return ok
}

// readTree returns the regular files under dir by slash path.
func readTree(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	return files, err
}

// errUndocumented marks a problem of the fork, as opposed to one of
// PATCHES.md's own form.
var errUndocumented = errors.New("thirdparty: the fork does not match PATCHES.md")

// checkFork compares the fork in forkDir with the release in releaseDir
// as its PATCHES.md describes, and returns every mismatch found.
func checkFork(releaseDir, forkDir string) []error {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("%w: "+format, append([]any{errUndocumented}, args...)...))
	}
	release, err := readTree(releaseDir)
	if err != nil {
		return []error{err}
	}
	fork, err := readTree(forkDir)
	if err != nil {
		return []error{err}
	}
	mdBytes, ok := fork["PATCHES.md"]
	if !ok {
		return []error{fmt.Errorf("%w: no PATCHES.md in %s", errUndocumented, forkDir)}
	}
	md := string(mdBytes)

	// The release, less what PATCHES.md leaves out.
	want := map[string][]string{}
	var patterns []string
	for _, b := range fencedBlocks(md, "left-out") {
		for _, p := range strings.Split(b, "\n") {
			if p = strings.TrimSpace(p); p != "" {
				patterns = append(patterns, p)
			}
		}
	}
	used := map[string]bool{}
	for rel, b := range release {
		out := false
		for _, p := range patterns {
			if leftOut(p, rel) {
				out, used[p] = true, true
			}
		}
		if !out {
			want[rel] = splitLines(b)
		}
	}
	for _, p := range patterns {
		if !used[p] {
			bad("left-out pattern %q matches no file of the release", p)
		}
	}

	// The diffs, in order.
	created := map[string]bool{}
	for n, block := range fencedBlocks(md, "diff") {
		fds, err := parseDiff(block)
		if err != nil {
			bad("diff block %d: %v", n+1, err)
			continue
		}
		for _, fd := range fds {
			switch {
			case fd.oldPath == "" && fd.newPath == "":
				bad("diff block %d: /dev/null on both sides", n+1)
			case fd.oldPath == "":
				if _, dup := want[fd.newPath]; dup {
					bad("diff block %d: creates %s, which exists", n+1, fd.newPath)
					continue
				}
				lines, err := applyHunks(nil, fd.hunks)
				if err != nil {
					bad("diff block %d, %s: %v", n+1, fd.newPath, err)
					continue
				}
				want[fd.newPath] = lines
				created[fd.newPath] = true
			default:
				old, ok := want[fd.oldPath]
				if !ok {
					bad("diff block %d: %s is not in the release (or was left out)", n+1, fd.oldPath)
					continue
				}
				lines, err := applyHunks(old, fd.hunks)
				if err != nil {
					bad("diff block %d, %s: %v", n+1, fd.oldPath, err)
					continue
				}
				delete(want, fd.oldPath)
				if fd.newPath != "" {
					want[fd.newPath] = lines
				}
			}
		}
	}

	// Compare.
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range fork {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		w, inWant := want[p]
		f, inFork := fork[p]
		switch {
		case inWant && inFork:
			wb := []byte(strings.Join(w, ""))
			if !bytes.Equal(wb, f) {
				bad("%s: the fork differs from the release with PATCHES.md's diffs applied, first at line %d", p, firstDiffLine(wb, f))
			}
		case inWant:
			if created[p] {
				bad("%s: a diff in PATCHES.md creates it, the fork has no such file", p)
			} else {
				bad("%s: in the release but not in the fork, and not left out in PATCHES.md", p)
			}
		case p == "PATCHES.md":
		case strings.HasSuffix(p, "_test.go") && strings.Contains(md, "`"+p+"`"):
			// One of the fork's own tests, named in PATCHES.md.
		case strings.HasSuffix(p, "_test.go"):
			bad("%s: a test of the fork's that PATCHES.md does not name (in backquotes)", p)
		default:
			bad("%s: in the fork only, and no diff in PATCHES.md creates it", p)
		}
	}
	// Tests PATCHES.md names must exist.
	for _, m := range regexp.MustCompile("`([A-Za-z0-9_./-]+_test\\.go)`").FindAllStringSubmatch(md, -1) {
		if _, ok := fork[m[1]]; !ok {
			bad("PATCHES.md names the test %s, which the fork does not have", m[1])
		}
	}
	return problems
}

// firstDiffLine returns the 1-based number of the first line where a and b
// differ.
func firstDiffLine(a, b []byte) int {
	n := 1
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return n
		}
		if a[i] == '\n' {
			n++
		}
	}
	return n
}
