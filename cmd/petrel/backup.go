package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

func init() { extraCommands = append(extraCommands, backupCmd) }

// backupFlags are the flags of `petrel backup`.
type backupFlags struct {
	common  commonFlags
	verify  bool
	jsonOut bool
}

func backupCmd() *cobra.Command {
	var f backupFlags
	cmd := &cobra.Command{
		Use:   "backup <dest-dir>",
		Short: "Copy the store into a new directory as a consistent pebble checkpoint",
		Long: `Backup writes a pebble checkpoint of the store into <dest-dir>, which
must not exist (nor be inside the data directory): a complete, consistent copy of the database that
petrel serve --data <dest-dir> opens as it is. Files are hard-linked when
<dest-dir> is on the same filesystem (the backup is instant and takes no
space until the store moves on; copy it elsewhere to keep it safe), and
copied otherwise.

The copy is written under <dest-dir>.partial-PID-N and renamed to
<dest-dir> once whole: a backup stopped part way (Ctrl-C, a crash) leaves
that directory, which no store opens; remove it.

--verify opens the copy afterwards and checks that it holds as many
events as the store.

While petrel serve runs on the data directory, backup asks it for the
checkpoint through its control socket (<data>/petrel.sock, which only the
user serve runs as, and root, can use), so the relay need not stop; the
copy then holds every event committed before the request, and --verify
opens it and counts its events (the store itself keeps moving, so there is
no fixed count to compare with). Otherwise backup opens the store itself.

Backup copies the embedded pebble store only: with store.backend
"postgres" it refuses at once; back the database up with PostgreSQL's
own tools (pg_dump, pg_basebackup; docs/operations.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBackupCmd(cmd.Context(), &f, args[0], cmd.OutOrStdout())
		},
	}
	f.common.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&f.verify, "verify", false, "open the copy and compare its event count with the store's")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object instead of the summary line")
	return cmd
}

// backupResult is what a backup did.
type backupResult struct {
	Dest    string  `json:"dest"`
	Bytes   int64   `json:"bytes"`            // size of the files in the copy
	Events  int64   `json:"events,omitempty"` // with --verify
	Seconds float64 `json:"seconds"`
	Online  bool    `json:"online"` // written by the running relay
}

func runBackupCmd(ctx context.Context, f *backupFlags, dest string, stdout io.Writer) error {
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	if err := backendRefusal(cfg, "backup", "back the database up with PostgreSQL's tools (pg_dump --schema "+cfg.Store.PostgresSchema+", or pg_basebackup)"); err != nil {
		return err
	}
	if err := checkNewDir(dest); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	abs, err := filepath.Abs(dest)
	if err != nil {
		return err
	}
	if store, err := filepath.Abs(cfg.Store.Path); err == nil && strings.HasPrefix(abs, store+string(filepath.Separator)) {
		return fmt.Errorf("%s is inside the data directory %s: a backup there is lost with it; give a directory elsewhere (another disk is best)", dest, cfg.Store.Path)
	}
	if res, served, err := askBackup(ctx, cfg.Store.Path, abs, f.verify); served {
		if err != nil {
			return err
		}
		return printBackup(stdout, f, cfg.Store.Path, res)
	}
	st, err := openPebbleTool(cfg, log, toolStoreOptions{})
	if err != nil {
		return err
	}
	start := time.Now()
	res := backupResult{Dest: dest}
	err = backupStore(st, dest)
	if err == nil && f.verify {
		res.Events, err = st.Count(ctx, []nostr.Filter{{}})
	}
	if cerr := st.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close store: %w", cerr)
	}
	if err != nil {
		return err
	}
	if f.verify {
		n, err := countCopy(ctx, cfg, log, dest)
		if err != nil {
			return err
		}
		if n != res.Events {
			return fmt.Errorf("verify: the copy holds %d events, the store %d", n, res.Events)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Bytes, err = dirSize(dest); err != nil {
		return err
	}
	return printBackup(stdout, f, cfg.Store.Path, res)
}

func printBackup(stdout io.Writer, f *backupFlags, storePath string, res backupResult) error {
	if f.jsonOut {
		return printJSON(stdout, res)
	}
	msg := fmt.Sprintf("backup of %s written to %s (%s) in %.1fs", storePath, res.Dest, humanBytes(res.Bytes), res.Seconds)
	if res.Online {
		msg += " by the running relay"
	}
	switch {
	case f.verify && res.Online:
		msg += fmt.Sprintf("; verified: the copy opens and holds %d events", res.Events)
	case f.verify:
		msg += fmt.Sprintf("; verified: %d events", res.Events)
	}
	fmt.Fprintln(stdout, msg)
	return nil
}

// checkNewDir fails unless dest does not exist yet.
func checkNewDir(dest string) error {
	if dest == "" {
		return errors.New("no directory given: backup writes a new directory, named by its argument")
	}
	if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			return fmt.Errorf("%s already exists: backup writes a new directory", dest)
		}
		return err
	}
	return nil
}

// countCopy opens the backup in dest with cfg's store options (and a small
// cache: it may be opened inside the running relay) and counts its events.
func countCopy(ctx context.Context, cfg config.Config, log *slog.Logger, dest string) (int64, error) {
	cfg.Store.Path = dest
	cfg.Store.CacheBytes = 8 << 20
	cp, err := openPebbleTool(cfg, log, toolStoreOptions{})
	if err != nil {
		return 0, fmt.Errorf("verify: %w", err)
	}
	n, err := cp.Count(ctx, []nostr.Filter{{}})
	if cerr := cp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("verify: %w", err)
	}
	return n, nil
}

// backupStore writes a checkpoint of st into dest, which must not exist.
// Writes committed before the call are in it (the WAL is synced first).
func backupStore(st *pebble.Store, dest string) error {
	return st.Checkpoint(dest)
}
