package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// ErrProc reports a /proc file that could not be parsed.
var ErrProc = errors.New("bench: bad /proc data")

// ClockTicks is the unit of utime and stime in /proc/<pid>/stat
// (sysconf(_SC_CLK_TCK)); it is 100 on every Linux platform Go supports.
const ClockTicks = 100

// ProcStat is what the sampler reads about one process.
type ProcStat struct {
	CPU      time.Duration // utime + stime
	RSSBytes int64         // VmRSS
	HWMBytes int64         // VmHWM: peak RSS over the process's whole life
}

// ProcFS reads process statistics under Root (default "/proc"), so tests
// can point it at a fake tree.
type ProcFS struct {
	Root string
}

func (p ProcFS) path(pid int, file string) string {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(root, strconv.Itoa(pid), file)
}

// Read returns pid's CPU time and memory figures.
func (p ProcFS) Read(pid int) (ProcStat, error) {
	var st ProcStat
	b, err := os.ReadFile(p.path(pid, "stat"))
	if err != nil {
		return st, err
	}
	if st.CPU, err = ParseStatCPU(b); err != nil {
		return st, err
	}
	b, err = os.ReadFile(p.path(pid, "status"))
	if err != nil {
		return st, err
	}
	st.RSSBytes, st.HWMBytes, err = ParseStatusMem(b)
	return st, err
}

// ParseStatCPU returns utime+stime from the contents of /proc/<pid>/stat.
// The command name (field 2) may contain spaces and parentheses, so fields
// are counted from the last ')'.
func ParseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat has no ')'", ErrProc)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: stat has %d fields after the name", ErrProc, len(f))
	}
	ut, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	// 2^38 ticks is 87 years of CPU: anything larger is garbage (and the
	// sum could overflow a Duration).
	if err1 != nil || err2 != nil || ut > 1<<38 || st > 1<<38 {
		return 0, fmt.Errorf("%w: stat utime %q stime %q", ErrProc, f[11], f[12])
	}
	return time.Duration(ut+st) * (time.Second / ClockTicks), nil
}

// ParseStatusMem returns VmRSS and VmHWM in bytes from the contents of
// /proc/<pid>/status. A missing line (a kernel thread, a zombie) is an
// error.
func ParseStatusMem(b []byte) (rss, hwm int64, err error) {
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst, haveRSS = &rss, true
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst, haveHWM = &hwm, true
		default:
			continue
		}
		f := bytes.Fields(line[bytes.IndexByte(line, ':')+1:])
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, 0, fmt.Errorf("%w: status line %q", ErrProc, line)
		}
		v, perr := strconv.ParseInt(string(f[0]), 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("%w: status line %q", ErrProc, line)
		}
		*dst = v << 10
	}
	if !haveRSS || !haveHWM {
		return 0, 0, fmt.Errorf("%w: status has no VmRSS/VmHWM", ErrProc)
	}
	return rss, hwm, nil
}

// Usage is a process's resource use over a scenario's timed part.
type Usage struct {
	PID int `json:"pid"`
	// CPUSeconds is utime+stime consumed during the measurement.
	CPUSeconds float64 `json:"cpu_s"`
	// RSSStartBytes is VmRSS when the measurement started.
	RSSStartBytes int64 `json:"rss_start_bytes"`
	// RSSPeakBytes is the largest VmRSS sampled during the measurement
	// (every Interval, plus at start and end).
	RSSPeakBytes int64 `json:"rss_peak_bytes"`
	// HWMBytes is VmHWM at the end: the peak over the process's whole life,
	// which may predate the measurement. The kernel updates it lazily, so
	// it can read slightly below a sampled VmRSS.
	HWMBytes int64 `json:"vm_hwm_bytes"`
	// Samples is the number of RSS samples taken.
	Samples int `json:"samples"`
	// CPUMicrosPerEvent, CPUMicrosPerDelivery, CPUMicrosPerRequest and
	// CPUMicrosPerConn divide CPU time by the scenario's accepted events,
	// deliveries, completed REQs and held connections (0: not applicable).
	// Each divides the whole CPU time of the timed part: in fanout, for
	// example, per-delivery includes the ingest of the published events.
	CPUMicrosPerEvent    float64 `json:"cpu_us_per_accepted_event,omitempty"`
	CPUMicrosPerDelivery float64 `json:"cpu_us_per_delivery,omitempty"`
	CPUMicrosPerRequest  float64 `json:"cpu_us_per_request,omitempty"`
	CPUMicrosPerConn     float64 `json:"cpu_us_per_connection,omitempty"`
	// Err is the sampler's error, if reading /proc failed.
	Err string `json:"error,omitempty"`
}

// Sampler measures a process's CPU time and RSS between Start and Stop,
// sampling VmRSS every Interval.
type Sampler struct {
	FS       ProcFS
	PID      int
	Interval time.Duration // default 100ms

	mu    sync.Mutex
	start ProcStat
	peak  int64
	n     int
	err   error
	stop  chan struct{}
	done  chan struct{}
}

// Start takes the first reading and starts sampling. It fails if the
// process cannot be read.
func (s *Sampler) Start() error {
	st, err := s.FS.Read(s.PID)
	if err != nil {
		return fmt.Errorf("read process %d: %w", s.PID, err)
	}
	if s.Interval <= 0 {
		s.Interval = 100 * time.Millisecond
	}
	s.start, s.peak, s.n = st, st.RSSBytes, 1
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop()
	return nil
}

func (s *Sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sample()
		}
	}
}

func (s *Sampler) sample() (ProcStat, bool) {
	st, err := s.FS.Read(s.PID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return st, false
	}
	s.n++
	s.peak = max(s.peak, st.RSSBytes)
	return st, true
}

// Now reads the process's RSS now and returns it with the RSS at Start.
func (s *Sampler) Now() (rss, start int64, ok bool) {
	st, ok := s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.RSSBytes, s.start.RSSBytes, ok
}

// Stop ends sampling and returns the usage since Start.
func (s *Sampler) Stop() Usage {
	close(s.stop)
	<-s.done
	end, ok := s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := Usage{PID: s.PID, RSSStartBytes: s.start.RSSBytes, RSSPeakBytes: s.peak, Samples: s.n}
	if ok {
		u.CPUSeconds = (end.CPU - s.start.CPU).Seconds()
		u.HWMBytes = end.HWMBytes
	}
	if s.err != nil {
		u.Err = s.err.Error()
	}
	return u
}
