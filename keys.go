package breaker

import "strings"

// A group's key names one method ("inventory.GetStock") or one method at
// one target ("inventory.GetStock@10.0.0.7:443", see [TargetKey]).
const targetSep = "@"

// TargetKey is the group key for method at target, joined by "@". The
// method must not contain "@"; the target may.
func TargetKey(method, target string) string { return method + targetSep + target }

// SplitKey splits a group key at its first "@" into method and target;
// a per-method key has an empty target.
func SplitKey(key string) (method, target string) {
	method, target, _ = strings.Cut(key, targetSep)
	return method, target
}

// isTargetKey reports whether key is a per-target key.
func isTargetKey(key string) bool { return strings.Contains(key, targetSep) }
