package sqlitestore

import "log/slog"

// Logger returns the store's logger (Options.Logger, or slog.Default()).
// A shell.Runtime or shell.Router given no logger of its own logs here
// too, so one setting serves the store and the runtime.
func (s *Store) Logger() *slog.Logger { return s.log }
