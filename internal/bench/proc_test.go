package bench

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const fakeStat = "4242 (petrel (relay) x) S 1 4242 4242 0 -1 4194560 2045 0 0 0 1234 567 0 0 20 0 12 0 1000 123456789 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

const fakeStatus = `Name:	petrel
Umask:	0022
State:	S (sleeping)
Pid:	4242
VmPeak:	 2000000 kB
VmSize:	 1900000 kB
VmHWM:	   81920 kB
VmRSS:	   40960 kB
Threads:	12
`

func writeFakeProc(t *testing.T, pid, stat, status string) ProcFS {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, pid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	return ProcFS{Root: root}
}

func TestProcFSFake(t *testing.T) {
	fs := writeFakeProc(t, "4242", fakeStat, fakeStatus)
	st, err := fs.Read(4242)
	if err != nil {
		t.Fatal(err)
	}
	if want := (1234 + 567) * 10 * time.Millisecond; st.CPU != want {
		t.Errorf("CPU %v, want %v", st.CPU, want)
	}
	if st.RSSBytes != 40960<<10 || st.HWMBytes != 81920<<10 {
		t.Errorf("RSS %d HWM %d", st.RSSBytes, st.HWMBytes)
	}
	if _, err := fs.Read(1); err == nil {
		t.Error("missing pid read without error")
	}
}

func TestParseStatCPU(t *testing.T) {
	f := func(in string, want time.Duration, ok bool) {
		t.Helper()
		got, err := ParseStatCPU([]byte(in))
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("ParseStatCPU(%.40q) = %v, %v; want %v ok=%v", in, got, err, want, ok)
		}
		if err != nil && !errors.Is(err, ErrProc) {
			t.Errorf("error %v is not ErrProc", err)
		}
	}
	f(fakeStat, 18010*time.Millisecond, true)
	f("1 (a) R 0 0 0 0 0 0 0 0 0 0 3 4", 70*time.Millisecond, true)
	f("1 (a) R 0 0 0 0 0 0 0 0 0 0 3", 0, false)
	f("1 a R 0 0 0 0 0 0 0 0 0 0 3 4", 0, false)
	f("1 (a) R 0 0 0 0 0 0 0 0 0 0 x 4", 0, false)
	f("1 (a) R 0 0 0 0 0 0 0 0 0 0 -3 4", 0, false)
	f("1 (a) R 0 0 0 0 0 0 0 0 0 0 18446744073709551615 0", 0, false)
	f("", 0, false)
}

func TestParseStatusMem(t *testing.T) {
	f := func(in string, rss, hwm int64, ok bool) {
		t.Helper()
		r, h, err := ParseStatusMem([]byte(in))
		if ok != (err == nil) || (ok && (r != rss || h != hwm)) {
			t.Errorf("ParseStatusMem(%.40q) = %d, %d, %v; want %d, %d ok=%v", in, r, h, err, rss, hwm, ok)
		}
	}
	f(fakeStatus, 40960<<10, 81920<<10, true)
	f("VmHWM: 2 kB\nVmRSS: 1 kB\n", 1024, 2048, true)
	f("VmRSS: 1 kB\n", 0, 0, false)
	f("VmHWM: 2 kB\nVmRSS: 1 MB\n", 0, 0, false)
	f("VmHWM: 2 kB\nVmRSS: x kB\n", 0, 0, false)
	f("VmHWM: 2 kB\nVmRSS:\n", 0, 0, false)
	f("", 0, 0, false)
}

func TestProcFSSelf(t *testing.T) {
	var fs ProcFS
	st, err := fs.Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.RSSBytes <= 0 || st.HWMBytes <= 0 || st.CPU < 0 {
		t.Errorf("own process: %+v", st)
	}
	s := &Sampler{PID: os.Getpid(), Interval: 5 * time.Millisecond}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU and memory so there is something to see.
	buf := make([][]byte, 0, 64)
	deadline := time.Now().Add(60 * time.Millisecond)
	for time.Now().Before(deadline) {
		buf = append(buf[:0], make([]byte, 1<<16))
	}
	_ = buf
	u := s.Stop()
	if u.Err != "" || u.Samples < 2 || u.RSSPeakBytes < u.RSSStartBytes || u.HWMBytes <= 0 || u.CPUSeconds < 0 {
		t.Errorf("sampler usage %+v", u)
	}
	if err := (&Sampler{PID: -1}).Start(); err == nil {
		t.Error("sampler started on pid -1")
	}
}

func FuzzParseStatCPU(f *testing.F) {
	f.Add([]byte(fakeStat))
	f.Add([]byte("1 (a) R 0 0 0 0 0 0 0 0 0 0 3 4"))
	f.Add([]byte("1 ()) R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := ParseStatCPU(b); err == nil && d < 0 {
			t.Fatalf("negative CPU %v", d)
		}
	})
}

func FuzzParseStatusMem(f *testing.F) {
	f.Add([]byte(fakeStatus))
	f.Add([]byte("VmHWM: 2 kB\nVmRSS: 1 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseStatusMem(b)
	})
}
