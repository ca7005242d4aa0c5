package shell

// orDefaults is the options a function was given as opts: a copy of *opts
// (the function may fill in defaults without touching the caller's value),
// or the zero value, every default, when opts is nil. Every function of
// the package taking an options struct takes it as a pointer, nil meaning
// the defaults, and reads it through orDefaults.
func orDefaults[T any](opts *T) T {
	if opts == nil {
		var zero T
		return zero
	}
	return *opts
}
