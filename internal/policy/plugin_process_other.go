//go:build !linux

package policy

import (
	"os"
	"os/exec"
)

// fileStamp identifies a version of the plugin file.
type fileStamp struct {
	mod  int64 // mtime, unix nanos
	size int64
}

func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime().UnixNano(), size: fi.Size()}, nil
}

// setProcessGroup does nothing here: process groups are Linux-only in
// petrel, so children of a shell-command plugin may outlive it.
func setProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the plugin.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
