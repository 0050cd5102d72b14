// Copyright 2014 The Prometheus Authors
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

package prometheus

import (
	"errors"
	"runtime"
	"sync"
	"testing"
)

// defaultCollectors returns how many collectors the default registry holds,
// without making its default ones.
func defaultCollectors() int {
	defaultRegistry.mtx.RLock()
	defer defaultRegistry.mtx.RUnlock()
	return len(defaultRegistry.collectorsByID)
}

// TestDefaultCollectorsMadeOnFirstUse: loading the package registers
// nothing; the first use of the default registry finds the process and Go
// collectors registered in it, as the release registered them at
// initialisation. This test must stay the first to use the default
// registry.
func TestDefaultCollectorsMadeOnFirstUse(t *testing.T) {
	if n := defaultCollectors(); n != 0 {
		t.Fatalf("the default registry holds %d collectors before its first use", n)
	}
	mfs, err := DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	want := []string{"go_goroutines", "go_memstats_alloc_bytes"}
	if runtime.GOOS == "linux" {
		want = append(want, "process_start_time_seconds", "process_max_fds")
	}
	for _, n := range want {
		if !names[n] {
			t.Errorf("the default registry's first gather has no %s", n)
		}
	}
	if n := defaultCollectors(); n != 2 {
		t.Errorf("the default registry holds %d collectors after its first use, want 2", n)
	}

	// They are registered as the release's were: a second Go collector is
	// refused as already registered, and the default one can be removed.
	var are AlreadyRegisteredError
	if err := Register(NewGoCollector()); !errors.As(err, &are) {
		t.Errorf("registering a second Go collector: %v, want AlreadyRegisteredError", err)
	}
	if !Unregister(NewGoCollector()) {
		t.Error("the default Go collector could not be unregistered")
	}
	if n := defaultCollectors(); n != 1 {
		t.Errorf("the default registry holds %d collectors after removing the Go collector, want 1", n)
	}
}

// TestEveryUseMakesTheDefaults: each of the default registry's methods
// makes its default collectors first (so a caller that registers, or
// describes, before it gathers sees the registry the release had), and a
// registry of the caller's own holds none.
func TestEveryUseMakesTheDefaults(t *testing.T) {
	uses := map[string]func(r *Registry){
		"Register": func(r *Registry) {
			_ = r.Register(NewCounter(CounterOpts{Name: "lazy_defaults_test_total", Help: "x"}))
		},
		"Unregister": func(r *Registry) { r.Unregister(NewCounter(CounterOpts{Name: "lazy_defaults_test_total", Help: "x"})) },
		"Gather":     func(r *Registry) { _, _ = r.Gather() },
		"Describe": func(r *Registry) {
			ch := make(chan *Desc, 1000)
			r.Describe(ch)
		},
		"Collect": func(r *Registry) {
			ch := make(chan Metric, 1000)
			r.Collect(ch)
		},
	}
	for name, use := range uses {
		t.Run(name, func(t *testing.T) {
			// A registry set up as the default one is, with defaults of its
			// own made on first use.
			r := NewRegistry()
			made := 0
			r.defaults = sync.OnceFunc(func() {
				made++
				if err := r.register(NewGoCollector()); err != nil {
					t.Error(err)
				}
			})
			use(r)
			if made != 1 {
				t.Errorf("%s made the defaults %d times, want 1", name, made)
			}
			use(r)
			if made != 1 {
				t.Errorf("a second %s made the defaults again", name)
			}
		})
	}
	if mfs, err := NewRegistry().Gather(); err != nil || len(mfs) != 0 {
		t.Errorf("a new registry gathered %d families (%v), want none", len(mfs), err)
	}
}
