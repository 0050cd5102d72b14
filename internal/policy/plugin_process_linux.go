//go:build linux

package policy

import (
	"os"
	"os/exec"
	"syscall"
)

// fileStamp identifies a version of the plugin file.
type fileStamp struct {
	mod  int64 // mtime, unix nanos
	ch   int64 // ctime, unix nanos: also changed by chmod
	size int64
	ino  uint64
	dev  uint64
}

func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{mod: fi.ModTime().UnixNano(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino, st.dev = uint64(sys.Ino), uint64(sys.Dev)
		st.ch = int64(sys.Ctim.Sec)*1e9 + int64(sys.Ctim.Nsec)
	}
	return st, nil
}

// setProcessGroup puts the plugin in its own process group, so that killing
// it also kills what it started (a shell command's children).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killProcessGroup kills the plugin's process group and the plugin.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
