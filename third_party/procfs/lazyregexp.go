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
	"regexp"
	"sync"
)

// lazyRegexp is a regular expression compiled the first time it is used,
// not at package initialisation: the package's parsers each need one or
// two of them, and a process that links the package (every user of
// client_golang does) should not compile them all at start-up. (petrel's
// fork; the release compiles them into package-level variables.)
type lazyRegexp struct {
	expr string
	once sync.Once
	rx   *regexp.Regexp
}

// newLazyRegexp returns expr to be compiled on first use; it panics then
// if expr does not compile, as regexp.MustCompile would have at start-up.
func newLazyRegexp(expr string) *lazyRegexp {
	return &lazyRegexp{expr: expr}
}

func (r *lazyRegexp) re() *regexp.Regexp {
	r.once.Do(func() { r.rx = regexp.MustCompile(r.expr) })
	return r.rx
}

func (r *lazyRegexp) FindString(s string) string { return r.re().FindString(s) }

func (r *lazyRegexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

func (r *lazyRegexp) MatchString(s string) bool { return r.re().MatchString(s) }

func (r *lazyRegexp) ReplaceAllString(src, repl string) string {
	return r.re().ReplaceAllString(src, repl)
}

func (r *lazyRegexp) Split(s string, n int) []string { return r.re().Split(s, n) }
