package live

// The external tests reach a FileSource's test hooks through these.

// SetChecked has s call checked after the look made for each tick.
func SetChecked(s *FileSource, checked func()) { s.checked = checked }

// SetRead has s read its file with read.
func SetRead(s *FileSource, read func(path string) ([]byte, string, error)) { s.read = read }
