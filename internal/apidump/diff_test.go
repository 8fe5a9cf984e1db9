package main

import "testing"

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{
			"one line changed, with context",
			"1\n2\n3\n4\n5\n6\n7\n", "1\n2\n3\nfour\n5\n6\n7\n",
			"--- old\n+++ new\n@@ -2,5 +2,5 @@\n 2\n 3\n-4\n+four\n 5\n 6\n",
		},
		{
			"insertion at the start",
			"b\nc\n", "a\nb\nc\n",
			"--- old\n+++ new\n@@ -1,2 +1,3 @@\n+a\n b\n c\n",
		},
		{
			"deletion at the end",
			"a\nb\nc\n", "a\nb\n",
			"--- old\n+++ new\n@@ -1,3 +1,2 @@\n a\n b\n-c\n",
		},
		{
			"distant changes make two hunks",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n", "x\n2\n3\n4\n5\n6\n7\n8\ny\n",
			"--- old\n+++ new\n@@ -1,3 +1,3 @@\n-1\n+x\n 2\n 3\n@@ -7,3 +7,3 @@\n 7\n 8\n-9\n+y\n",
		},
		{
			"near changes share a hunk",
			"1\n2\n3\n4\n5\n6\n", "x\n2\n3\n4\n5\ny\n",
			"--- old\n+++ new\n@@ -1,6 +1,6 @@\n-1\n+x\n 2\n 3\n 4\n 5\n-6\n+y\n",
		},
		{
			"into an empty text",
			"", "a\n",
			"--- old\n+++ new\n@@ -0,0 +1,1 @@\n+a\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unifiedDiff("old", "new", tt.old, tt.new); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
