package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// benchProgress shows a scenario's phases as progress bars on a terminal.
type benchProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

// newBenchProgress returns a progress display on w, or nil when w is not
// a terminal.
func newBenchProgress(w io.Writer) *benchProgress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &benchProgress{w: w}
}

// Phase implements bench.Progress.
func (p *benchProgress) Phase(name string, total int64) {
	p.Done()
	if total <= 0 {
		total = -1 // spinner
	}
	p.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(name),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

// Set implements bench.Progress.
func (p *benchProgress) Set(done int64) {
	if p.bar != nil {
		p.bar.Set64(done)
	}
}

// Done implements bench.Progress.
func (p *benchProgress) Done() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar.Clear()
		p.bar = nil
	}
}
