// Copyright The Prometheus Authors
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
// http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package procfs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// packageRegexps are the package's regular expressions, each with a line
// it must match and the submatches it must find there.
var packageRegexps = []struct {
	name string
	re   *lazyRegexp
	line string
	want []string
}{
	{"cpuinfoClockRegexp", cpuinfoClockRegexp, "2400.000 MHz", []string{"2400.000", "2400.000"}},
	{"cpuinfoS390XProcessorRegexp", cpuinfoS390XProcessorRegexp, "processor 3: version", []string{"processor 3: version", "3"}},
	{"statusLineRE", statusLineRE, "1953511936 blocks super 1.2 [2/2] [UU]", []string{"1953511936 blocks super 1.2 [2/2] [UU]", "1953511936", "2", "2", "UU"}},
	{"recoveryLineBlocksRE", recoveryLineBlocksRE, "(1234/5678)", []string{"(1234/5678)", "1234/5678"}},
	{"recoveryLinePctRE", recoveryLinePctRE, "recovery = 12.6%", []string{"= 12.6%", "12.6"}},
	{"recoveryLineFinishRE", recoveryLineFinishRE, "finish=127.5min", []string{"finish=127.5min", "127.5"}},
	{"recoveryLineSpeedRE", recoveryLineSpeedRE, "speed=1234K/sec", []string{"speed=1234K", "1234"}},
	{"componentDeviceRE", componentDeviceRE, "sda1[0](F)", []string{"sda1[0](F)", "sda1", "0", "(F)"}},
	{"rPos", rPos, "pos:\t10", []string{"pos:\t10", "10"}},
	{"rFlags", rFlags, "flags:\t02004002", []string{"flags:\t02004002", "02004002"}},
	{"rMntID", rMntID, "mnt_id:\t13", []string{"mnt_id:\t13", "13"}},
	{"rIno", rIno, "ino:\t2345", []string{"ino:\t2345", "2345"}},
	{"rInotify", rInotify, "inotify wd:3", []string{"inotify"}},
	{"rInotifyParts", rInotifyParts, "inotify wd:3 ino:1 sdev:34 mask:100", []string{"inotify wd:3 ino:1 sdev:34 mask:100", "3", "1", "34", "100"}},
	{"limitsMatch", limitsMatch, "Max open files            20000                20000                files", []string{"Max open files            20000                20000", "Max open files", "20000", "20000"}},
	{"procSMapsHeaderLine", procSMapsHeaderLine, "00400000-0048a000 r-xp", []string{"00400000-0048a000 r-xp"}},
	{"cpuLineRE", cpuLineRE, "cpu0 1 2 3 4 5 6 7 8 9", []string{"cpu0 1 2 3 4 5 6 7 8 9", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
	{"procLineRE", procLineRE, "10 20 30", []string{"10 20 30", "10", "20", "30"}},
	{"slabSpace", slabSpace, "a  b", []string{"  "}},
	{"slabVer", slabVer, "slabinfo - version: 2.1", []string{"slabinfo -"}},
	{"slabHeader", slabHeader, "# name <active_objs>", []string{"# name"}},
	{"nodeZoneRE", nodeZoneRE, "Node 0, zone   Normal", []string{"0, zone   Normal", "0", "Normal"}},
}

// TestRegexpsCompiledOnFirstUse: loading the package compiles none of its
// regular expressions; each compiles on its first use, to the expression
// the release compiled at start-up. This test must stay the first to use
// them.
func TestRegexpsCompiledOnFirstUse(t *testing.T) {
	for _, r := range packageRegexps {
		if r.re.rx != nil {
			t.Errorf("%s was compiled before its first use", r.name)
		}
	}
	for _, r := range packageRegexps {
		if got := r.re.FindStringSubmatch(r.line); !slices.Equal(got, r.want) {
			t.Errorf("%s on %q: %q, want %q", r.name, r.line, got, r.want)
		}
		if r.re.rx == nil || r.re.rx.String() != r.re.expr {
			t.Errorf("%s: not compiled from %q after use", r.name, r.re.expr)
		}
	}
}

// TestEveryRegexpListed: packageRegexps holds every newLazyRegexp of the
// package's source (so a newer release's expressions, made lazy, are
// tested too).
func TestEveryRegexpListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, f := range files {
		if f == "lazyregexp.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		calls += strings.Count(string(src), "newLazyRegexp(")
	}
	if calls != len(packageRegexps) {
		t.Errorf("the package's source makes %d lazy regexps, the test lists %d", calls, len(packageRegexps))
	}
}

// TestLazyRegexpMethods: each method answers as the compiled expression's.
func TestLazyRegexpMethods(t *testing.T) {
	l, re := newLazyRegexp(`b+`), regexp.MustCompile(`b+`)
	const s = "abbcbd"
	if got, want := l.FindString(s), re.FindString(s); got != want {
		t.Errorf("FindString: %q, want %q", got, want)
	}
	if got, want := l.MatchString(s), re.MatchString(s); got != want {
		t.Errorf("MatchString: %v, want %v", got, want)
	}
	if got, want := l.ReplaceAllString(s, "-"), re.ReplaceAllString(s, "-"); got != want {
		t.Errorf("ReplaceAllString: %q, want %q", got, want)
	}
	if got, want := l.Split(s, -1), re.Split(s, -1); !slices.Equal(got, want) {
		t.Errorf("Split: %q, want %q", got, want)
	}
}

// TestLazyRegexpPanicsOnFirstUse: an expression that does not compile
// panics when first used, as regexp.MustCompile does.
func TestLazyRegexpPanicsOnFirstUse(t *testing.T) {
	l := newLazyRegexp(`(`)
	defer func() {
		if recover() == nil {
			t.Error("an invalid expression did not panic on use")
		}
	}()
	l.MatchString("x")
}

// TestProcessLimitsAndFDInfo reads this process's limits (as the
// Prometheus process collector does for process_max_fds) and a
// descriptor's fdinfo, through the lazily compiled expressions.
func TestProcessLimitsAndFDInfo(t *testing.T) {
	p, err := Self()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	limits, err := p.Limits()
	if err != nil {
		t.Fatal(err)
	}
	if limits.OpenFiles <= 0 {
		t.Errorf("max open files %d, want > 0", limits.OpenFiles)
	}
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := p.FDInfo(strconv.Itoa(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	if info.Pos != "0" || info.MntID == "" || info.Ino == "" {
		t.Errorf("fdinfo of a fresh descriptor: %+v", info)
	}
}
