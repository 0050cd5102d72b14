package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/petrel-relay/petrel/internal/store"
)

// ErrNotFound is what a Persister's Load returns for a key that was never
// saved. A Persister may return store.ErrNotFound instead; both are
// recognized with errors.Is.
var ErrNotFound = errors.New("policy: not found")

// Persister stores small blobs durably; the relay implements it over its
// store. Save must be durable (synced) when it returns: the lists
// acknowledge a change only after Save. Implementations must be safe for
// concurrent use; Lists serializes its own calls, so one Lists never calls
// Save concurrently for one key.
type Persister interface {
	// Load returns the value saved under key, or an error wrapping
	// ErrNotFound (or store.ErrNotFound) if there is none. The caller owns
	// the returned slice.
	Load(ctx context.Context, key string) ([]byte, error)
	// Save stores value under key, replacing any earlier value. It does
	// not retain value after returning.
	Save(ctx context.Context, key string, value []byte) error
}

// Updater is a Persister whose storage other processes may write too
// (the PostgreSQL store, shared by the nodes of a cluster). Its Update
// changes one key as one atomic step against every other Update of the
// key, whichever process makes it, so that two changes made at once
// through two nodes both stay.
type Updater interface {
	// Update calls f with the value saved under key (nil and found false
	// if there is none) and saves what f returns, durably, before it
	// returns; no other Update of key runs in between. If f fails,
	// nothing is saved and Update returns f's error. f may be called
	// more than once (a retried transaction) and must not keep old.
	Update(ctx context.Context, key string, f func(old []byte, found bool) ([]byte, error)) error
}

// Update changes key through p with f (see Updater): atomically if p is
// an Updater, else by Load, f and Save, which is atomic only among
// callers that serialize their changes of key (as Lists and the relay do
// within one process).
func Update(ctx context.Context, p Persister, key string, f func(old []byte, found bool) ([]byte, error)) error {
	if u, ok := p.(Updater); ok {
		return u.Update(ctx, key, f)
	}
	return loadSave(ctx, p, key, f)
}

// loadSave is Update by Load, f and Save.
func loadSave(ctx context.Context, p Persister, key string, f func(old []byte, found bool) ([]byte, error)) error {
	old, err := p.Load(ctx, key)
	found := err == nil
	if err != nil && !isNotFound(err) {
		return err
	}
	if !found {
		old = nil
	}
	v, err := f(old, found)
	if err != nil {
		return err
	}
	return p.Save(ctx, key, v)
}

// MetaStore is a store that keeps small named blobs beside its events
// (both of petrel's stores).
type MetaStore interface {
	LoadMeta(ctx context.Context, name string) ([]byte, error)
	SaveMeta(ctx context.Context, name string, value []byte) error
}

// metaUpdater is a MetaStore that changes a blob atomically against
// other processes (the PostgreSQL store).
type metaUpdater interface {
	UpdateMeta(ctx context.Context, name string, f func(old []byte, found bool) ([]byte, error)) error
}

// MetaPersister is the Persister over a store's named blobs, so that the
// NIP-86 state is backed up, exported and shared with the events. It is
// an Updater: through the store's UpdateMeta if it has one, else by
// Load, f and Save.
type MetaPersister struct{ Store MetaStore }

// Load returns the blob saved under key.
func (p MetaPersister) Load(ctx context.Context, key string) ([]byte, error) {
	return p.Store.LoadMeta(ctx, key)
}

// Save saves value under key.
func (p MetaPersister) Save(ctx context.Context, key string, value []byte) error {
	return p.Store.SaveMeta(ctx, key, value)
}

// Update changes key with f (see Updater).
func (p MetaPersister) Update(ctx context.Context, key string, f func(old []byte, found bool) ([]byte, error)) error {
	if u, ok := p.Store.(metaUpdater); ok {
		return u.UpdateMeta(ctx, key, f)
	}
	return loadSave(ctx, p, key, f)
}

func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, store.ErrNotFound)
}

// MemPersister is a Persister in memory, for tests and for relays that do
// not want run-time list changes to survive a restart. The zero value is
// ready to use.
type MemPersister struct {
	mu sync.Mutex
	m  map[string][]byte
	// Fail, if set, is returned by Save (and the value is not stored).
	Fail error
}

// Load returns a copy of the value saved under key.
func (p *MemPersister) Load(_ context.Context, key string) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return append([]byte(nil), v...), nil
}

// Save stores a copy of value under key, or returns p.Fail if it is set.
func (p *MemPersister) Save(_ context.Context, key string, value []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.save(key, value)
}

// Update changes key with f under p's lock (see Updater): several Lists
// on one MemPersister are the nodes of a cluster on one shared store.
func (p *MemPersister) Update(_ context.Context, key string, f func(old []byte, found bool) ([]byte, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, found := p.m[key]
	v, err := f(append([]byte(nil), old...), found)
	if err != nil {
		return err
	}
	return p.save(key, v)
}

// save is Save with p.mu held.
func (p *MemPersister) save(key string, value []byte) error {
	if p.Fail != nil {
		return p.Fail
	}
	if p.m == nil {
		p.m = make(map[string][]byte)
	}
	p.m[key] = append([]byte(nil), value...)
	return nil
}

// DirPersister is a Persister over a directory: one file per key (the
// key's "/" replaced by "_", with ".json" appended), written to a
// temporary file, synced and renamed into place, and the directory synced,
// so a crash leaves either the old value or the new one.
type DirPersister struct {
	Dir string
}

func (p DirPersister) path(key string) (string, error) {
	name := strings.ReplaceAll(key, "/", "_")
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `\`+"\x00") {
		return "", fmt.Errorf("policy: bad persister key %q", key)
	}
	return filepath.Join(p.Dir, name+".json"), nil
}

// Load reads the file for key.
func (p DirPersister) Load(_ context.Context, key string) ([]byte, error) {
	path, err := p.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return b, err
}

// Save replaces the file for key atomically and durably.
func (p DirPersister) Save(_ context.Context, key string, value []byte) error {
	path, err := p.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(p.Dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(value)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("policy: save %s: %w", path, err)
	}
	if d, err := os.Open(p.Dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("policy: sync %s: %w", p.Dir, err)
		}
	}
	return nil
}
