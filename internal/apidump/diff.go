package main

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 2

// An edit is one line of a diff: ' ' kept, '-' only in the old text, '+'
// only in the new; a and b are the line's indexes in the old and new text
// (for an insertion a is where it goes, and so on).
type edit struct {
	op   byte
	a, b int
	line string
}

// unifiedDiff returns the changes from old to new in the unified style of
// diff -u, with hunk headers and diffContext lines of context, or "" when
// the texts are equal.
func unifiedDiff(oldName, newName, old, new string) string {
	if old == new {
		return ""
	}
	edits := lineEdits(splitLines(old), splitLines(new))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldName, newName)
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			i++
			continue
		}
		// A hunk runs from diffContext lines before this change to
		// diffContext lines after the last change that follows the one
		// before it within 2*diffContext unchanged lines, as in diff -u.
		start, end := max(0, i-diffContext), i
		for j := i; j < len(edits) && j <= end+1+2*diffContext; j++ {
			if edits[j].op != ' ' {
				end = j
			}
		}
		end = min(len(edits), end+1+diffContext)
		var body strings.Builder
		na, nb := 0, 0
		for _, e := range edits[start:end] {
			if e.op != '+' {
				na++
			}
			if e.op != '-' {
				nb++
			}
			body.WriteByte(e.op)
			body.WriteString(strings.TrimSuffix(e.line, "\n") + "\n")
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n%s", hunkRange(edits[start].a, na), hunkRange(edits[start].b, nb), body.String())
		i = end
	}
	return out.String()
}

// splitLines splits s after each newline; a final newline starts no line.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// hunkRange prints a hunk's start line (1-based) and length as diff -u
// does: an empty range names the line before it.
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// lineEdits is the shortest edit script from a to b, found through their
// longest common subsequence. Golden files are a few hundred lines, so
// the quadratic table is small.
func lineEdits(a, b []string) []edit {
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var edits []edit
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			edits = append(edits, edit{' ', i, j, a[i]})
			i, j = i+1, j+1
		case j == len(b) || (i < len(a) && lcs[i+1][j] >= lcs[i][j+1]):
			edits = append(edits, edit{'-', i, j, a[i]})
			i++
		default:
			edits = append(edits, edit{'+', i, j, b[j]})
			j++
		}
	}
	return edits
}
