// Command startupab times whole commands as processes, alternating them
// run by run, so that a noisy machine (a busy neighbour, the page cache,
// frequency changes) weighs on each alike: the A/B comparison of two
// builds' start-up that hyperfine, which runs one command's runs
// together, does not give. Each command line is split on spaces (no
// quoting); its output goes to /dev/null and a failure stops the run.
// After the warm-up rounds, each command's minimum, 10th percentile and
// median wall time are printed, in milliseconds. The parent's own spawn
// (fork and exec from a Go process) is in every figure, alike for all.
//
//	taskset -c 1 go run ./scripts/startupab -n 300 "./old version" "./new version"
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 300, "timed runs of each command")
	warm := flag.Int("warmup", 20, "untimed rounds first")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: startupab [-n runs] [-warmup rounds] \"command args\"...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *n < 1 || *warm < 0 {
		flag.Usage()
		os.Exit(2)
	}
	var cmds [][]string
	for _, c := range flag.Args() {
		f := strings.Fields(c)
		if len(f) == 0 {
			fmt.Fprintln(os.Stderr, "startupab: an empty command")
			os.Exit(2)
		}
		cmds = append(cmds, f)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "startupab:", err)
		os.Exit(1)
	}
	ms := make([][]float64, len(cmds))
	for round := range *warm + *n {
		for i, c := range cmds {
			cmd := exec.Command(c[0], c[1:]...)
			cmd.Stdout, cmd.Stderr = devnull, devnull
			start := time.Now()
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "startupab: %s: %v\n", strings.Join(c, " "), err)
				os.Exit(1)
			}
			if round >= *warm {
				ms[i] = append(ms[i], float64(time.Since(start))/float64(time.Millisecond))
			}
		}
	}
	for i, c := range cmds {
		t := ms[i]
		slices.Sort(t)
		fmt.Printf("min %.2f  p10 %.2f  median %.2f ms  %s\n", t[0], t[len(t)/10], t[len(t)/2], strings.Join(c, " "))
	}
}
