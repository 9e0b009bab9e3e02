package main

import "testing"

func TestListsFlag(t *testing.T) {
	help := "usage: payd serve [flags]\n\nflags:\n  -addr string\n    \tlisten address (-pprof is not here)\n  -quiet\n    \tno log\n"
	for name, want := range map[string]bool{"addr": true, "quiet": true, "pprof": false, "add": false} {
		if got := listsFlag(help, name); got != want {
			t.Errorf("listsFlag(help, %q) = %t, want %t", name, got, want)
		}
	}
}
