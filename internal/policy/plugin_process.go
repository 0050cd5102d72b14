package policy

import (
	"bufio"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the supervision of the plugin's processes: spawning one
// with its pipe goroutines, writing requests to it, reading its answers and
// stderr, restarting it when it exits, is stuck or its file changes, and
// retiring it.

// proc is one running plugin process.
type proc struct {
	gen        uint64
	cmd        *exec.Cmd
	stdin      *os.File
	stdout     *os.File
	stderr     *os.File
	stamp      fileStamp
	stopOnce   sync.Once
	stop       chan struct{} // closed: the writer must exit
	waited     chan struct{} // closed when cmd.Wait returned
	readerDone chan struct{}
	stderrDone chan struct{}
	lastAnswer atomic.Int64 // nanos since epoch of the last output line, or of the start
	answered   atomic.Bool
}

// clearCurrent leaves no process for new requests to go to (they wait for
// the next one spawn starts). The current writer, if any, ends.
func (p *Plugin) clearCurrent() {
	p.mu.Lock()
	p.cur = nil
	p.mu.Unlock()
	signal(p.sendSig)
}

// spawn starts a process, makes it the one new requests go to, and starts
// its reader, stderr logger, writer and waiter goroutines. The process is
// current before its writer runs: a writer that finds its process not
// current ends for good (its process was replaced), so a writer started
// first would close the new process's stdin without writing anything.
func (p *Plugin) spawn() (*proc, error) {
	var stamp fileStamp
	if p.watch {
		st, err := statFile(p.cmdline)
		if err != nil {
			return nil, err
		}
		stamp = st
	}
	var cmd *exec.Cmd
	if p.watch {
		cmd = exec.Command(p.cmdline)
	} else {
		cmd = exec.Command("/bin/sh", "-c", p.cmdline)
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	inR.Close()
	outW.Close()
	errW.Close()
	pr := &proc{
		cmd: cmd, stdin: inW, stdout: outR, stderr: errR, stamp: stamp,
		stop: make(chan struct{}), waited: make(chan struct{}),
		readerDone: make(chan struct{}), stderrDone: make(chan struct{}),
	}
	pr.lastAnswer.Store(p.since())
	p.mu.Lock()
	p.gen++
	gen := p.gen
	pr.gen = gen
	p.cur = pr
	p.mu.Unlock()
	p.log.Info("write policy plugin started", "pid", cmd.Process.Pid, "generation", gen)
	p.wg.Add(4)
	go func() {
		defer p.wg.Done()
		_ = cmd.Wait()
		close(pr.waited)
	}()
	go p.readAnswers(pr)
	go p.logStderr(pr)
	go p.write(pr)
	signal(p.sendSig)
	return pr, nil
}

// kill kills the process and its process group, unless it was reaped.
func (pr *proc) kill() {
	select {
	case <-pr.waited:
		return
	default:
	}
	killProcessGroup(pr.cmd)
}

func (pr *proc) stopWriter() { pr.stopOnce.Do(func() { close(pr.stop) }) }

// retire ends pr: its writer stops (closing its stdin), it gets up to wait
// to exit by itself, then is killed; its remaining output is read (up to
// drainGrace), and its unanswered requests are rejected with msg.
func (p *Plugin) retire(pr *proc, msg string, wait time.Duration) {
	pr.stopWriter()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-pr.waited:
		case <-t.C:
		}
		t.Stop()
	}
	pr.kill()
	<-pr.waited
	// Read what the process wrote before it exited. If a child it started
	// still holds a pipe open past the grace period, stop reading.
	grace := time.NewTimer(p.drainGrace)
	defer grace.Stop()
	expired := false
	for _, x := range []struct {
		done chan struct{}
		f    *os.File
	}{{pr.readerDone, pr.stdout}, {pr.stderrDone, pr.stderr}} {
		if !expired {
			select {
			case <-x.done:
				continue
			case <-grace.C:
				expired = true
			}
		}
		select {
		case <-x.done:
		default:
			x.f.Close()
			<-x.done
		}
	}
	p.failWhere(func(r *req) bool { return r.gen == pr.gen }, msg)
}

// supervise restarts the process when it exits, its file changes or it is
// stuck, until Close.
func (p *Plugin) supervise(pr *proc) {
	defer p.wg.Done()
	backoff := p.minBackoff
	restart := time.NewTimer(time.Hour)
	restart.Stop()
	var poll <-chan time.Time
	if p.watch {
		t := time.NewTicker(p.pollEvery)
		defer t.Stop()
		poll = t.C
	}
	var bad fileStamp // a changed file that failed to start: not retried until it changes again
	waited := pr.waited
	for {
		select {
		case <-p.quit:
			restart.Stop()
			if pr != nil {
				// pr stays current so that its writer sends what was
				// submitted before Close, then closes its stdin.
				p.retire(pr, msgShutdown, p.timeout)
				p.clearCurrent()
			}
			return
		case <-restart.C:
			np, err := p.spawn()
			if err != nil {
				p.log.Error("write policy plugin: cannot start", "err", err, "retry_in", backoff)
				restart.Reset(backoff)
				backoff = min(2*backoff, p.maxBackoff)
				continue
			}
			p.restarts.Add(1)
			pr, waited = np, np.waited
		case <-waited:
			p.clearCurrent()
			p.log.Warn("write policy plugin exited", "pid", pr.cmd.Process.Pid, "status", pr.cmd.ProcessState.String())
			p.retire(pr, msgExited, 0)
			if pr.answered.Load() {
				backoff = p.minBackoff
			}
			restart.Reset(backoff)
			backoff = min(2*backoff, p.maxBackoff)
			pr, waited = nil, nil
		case <-poll:
			if pr == nil {
				continue // the restart will use the new file
			}
			st, err := statFile(p.cmdline)
			if err != nil || st == pr.stamp || st == bad {
				continue
			}
			p.log.Info("write policy plugin file changed: restarting")
			np, err := p.spawn()
			if err != nil {
				p.log.Error("write policy plugin: cannot start the new version, keeping the old one", "err", err)
				bad = st
				continue
			}
			p.restarts.Add(1)
			old := pr
			pr, waited = np, np.waited
			backoff = p.minBackoff
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.retire(old, msgReloaded, p.timeout)
			}()
		case g := <-p.kick:
			if pr != nil && pr.gen == g {
				p.log.Warn("write policy plugin answered nothing within the timeout: killing it", "pid", pr.cmd.Process.Pid)
				pr.kill()
			}
		}
	}
}

// write sends pending requests to pr while it is the current process.
func (p *Plugin) write(pr *proc) {
	defer p.wg.Done()
	defer pr.stdin.Close()
	const maxBatch = 256
	var buf []byte
	for {
		p.mu.Lock()
		if p.cur != pr {
			p.mu.Unlock()
			signal(p.sendSig) // pass the signal on to the current writer
			return
		}
		buf = buf[:0]
		now := p.since()
		for n := 0; p.unsent != nil && n < maxBatch; n++ {
			r := p.unsent
			r.gen, r.sentAt = pr.gen, now
			buf = append(buf, r.line...)
			r.line = nil
			p.unsent = r.next
		}
		p.mu.Unlock()
		if len(buf) == 0 {
			select {
			case <-p.sendSig:
				continue
			case <-pr.stop:
				signal(p.sendSig)
				return
			}
		}
		if _, err := pr.stdin.Write(buf); err != nil {
			// The process is gone or closed its stdin: what was written
			// is rejected when it is retired.
			p.log.Warn("write policy plugin: write failed: killing it", "err", err)
			pr.kill()
			<-pr.stop
			signal(p.sendSig)
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// readAnswers reads pr's stdout and resolves requests.
func (p *Plugin) readAnswers(pr *proc) {
	defer p.wg.Done()
	defer close(pr.readerDone)
	defer pr.stdout.Close()
	br := bufio.NewReaderSize(pr.stdout, 64<<10)
	for {
		line, long, err := readLine(br)
		if len(line) > 0 || long {
			p.handleLine(pr, line, long)
		}
		if err != nil {
			return
		}
	}
}

// logStderr logs pr's stderr line by line.
func (p *Plugin) logStderr(pr *proc) {
	defer p.wg.Done()
	defer close(pr.stderrDone)
	defer pr.stderr.Close()
	br := bufio.NewReaderSize(pr.stderr, 16<<10)
	pid := pr.cmd.Process.Pid
	for {
		line, long, err := readLine(br)
		if len(line) > 0 {
			attrs := []any{"pid", pid, "line", string(line)}
			if long {
				attrs = append(attrs, "truncated", true)
			}
			p.log.Info("write policy plugin stderr", attrs...)
		}
		if err != nil {
			return
		}
	}
}
