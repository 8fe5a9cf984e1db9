package breaker

import "strings"

// A group's key names one downstream method ("inventory.GetStock") or one
// method at one target ("inventory.GetStock@10.0.0.7:443"). The key of a
// per-target breaker is made by [TargetKey] and read by [SplitKey]; a
// [Group] applies the override of the method to it when the key has none
// of its own, and [GroupConfig.ColdTargets] starts its breaker cold.
const targetSep = "@"

// TargetKey is the group key of the breaker for method at target: the two
// joined by "@". The method must not contain "@"; the target may, as
// [SplitKey] splits at the first one.
func TargetKey(method, target string) string { return method + targetSep + target }

// SplitKey splits a group key into the method and the target, as
// [TargetKey] joined them. A per-method key (one without "@") is its own
// method, with an empty target.
func SplitKey(key string) (method, target string) {
	method, target, _ = strings.Cut(key, targetSep)
	return method, target
}

// isTargetKey reports whether key is a per-target key, one made by
// [TargetKey] (its target may be empty).
func isTargetKey(key string) bool { return strings.Contains(key, targetSep) }
