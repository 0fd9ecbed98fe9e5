package amp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// EnvHome names the environment variable that overrides the default state
// directory of the hook CLI.
const EnvHome = "SWITCHBOARD_AMP_HOME"

// DefaultStateDir returns $SWITCHBOARD_AMP_HOME, or ~/.switchboard/amp.
func DefaultStateDir() (string, error) {
	if d := os.Getenv(EnvHome); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("amp: state directory: %w", err)
	}
	return filepath.Join(home, ".switchboard", "amp"), nil
}

// FileStore is a StateStore keeping one JSON file per session in a
// directory. Writes go to a temporary file that is renamed into place, and
// an advisory lock (flock on a per-session lock file) serialises Updates
// across goroutines and processes.
type FileStore struct {
	dir string
}

// NewFileStore returns a FileStore in dir; the directory is created on the
// first write.
func NewFileStore(dir string) *FileStore { return &FileStore{dir: dir} }

// Dir returns the store's directory.
func (f *FileStore) Dir() string { return f.dir }

// fileName maps a session id to a safe file name stem: ids made of
// [A-Za-z0-9_-] (and dots not at the start) up to 96 bytes are used as they
// are, anything else is hashed.
func fileName(sessionID string) string {
	ok := len(sessionID) <= 96 && sessionID[0] != '.'
	for i := 0; ok && i < len(sessionID); i++ {
		c := sessionID[i]
		ok = c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
	}
	if ok {
		return "s-" + sessionID
	}
	sum := sha256.Sum256([]byte(sessionID))
	return "h-" + hex.EncodeToString(sum[:16])
}

func (f *FileStore) statePath(sessionID string) string {
	return filepath.Join(f.dir, fileName(sessionID)+".json")
}

// Load implements StateStore. It reads without locking: writes are atomic
// renames, so a reader sees either the old or the new file.
func (f *FileStore) Load(_ context.Context, sessionID string) (State, bool, error) {
	if sessionID == "" {
		return State{}, false, ErrEmptySession
	}
	return f.read(sessionID)
}

func (f *FileStore) read(sessionID string) (State, bool, error) {
	data, err := os.ReadFile(f.statePath(sessionID))
	if errors.Is(err, fs.ErrNotExist) {
		return State{SessionID: sessionID}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("amp: load state: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, false, fmt.Errorf("amp: load state %s: %w", f.statePath(sessionID), err)
	}
	st.SessionID = sessionID
	return st, true, nil
}

// Update implements StateStore.
func (f *FileStore) Update(ctx context.Context, sessionID string, fn func(*State) error) error {
	if sessionID == "" {
		return ErrEmptySession
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return fmt.Errorf("amp: state directory: %w", err)
	}
	unlock, err := lockFile(filepath.Join(f.dir, fileName(sessionID)+".lock"))
	if err != nil {
		return fmt.Errorf("amp: lock state: %w", err)
	}
	defer unlock()
	st, _, err := f.read(sessionID)
	if err != nil {
		return err
	}
	if err := fn(&st); err != nil {
		return err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("amp: encode state: %w", err)
	}
	return writeFileAtomic(f.statePath(sessionID), data)
}

// writeFileAtomic writes data to a temporary file in the target's directory
// and renames it over the target.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("amp: save state: %w", err)
	}
	name := tmp.Name()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(name)
		return fmt.Errorf("amp: save state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return fmt.Errorf("amp: save state: %w", err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return fmt.Errorf("amp: save state: %w", err)
	}
	return nil
}
